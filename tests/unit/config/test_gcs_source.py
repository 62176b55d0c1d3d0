"""A config kept in Cloud Storage (the local emulator), with a template file beside it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from emulator_stack import StorageEmulator
from shared.adapters.clients import forget_clients, storage_client
from shared.adapters.config_source import load_config
from shared.config.model import FlexStartPlacement
from shared.model.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def config_bucket(clean_storage: StorageEmulator, fresh_name: Callable[[str], str]) -> str:
    forget_clients()  # a client built before the emulator started would talk to Google
    bucket = storage_client().create_bucket(fresh_name("configs"))
    for name in ("config.yaml", "templates/dws-gcloud-config.yaml", "templates/dws-rest-body.json"):
        bucket.blob(f"prod/{name}").upload_from_filename(str(EXAMPLES / name))
    return bucket.name


def test_a_gs_config_reads_its_template_files_from_the_same_bucket(config_bucket: str) -> None:
    config = load_config(f"gs://{config_bucket}/prod/config.yaml")
    assert config.source == f"gs://{config_bucket}/prod/config.yaml"
    assert config.templates["dws-seed-gcloud"].placements == (
        FlexStartPlacement(max_wait=timedelta(seconds=7200)),
    )
    assert config.templates["dws-seed-rest"].display_name == "MyDwsJob"


def test_a_missing_gs_config_is_a_config_error(config_bucket: str) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(f"gs://{config_bucket}/prod/missing.yaml")
