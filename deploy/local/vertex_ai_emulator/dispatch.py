"""The served Vertex AI methods, and the path every call takes whatever its transport.

`RPC_METHODS` is the table of the RPCs the emulator answers: the gRPC service that owns each one,
its request and response types, and the core method that does the work. `Dispatcher.call` is the one
road from a decoded request to its answer: fault injection, the core, the request log.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, struct_pb2

from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.errors import EmulatorError
from vertex_ai_emulator.faults import Fault, FaultInjector, FaultTiming
from vertex_ai_emulator.messages import MessageClass, rfc3339, to_rest_dict
from vertex_ai_emulator.requestlog import RequestLog, RequestRecord

JOB_SERVICE = "google.cloud.aiplatform.v1.JobService"
PIPELINE_SERVICE = "google.cloud.aiplatform.v1.PipelineService"
PERSISTENT_RESOURCE_SERVICE = "google.cloud.aiplatform.v1.PersistentResourceService"
OPERATIONS_SERVICE = "google.longrunning.Operations"
# Compute Engine's reservations.get, served over REST only (rest.py), as the compute_v1 client
# library calls it; its request is recorded as {"project", "zone", "reservation"}.
COMPUTE_RESERVATIONS_SERVICE = "compute.v1.Reservations"

_LOG = logging.getLogger("vertex_ai_emulator.requests")


@dataclass(frozen=True)
class RpcMethod:
    """One served RPC: where it lives, what it takes and returns, and who does the work."""

    service: str
    request_type: MessageClass
    response_type: MessageClass
    invoke: Callable[[Emulator, Any], Any]
    rest_only: bool = False  # not a gRPC method of the emulator (Compute Engine's REST API)


def _cancel_custom_job(emulator: Emulator, request: Any) -> empty_pb2.Empty:
    emulator.cancel_custom_job(request.name)
    return empty_pb2.Empty()


def _cancel_hyperparameter_tuning_job(emulator: Emulator, request: Any) -> empty_pb2.Empty:
    emulator.cancel_hyperparameter_tuning_job(request.name)
    return empty_pb2.Empty()


def _cancel_training_pipeline(emulator: Emulator, request: Any) -> empty_pb2.Empty:
    emulator.cancel_training_pipeline(request.name)
    return empty_pb2.Empty()


RPC_METHODS: dict[str, RpcMethod] = {
    "CreateCustomJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.CreateCustomJobRequest,
        aiplatform_v1.CustomJob,
        lambda emulator, request: emulator.create_custom_job(request.parent, request.custom_job),
    ),
    "GetCustomJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.GetCustomJobRequest,
        aiplatform_v1.CustomJob,
        lambda emulator, request: emulator.get_custom_job(request.name),
    ),
    "ListCustomJobs": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.ListCustomJobsRequest,
        aiplatform_v1.ListCustomJobsResponse,
        lambda emulator, request: emulator.list_custom_jobs(
            request.parent,
            filter=request.filter,
            page_size=request.page_size,
            page_token=request.page_token,
        ),
    ),
    "CancelCustomJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.CancelCustomJobRequest,
        empty_pb2.Empty,
        _cancel_custom_job,
    ),
    "DeleteCustomJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.DeleteCustomJobRequest,
        operations_pb2.Operation,
        lambda emulator, request: emulator.delete_custom_job(request.name),
    ),
    "CreateHyperparameterTuningJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.CreateHyperparameterTuningJobRequest,
        aiplatform_v1.HyperparameterTuningJob,
        lambda emulator, request: emulator.create_hyperparameter_tuning_job(
            request.parent, request.hyperparameter_tuning_job
        ),
    ),
    "GetHyperparameterTuningJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.GetHyperparameterTuningJobRequest,
        aiplatform_v1.HyperparameterTuningJob,
        lambda emulator, request: emulator.get_hyperparameter_tuning_job(request.name),
    ),
    "ListHyperparameterTuningJobs": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.ListHyperparameterTuningJobsRequest,
        aiplatform_v1.ListHyperparameterTuningJobsResponse,
        lambda emulator, request: emulator.list_hyperparameter_tuning_jobs(
            request.parent,
            filter=request.filter,
            page_size=request.page_size,
            page_token=request.page_token,
        ),
    ),
    "CancelHyperparameterTuningJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.CancelHyperparameterTuningJobRequest,
        empty_pb2.Empty,
        _cancel_hyperparameter_tuning_job,
    ),
    "DeleteHyperparameterTuningJob": RpcMethod(
        JOB_SERVICE,
        aiplatform_v1.DeleteHyperparameterTuningJobRequest,
        operations_pb2.Operation,
        lambda emulator, request: emulator.delete_hyperparameter_tuning_job(request.name),
    ),
    "CreateTrainingPipeline": RpcMethod(
        PIPELINE_SERVICE,
        aiplatform_v1.CreateTrainingPipelineRequest,
        aiplatform_v1.TrainingPipeline,
        lambda emulator, request: emulator.create_training_pipeline(
            request.parent, request.training_pipeline
        ),
    ),
    "GetTrainingPipeline": RpcMethod(
        PIPELINE_SERVICE,
        aiplatform_v1.GetTrainingPipelineRequest,
        aiplatform_v1.TrainingPipeline,
        lambda emulator, request: emulator.get_training_pipeline(request.name),
    ),
    "ListTrainingPipelines": RpcMethod(
        PIPELINE_SERVICE,
        aiplatform_v1.ListTrainingPipelinesRequest,
        aiplatform_v1.ListTrainingPipelinesResponse,
        lambda emulator, request: emulator.list_training_pipelines(
            request.parent,
            filter=request.filter,
            page_size=request.page_size,
            page_token=request.page_token,
        ),
    ),
    "CancelTrainingPipeline": RpcMethod(
        PIPELINE_SERVICE,
        aiplatform_v1.CancelTrainingPipelineRequest,
        empty_pb2.Empty,
        _cancel_training_pipeline,
    ),
    "DeleteTrainingPipeline": RpcMethod(
        PIPELINE_SERVICE,
        aiplatform_v1.DeleteTrainingPipelineRequest,
        operations_pb2.Operation,
        lambda emulator, request: emulator.delete_training_pipeline(request.name),
    ),
    "GetPersistentResource": RpcMethod(
        PERSISTENT_RESOURCE_SERVICE,
        aiplatform_v1.GetPersistentResourceRequest,
        aiplatform_v1.PersistentResource,
        lambda emulator, request: emulator.get_persistent_resource(request.name),
    ),
    "ListPersistentResources": RpcMethod(
        PERSISTENT_RESOURCE_SERVICE,
        aiplatform_v1.ListPersistentResourcesRequest,
        aiplatform_v1.ListPersistentResourcesResponse,
        lambda emulator, request: emulator.list_persistent_resources(
            request.parent, page_size=request.page_size, page_token=request.page_token
        ),
    ),
    "GetOperation": RpcMethod(
        OPERATIONS_SERVICE,
        operations_pb2.GetOperationRequest,
        operations_pb2.Operation,
        lambda emulator, request: emulator.get_operation(request.name),
    ),
    "GetReservation": RpcMethod(
        COMPUTE_RESERVATIONS_SERVICE,
        struct_pb2.Struct,
        struct_pb2.Struct,
        lambda emulator, request: emulator.get_reservation(
            request["project"], request["zone"], request["reservation"]
        ),
        rest_only=True,
    ),
}


def reservation_request(project: str, zone: str, reservation: str) -> struct_pb2.Struct:
    """The request of a GetReservation call, as the dispatcher takes and records it."""
    request = struct_pb2.Struct()
    request.update({"project": project, "zone": zone, "reservation": reservation})
    return request


class Dispatcher:
    """Runs decoded requests through fault injection and the core, and records each call."""

    def __init__(
        self,
        emulator: Emulator,
        faults: FaultInjector,
        request_log: RequestLog,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.emulator = emulator
        self.faults = faults
        self.request_log = request_log
        self._sleep = sleep

    def call(self, method_name: str, request: Any, transport: str) -> Any:
        """Answer one call of `method_name`; raises `EmulatorError` for any error answer."""
        method = RPC_METHODS[method_name]
        arrival = self.emulator.clock.now()
        fault = self.faults.fault_for(method_name)
        status = grpc.StatusCode.OK
        try:
            return self._answer(method, request, fault)
        except EmulatorError as error:
            status = error.code
            raise
        except Exception as error:
            # A bug in the emulator must still reach the client as an RPC error, not a hang up.
            _LOG.exception("%s failed unexpectedly", method_name)
            status = grpc.StatusCode.INTERNAL
            raise EmulatorError(status, f"Emulator internal error: {error!r}") from error
        finally:
            self._record(method_name, request, transport, arrival, status, fault)

    def _answer(self, method: RpcMethod, request: Any, fault: Fault | None) -> Any:
        if fault is None:
            return method.invoke(self.emulator, request)
        # The delay sits where the fault does: before the work (a slow service), or after it
        # (the work is done but its answer is late: a client may give up on a call that worked).
        if fault.when is FaultTiming.BEFORE:
            self._sleep(fault.latency_seconds)
            if fault.code is not None:
                raise EmulatorError(fault.code, fault.message)
            return method.invoke(self.emulator, request)
        response = method.invoke(self.emulator, request)
        self._sleep(fault.latency_seconds)
        if fault.code is not None:
            raise EmulatorError(fault.code, fault.message)
        return response

    def _record(
        self,
        method_name: str,
        request: Any,
        transport: str,
        arrival: datetime,
        status: grpc.StatusCode,
        fault: Fault | None,
    ) -> None:
        record = RequestRecord(
            time=rfc3339(arrival),
            transport=transport,
            method=method_name,
            resource=_resource_of(request),
            request=to_rest_dict(request),
            status=status.name,
            injected_fault=fault is not None,
        )
        self.request_log.append(record)
        if _LOG.isEnabledFor(logging.DEBUG):
            _LOG.debug(json.dumps(record.to_json_dict(), separators=(",", ":")))


def _resource_of(request: Any) -> str:
    if isinstance(request, struct_pb2.Struct):  # GetReservation
        fields = dict(request.items())
        return (
            f"projects/{fields['project']}/zones/{fields['zone']}"
            f"/reservations/{fields['reservation']}"
        )
    return getattr(request, "name", "") or getattr(request, "parent", "")
