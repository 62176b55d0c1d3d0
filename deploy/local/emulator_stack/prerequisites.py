"""Find the tools the emulators need, or say exactly what is missing and how to install it.

The Google Cloud SDK root is found without running ``gcloud info`` (about a second) when possible:
first ``$CLOUDSDK_ROOT_DIR``, then the real path of the ``gcloud`` on ``PATH`` (``<root>/bin/
gcloud``), and only then ``gcloud info``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from emulator_stack.errors import PrerequisiteMissing

SDK_ROOT_VARIABLE = "CLOUDSDK_ROOT_DIR"

_JAVA_HINT = "install a Java runtime, e.g. `apt-get install default-jre-headless`"
_GCLOUD_HINT = (
    "install the Google Cloud CLI (Debian package google-cloud-cli, see "
    "https://cloud.google.com/sdk/docs/install), or set $CLOUDSDK_ROOT_DIR to its root"
)
_COMPONENT_INSTALL_HINTS = {
    "pubsub-emulator": (
        "`apt-get install google-cloud-cli-pubsub-emulator` "
        "or `gcloud components install pubsub-emulator`"
    ),
    "cloud-firestore-emulator": (
        "`apt-get install google-cloud-cli-firestore-emulator` "
        "or `gcloud components install cloud-firestore-emulator`"
    ),
}


def require_java() -> Path:
    """The ``java`` the emulator scripts will run: ``$JAVA_HOME/bin/java`` or the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return Path(java_home) / "bin" / "java"
    on_path = shutil.which("java")
    if on_path is None:
        raise PrerequisiteMissing(
            f"java was not found (the Pub/Sub and Firestore emulators run on Java): {_JAVA_HINT}"
        )
    return Path(on_path)


def require_sdk_file(component: str, relative_path: str, sdk_root: Path | None = None) -> Path:
    """The path of a file of an SDK component, e.g. the Pub/Sub emulator's start script."""
    root = sdk_root or gcloud_sdk_root()
    path = root / "platform" / component / relative_path
    if not path.is_file():
        hint = _COMPONENT_INSTALL_HINTS.get(component, f"`gcloud components install {component}`")
        raise PrerequisiteMissing(
            f"the gcloud component {component} is not installed ({path} is missing): {hint}"
        )
    return path


@functools.cache
def gcloud_sdk_root() -> Path:
    """The Google Cloud SDK installation root (the folder holding ``bin/`` and ``platform/``)."""
    override = os.environ.get(SDK_ROOT_VARIABLE)
    if override:
        return Path(override)
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise PrerequisiteMissing(f"gcloud was not found on PATH: {_GCLOUD_HINT}")
    resolved = Path(gcloud).resolve()
    if resolved.parent.name == "bin" and (resolved.parent.parent / "platform").is_dir():
        return resolved.parent.parent
    return _sdk_root_from_gcloud_info(gcloud)


def _sdk_root_from_gcloud_info(gcloud: str) -> Path:
    # Slow (a Python start-up of gcloud), so only for installs laid out unlike <root>/bin/gcloud.
    completed = subprocess.run(
        [gcloud, "info", "--format=value(installation.sdk_root)"],
        capture_output=True,
        text=True,
        check=False,
    )
    root = completed.stdout.strip()
    if completed.returncode != 0 or not root:
        raise PrerequisiteMissing(
            f"`gcloud info` could not tell the SDK root ({completed.stderr.strip()}): "
            f"{_GCLOUD_HINT}"
        )
    return Path(root)
