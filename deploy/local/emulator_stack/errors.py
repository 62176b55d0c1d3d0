"""Errors raised while starting the local emulators.

One root, ``EmulatorStackError``, and one subclass per way a start can fail, each with a message
that says what to do about it.
"""

from __future__ import annotations


class EmulatorStackError(Exception):
    """Root of every error the emulator stack raises on purpose."""


class PrerequisiteMissing(EmulatorStackError):
    """A tool an emulator needs (java, gcloud, an emulator component) is not installed."""


class EmulatorStartError(EmulatorStackError):
    """An emulator exited early or was not ready before its deadline; the message has its log."""
