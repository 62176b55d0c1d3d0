"""The process environment the emulators imply, and the project id used locally.

Client libraries find the emulators through ``*_EMULATOR_HOST`` variables read when a client is
built, so tests and the local stack export them for a while and then put the old values back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

LOCAL_PROJECT = "local-project"
"""The Google Cloud project id every local emulator and test uses."""


@contextmanager
def scoped_environ(updates: Mapping[str, str]) -> Iterator[None]:
    """Set ``updates`` in ``os.environ`` for the ``with`` block, then restore what was there."""
    previous = {name: os.environ.get(name) for name in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
