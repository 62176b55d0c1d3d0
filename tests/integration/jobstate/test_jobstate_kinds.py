"""The job-state function over kinds, on the emulators: a CustomJob that carries a pipeline's
labels (the real service's backing job of a TrainingPipeline may) is neither the pipeline
attempt's job nor a duplicate of it: ``OTHER_KIND``, nothing recorded, nothing cancelled."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from typing import cast

from google.cloud.aiplatform_v1 import CustomJob
from jobstate_test_support import VertexAdmin
from run_builders import a_run, an_attempt

from emulator_stack import LOCAL_PROJECT
from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import RunStatus
from shared.handlers.jobstate import JobStateOutcome, apply_job_state
from shared.handlers.services import Services
from shared.model.job_kinds import JobKind

REGION = "us-central1"
PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
CPU_JOB = {
    "displayName": "pipeline-training-task",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "containerSpec": {"imageUri": "us-docker.pkg.dev/local-project/train/probe:1"},
            }
        ]
    },
}


def test_a_custom_job_with_a_pipelines_labels_is_not_the_pipelines_job(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex: VertexAdmin,
    rng: random.Random,
) -> None:
    run_id = f"r-{fresh_name('kinds').replace('_', '-')[-20:]}"
    pipeline = f"{PARENT}/trainingPipelines/4000000000000000001"  # the attempt's recorded job
    attempt = replace(
        an_attempt(
            1,
            region=REGION,
            parent=PARENT,
            intent_at=services.now(),
            job_name=pipeline,
            state="JOB_STATE_RUNNING",
        ),
        job_kind=JobKind.TRAINING_PIPELINE,
    )
    services.ledger.open_run(
        a_run(
            RunStatus.RUNNING,
            attempt,
            run_id=run_id,
            run_key=f"request:{run_id}",
            route="on-request",
            template="two-regions",
            trigger={"kind": "JobRequest"},
        )
    )
    before = services.ledger.get_run(run_id)
    backing = cast(CustomJob, CustomJob.from_json(json.dumps(CPU_JOB)))
    backing.labels = {"vd-run": run_id, "vd-attempt": "1"}
    created = vertex_api.create_custom_job(PARENT, backing)

    result = apply_job_state(vertex_api.get_job(created.name), services, rng)

    assert result.outcome is JobStateOutcome.OTHER_KIND
    after = services.ledger.get_run(run_id)
    assert before is not None and after is not None
    assert after.run == before.run  # nothing recorded: not its job, not a duplicate
    assert vertex.call("GET", "requests?method=CancelCustomJob")["requests"] == []
    assert vertex_api.get_job(created.name).state.name != "JOB_STATE_CANCELLED"
