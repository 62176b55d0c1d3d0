"""What every ``vertex-dispatch`` subcommand shares: exit statuses, config loading, printing.

It also owns the one-line report of missing Google Cloud credentials: a command that reads a
``gs://`` config or the ledger without them says what failed and what to do, never a traceback.

The subcommand modules of this package import their helpers from here (not from the package
``__init__``, which imports them all), so there is no import cycle.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from shared.config.model import Config

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1  # the config, the event or the job breaks a rule
EXIT_USAGE: Final = 2  # argparse's own code for a bad command line
EXIT_NO_ROUTE: Final = 3
# The reader of stdout went away before all was written (`plan ... | head`): 128 + SIGPIPE, the
# status a shell shows for a command killed by a closed pipe. Never a verdict of any command.
EXIT_CLOSED_PIPE: Final = 141

CONFIG_HELP: Final = "the config file: a local path or gs://BUCKET/path/config.yaml"
CREDENTIALS_FIX: Final = (
    "run `gcloud auth application-default login`, or export the emulator variables that "
    "`./dev demo --keep-running` prints"
)


def no_credentials(what: str, error: BaseException) -> str:
    """One line for a ``GoogleAuthError``: what could not be done, why, and what to do."""
    # google-auth's messages run to several sentences and a URL: the first one says enough.
    why = str(error).strip().partition(". ")[0].rstrip(".") or type(error).__name__
    return f"cannot {what}: no usable Google Cloud credentials ({why}); {CREDENTIALS_FIX}"


def load_config_or_report(source: str, command: str, *, as_json: bool) -> Config | None:
    """The config, or None after reporting why it does not load (it names file and key paths)."""
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters.config_source import load_config
    from shared.config.problems import InvalidConfig
    from shared.model.errors import DispatchError

    try:
        return load_config(source)
    except (DispatchError, GoogleAuthError) as error:  # ConfigError; gs:// unreadable
        if isinstance(error, GoogleAuthError):  # a gs:// config without credentials
            message = no_credentials(f"read the config {source}", error)
        else:
            message = str(error)
        if as_json:
            listed = error.problems if isinstance(error, InvalidConfig) else ()
            print_json(
                {
                    "ok": False,
                    "config": source,
                    "error": message,
                    "config_problems": [{"path": p.path, "message": p.message} for p in listed],
                }
            )
        else:
            fail(command, message)
        return None


def print_json(document: Mapping[str, Any]) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))


def fail(command: str, message: str) -> None:
    print(f"vertex-dispatch {command}: error: {message}", file=sys.stderr)
