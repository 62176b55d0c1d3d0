"""shared.aiplatform: aiplatform_v1 imported lazily, the same objects, and a safe fallback.

Each case runs in a fresh interpreter (what is imported is process state); the scripts print one
JSON line that the test reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_CONFIG = REPO_ROOT / "bench" / "dispatch-config.yaml"


def run_python(script: str, *, extra_path: Path | None = None) -> dict:
    environment = dict(os.environ)
    if extra_path is not None:
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(extra_path), environment.get("PYTHONPATH")])
        )
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_rendering_and_validating_a_job_imports_only_the_services_it_uses() -> None:
    report = run_python(
        f"""
        import json, sys
        from shared.adapters.config_source import load_config
        from shared.policy.jobspec import render_job
        from shared.validation import validate_spec

        config = load_config({str(BENCH_CONFIG)!r})
        template = config.templates["resnet-a100"]
        rendered = render_job(
            template, {{"dataset_uri": "gs://bench-datasets/imagenet/2026-12-01/"}},
            template.placements[0], project=config.project, default_region=config.region,
            run_id="r-0123456789abcdef01234567", attempt=1,
        )
        violations = validate_spec(
            rendered.custom_job, template.placements[0], config.guards, region=rendered.region,
            tuning=template.hyperparameter_tuning, pipeline=template.training_pipeline,
        )
        from shared.aiplatform import LAZY_PACKAGES
        print(json.dumps({{
            "strategy": rendered.custom_job.job_spec.scheduling.strategy.name,
            "violations": [str(violation) for violation in violations],
            "lazy": sorted(LAZY_PACKAGES),
            "imported": sorted(name for name in sys.modules if "aiplatform" in name),
        }}))
        """
    )
    assert report["strategy"] == "FLEX_START"
    assert report["violations"] == []
    assert report["lazy"] == ["google.cloud.aiplatform_v1", "google.cloud.aiplatform_v1.types"]
    imported = report["imported"]
    for unrelated in ("dataset_service", "endpoint_service", "data_foundry_service", "tuning_job"):
        assert not [name for name in imported if unrelated in name], unrelated
    assert "google.cloud.aiplatform_v1.types.custom_job" in imported
    assert "google.cloud.aiplatform" not in imported  # the high-level SDK, never


# Every public name, described by what it is: the lazy process and a normal import must agree,
# and within the lazy process each name must be the very object the real __init__ binds.
DESCRIBE_PUBLIC_API = """
    def describe(package):
        return {
            name: f"{type(value).__name__} {getattr(value, '__module__', '')}."
            f"{getattr(value, '__qualname__', getattr(value, '__name__', ''))}"
            for name, value in ((name, getattr(package, name)) for name in package.__all__)
        }
"""


def test_every_public_name_is_the_object_the_real_package_binds() -> None:
    lazy = run_python(
        textwrap.dedent(DESCRIBE_PUBLIC_API)
        + textwrap.dedent(
            """
        import importlib.util, json, sys
        from shared.aiplatform import LAZY_PACKAGES, aiplatform_v1
        lazy_at_start = sorted(LAZY_PACKAGES)
        types = aiplatform_v1.types

        def differences(package):
            # Run the real __init__ beside the lazy package: its relative imports bind the
            # already-imported submodules' objects, which must be the lazy package's.
            spec = importlib.util.find_spec(package.__name__)
            namespace = {"__name__": package.__name__, "__package__": package.__name__,
                         "__path__": package.__path__, "__spec__": spec}
            exec(compile(spec.loader.get_source(package.__name__), spec.origin, "exec"), namespace)
            assert sorted(namespace["__all__"]) == sorted(package.__all__)
            return [name for name in namespace["__all__"]
                    if getattr(package, name) is not namespace[name]]

        print(json.dumps({
            "lazy_at_start": lazy_at_start,
            "top": describe(aiplatform_v1), "types": describe(types),
            "version": aiplatform_v1.__version__,
            "differences": differences(aiplatform_v1) + differences(types),
        }))
        """
        )
    )
    normal = run_python(
        textwrap.dedent(DESCRIBE_PUBLIC_API)
        + textwrap.dedent(
            """
        import json
        from google.cloud import aiplatform_v1
        print(json.dumps({"top": describe(aiplatform_v1), "types": describe(aiplatform_v1.types),
                          "version": aiplatform_v1.__version__}))
        """
        )
    )
    assert lazy["lazy_at_start"] == [
        "google.cloud.aiplatform_v1",
        "google.cloud.aiplatform_v1.types",
    ], "the installed aiplatform_v1 layout is no longer understood: see shared/aiplatform.py"
    assert lazy["differences"] == []
    assert len(lazy["top"]) > 1000
    assert lazy["top"] == normal["top"]
    assert lazy["types"] == normal["types"]
    assert lazy["version"] == normal["version"]


# Packages written to a temporary directory: (their __init__, whether it may stay lazy).
FAKE_SUBMODULES = {"alpha.py": "A = 'from alpha'\n", "beta.py": "B = 'from beta'\n"}
LAYOUTS = [
    pytest.param(
        "from .alpha import A\nfrom .beta import B\n__all__ = ('A', 'B')\n", True, id="generated"
    ),
    pytest.param(
        '"""doc"""\nfrom .alpha import A as Alias\nVERSION = "1"\n__all__ = ("Alias",)\n',
        True,
        id="alias-and-constants",
    ),
    pytest.param("from .alpha import *\n__all__ = ('A',)\n", False, id="star-import"),
    pytest.param("from . import alpha\nA = alpha.A\n__all__ = ('A',)\n", False, id="from-dot"),
    pytest.param(
        "from .alpha import A\nSHOUT = A.upper()\n__all__ = ('A', 'SHOUT')\n",
        False,
        id="uses-a-deferred-name",
    ),
    pytest.param("from .alpha import A\n__all__ = ('A', 'Nowhere')\n", False, id="all-unplaced"),
    pytest.param("A = 'defined here'\n__all__ = ('A',)\n", False, id="nothing-to-defer"),
]


@pytest.mark.parametrize(("init_source", "lazy"), LAYOUTS)
def test_a_layout_not_understood_falls_back_to_the_normal_import(
    tmp_path: Path, init_source: str, lazy: bool
) -> None:
    package = tmp_path / "fakepkg"
    package.mkdir()
    (package / "__init__.py").write_text(init_source)
    for name, source in FAKE_SUBMODULES.items():
        (package / name).write_text(source)
    report = run_python(
        """
        import json, sys
        from shared.aiplatform import LAZY_PACKAGES, lazy_package
        package = lazy_package("fakepkg")
        was_lazy = "fakepkg" in LAZY_PACKAGES
        alpha_before = "fakepkg.alpha" in sys.modules
        values = {name: getattr(package, name, None) for name in package.__all__}
        import fakepkg
        print(json.dumps({"lazy": was_lazy, "alpha_before": alpha_before, "values": values,
                          "same": fakepkg is package}))
        """,
        extra_path=tmp_path,
    )
    normal = run_python(
        """
        import json, fakepkg
        print(json.dumps({name: getattr(fakepkg, name, None) for name in fakepkg.__all__}))
        """,
        extra_path=tmp_path,
    )
    assert report["lazy"] is lazy
    if lazy:
        assert not report["alpha_before"]  # nothing imported until a name is asked for
    assert report["values"] == normal
    assert report["same"]


def test_a_name_that_fails_to_import_fails_as_the_normal_import_would(tmp_path: Path) -> None:
    package = tmp_path / "fakepkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .alpha import A, Missing\n__all__ = ('A',)\n")
    (package / "alpha.py").write_text(FAKE_SUBMODULES["alpha.py"])
    report = run_python(
        """
        import json, sys
        from shared.aiplatform import LAZY_PACKAGES, lazy_package
        package = lazy_package("fakepkg")
        was_lazy = "fakepkg" in LAZY_PACKAGES
        try:
            package.Missing
            error = None
        except ImportError as raised:
            error = str(raised)
        print(json.dumps({"lazy": was_lazy, "error": error,
                          "still_registered": "fakepkg" in sys.modules}))
        """,
        extra_path=tmp_path,
    )
    assert report["lazy"] is True
    assert "cannot import name 'Missing'" in report["error"]
    assert report["still_registered"] is False


def test_a_package_already_imported_is_used_as_it_is() -> None:
    report = run_python(
        """
        import json
        import google.cloud.aiplatform_v1 as eager
        from shared.aiplatform import LAZY_PACKAGES, aiplatform_v1, CustomJob
        print(json.dumps({"same": aiplatform_v1 is eager, "lazy": sorted(LAZY_PACKAGES),
                          "custom_job": CustomJob is eager.CustomJob}))
        """
    )
    assert report == {"same": True, "lazy": [], "custom_job": True}
