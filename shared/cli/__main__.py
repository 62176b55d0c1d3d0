"""``python -m shared.cli``: the same command line as the ``vertex-dispatch`` script."""

import sys

from shared.cli import main

sys.exit(main())
