"""Customer-managed encryption (CMEK): a template's ``encryption_key``, and a REST body's
``encryptionSpec.kmsKeyName``.

The key becomes the job's ``encryptionSpec.kmsKeyName`` (``shared.policy.jobspec``). Vertex AI's
``EncryptionSpec`` reference: "The Cloud KMS key must be in the same region as the resource. It
must have the format projects/{project}/locations/{location}/keyRings/{key_ring}/cryptoKeys/
{crypto_key}". A chain that spans regions therefore needs one key per region: the location may be
written ``{region}``, filled with the region of the placement being tried, so that
``projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs`` names the key ring of
that name in each region. ``vertex-dispatch validate`` checks the filled key's region against the
job's (``shared.validation.job_rules.check_encryption_key``).
"""

from __future__ import annotations

import functools
import re
from typing import Final

from shared.config.fields import read_text
from shared.config.problems import Problems

REGION_PLACEHOLDER: Final = "{region}"
_KMS_ID: Final = r"[a-zA-Z0-9_-]{1,63}"  # Cloud KMS key ring and key IDs
ENCRYPTION_KEY: Final = (
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,19})"
    r"/locations/(?P<location>[a-z]+(-[a-z]+)+[0-9]+|\{region\})"
    rf"/keyRings/{_KMS_ID}/cryptoKeys/{_KMS_ID}"
)


@functools.cache
def encryption_key_pattern() -> re.Pattern[str]:
    """``ENCRYPTION_KEY`` compiled, once, on first use: a config without a key (an unmatched
    event's cold start) never needs it."""
    return re.compile(ENCRYPTION_KEY)


ENCRYPTION_KEY_RULE: Final = (
    "a Cloud KMS key's full name, projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY "
    "(`gcloud kms keys describe KEY --keyring RING --location REGION` shows it), in a region "
    "such as us-central1: Vertex AI takes only a key in the job's own region; write "
    "locations/{region} for a chain that spans regions (one key ring per region)"
)


def read_encryption_key(value: object, path: str, problems: Problems) -> str | None:
    """A key name per ``ENCRYPTION_KEY``; None when absent or wrong (a problem is recorded)."""
    if value is None:
        return None
    return read_text(
        value, path, problems, pattern=encryption_key_pattern(), rule=ENCRYPTION_KEY_RULE
    )


def key_location(key: str) -> str | None:
    """The location of a key name (a region, or ``{region}``); None when it is not one."""
    matched = encryption_key_pattern().fullmatch(key)
    return matched.group("location") if matched else None
