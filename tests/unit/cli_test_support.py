"""What the CLI's unit tests share: the example config, and a machine without credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.adapters import clients

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(REPO / "examples" / "config.yaml")
VALID_RUN_ID = "r-0123456789abcdef01234567"
CREDENTIALS_FIX = (
    "run `gcloud auth application-default login`, or export the emulator variables that "
    "`./dev demo --keep-running` prints"
)
_EMULATOR_VARIABLES = (
    clients.FIRESTORE_EMULATOR_VARIABLE,
    clients.PUBSUB_EMULATOR_VARIABLE,
    clients.STORAGE_EMULATOR_VARIABLE,
    clients.VERTEX_GRPC_EMULATOR_VARIABLE,
    clients.VERTEX_REST_EMULATOR_VARIABLE,
)


def remove_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No emulator variable and no Application Default Credentials, as on a fresh clone.

    ``google.auth.default`` raises what it raises there, whatever this machine holds; cached
    clients are dropped so that every client is built again. Call ``clients.forget_clients()``
    after the test too.
    """
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_default(*_args: object, **_kwargs: object) -> None:
        raise DefaultCredentialsError(
            "Your default credentials were not found. To set up Application Default "
            "Credentials, see https://cloud.google.com/docs/authentication/external/set-up-adc "
            "for more information."
        )

    for variable in _EMULATOR_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(google.auth, "default", no_default)
    clients.forget_clients()
