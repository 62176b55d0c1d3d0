"""``python -m tooling``: the same command line as the ``vertex-dispatch`` script."""

import sys

from tooling import main

sys.exit(main())
