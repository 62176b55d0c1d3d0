"""Planning: what dispatch would do with one event, computed without touching anything.

``vertex-dispatch plan`` is built on this module. The job shown is what the create call sends,
of the template's kind: a ``CustomJob``, a ``HyperparameterTuningJob`` (FLEX_START and the
placement inside its ``trialJobSpec``) or a ``TrainingPipeline`` (inside its
``trainingTaskInputs``). ``cloud_event_from_json`` reads an event the way
the functions receive it: a structured-mode CloudEvent, or a plain Pub/Sub push body converted
exactly as functions-framework converts it. ``plan_event`` then decodes, routes, renders the job
for each placement of the template's chain and validates it with the offline rules only. It
writes no ledger entry, calls no Vertex AI or Pub/Sub API and reads no persistent resource or
manifest: the live checks are listed as skipped in the ``Plan`` instead.

An object of a ``completion: quiet`` route starts nothing by itself: it opens or joins its
dataset, which waits until no object under it was written for ``quiet_for``. Its ``Plan`` says
which dataset (``QuietPlan``: the directory, the pattern's captures, the rule) and shows the job
the dataset's run would submit once quiet, with ``{dataset_uri}`` the directory. Cloud Storage is
not listed: how many objects the dataset holds and when it will be quiet is ``vertex-dispatch
status``'s to show.

A template's placement order is shown with why (``OrderPlan``): the chain as written, or for
``placement_order: learned`` the order dispatch would choose for the run, learned from the
template's recent runs when the caller reads them (``history``: ``plan --history-from-ledger``),
else the chain as written, saying why.

Like dispatch, an event that matches no route is answered before ``aiplatform_v1`` (about 2 s) is
imported: ``shared.policy.jobspec`` and ``shared.validation`` are imported only once a route
matched.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from cloudevents import exceptions as cloudevent_errors
from cloudevents.http import CloudEvent, from_json

from shared.config.durations import describe_duration
from shared.config.model import (
    Config,
    FlexStartPlacement,
    GcsRoute,
    PersistentResourcePlacement,
    Placement,
    PlacementOrder,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.decode import events, routing
from shared.decode.datasets import dataset_of
from shared.model.errors import ConfigError, DispatchError, MalformedEvent, PermanentError
from shared.model.job_kinds import JobKind
from shared.model.runs import Run
from shared.model.triggers import ObjectFinalized, RetryRequest, Trigger
from shared.policy.records import describe_placement, describe_trigger

if TYPE_CHECKING:
    from shared.validation import Violation

FIRST_ATTEMPT: Final = 1

# What functions-framework (event_conversion.py) puts into the CloudEvent it builds from a plain
# Pub/Sub push body: the topic comes only from the request path, the rest from the message.
PUSH_TOPIC: Final = re.compile(r"projects/[^/?]+/topics/[^/?]+")
PUSH_SOURCE_PREFIX: Final = "//pubsub.googleapis.com/"
PUSH_MESSAGE_TYPE: Final = "type.googleapis.com/google.pubsub.v1.PubsubMessage"
PUSH_SPEC_VERSION: Final = "1.0"

LIVE_CHECKS_PERSISTENT_RESOURCE: Final = (
    "live checks skipped: the persistent resource's state (RUNNING), its pools' machine and disk "
    "match, and free replicas are read from Vertex AI only when dispatch runs"
)
LIVE_CHECKS_FLEX_START: Final = (
    "live checks skipped: FLEX_START capacity and quota are known only when Vertex AI runs the job"
)
LIVE_CHECKS_SPOT: Final = (
    "live checks skipped: Spot capacity, quota (preemptible) and preemption are known only when "
    "Vertex AI runs the job"
)
LIVE_CHECKS_ON_DEMAND: Final = (
    "live checks skipped: on-demand capacity and quota are known only when Vertex AI runs the job"
)
LIVE_CHECKS_RESERVATION: Final = (
    "live checks skipped: the named reservation's state (READY), its VMs' machine type and GPUs, "
    "and its free VMs are read from Compute Engine only when dispatch runs"
)
LIVE_CHECKS_ANY_RESERVATION: Final = (
    "live checks skipped: which reservation (if any) the job consumes is known only when Vertex AI "
    "runs it; without a free matching one it runs on demand"
)


class HistoryUnavailable(DispatchError):
    """The placement history could not be read (no ledger reachable, no credentials)."""


# The recent runs of a template, newest first (``Ledger.recent_runs``); raises
# ``HistoryUnavailable`` when they cannot be read.
HistoryReader = Callable[[str], Sequence[Run]]


class PlanUsageError(PermanentError):
    """The command was asked for something it cannot plan (a placement outside the chain, ...)."""


class PlanVerdict(enum.Enum):
    """What dispatch would do with the event, as far as can be known offline."""

    VALID = "valid"  # the first placement planned passes every offline rule: it would be created
    INVALID = "invalid"  # the job breaks a rule: dispatch would reject the run and alert
    REJECTED = "rejected"  # the event is malformed or the request is refused: rejected, alerted
    NO_ROUTE = "no_route"  # no route matches: dispatch drops the event at DEBUG level
    NOT_ROUTED = "not_routed"  # a retry message: it continues a run the ledger holds


@dataclass(frozen=True)
class PlacementPlan:
    """One placement of the chain: the job dispatch would create there, and what it breaks."""

    index: int  # position in the template's placement chain
    placement: str  # one line naming it, e.g. "FLEX_START (max wait 7200s) in us-east4"
    parent: str | None  # projects/P/locations/R; None when the job did not render
    job_json: str | None  # the job created, as REST JSON; None when the job did not render
    violations: tuple[Violation, ...]
    skipped_checks: str  # the live checks offline planning cannot make
    # The kind of job_json: a CustomJob, or a sweep / pipeline wrapping the job that runs.
    kind: JobKind = JobKind.CUSTOM_JOB

    @property
    def valid(self) -> bool:
        return self.job_json is not None and not self.violations


@dataclass(frozen=True)
class QuietPlan:
    """The dataset an object of a ``completion: quiet`` route opens or joins, and its rule."""

    dataset_uri: str  # gs://BUCKET/DIRECTORY/, the run's {dataset_uri}
    captures: Mapping[str, str]  # the dataset pattern's names, e.g. {"date": "2026-12-01"}
    quiet_for: str  # as users write it: "10m"
    min_objects: int
    after_start: str  # "ignore" | "new_run"

    def waiting_text(self) -> str:
        """One sentence: what the object does and when the run starts."""
        at_least = f" and at least {self.min_objects} exist" if self.min_objects > 1 else ""
        return (
            f"this object opens or joins the dataset {self.dataset_uri}, which waits "
            f"(WAITING_DATA) until no object under it was written for {self.quiet_for}{at_least}; "
            "then its run submits the job below, once (objects written after it started: "
            f"{self.after_start})"
        )


@dataclass(frozen=True)
class OrderPlan:
    """The order dispatch would walk the chain in, and why each placement is where it is."""

    order: tuple[int, ...]  # chain indices, first tried first
    reasons: Mapping[int, str]  # by chain index
    learned: bool  # placement_order: learned, ordered from history
    source: str  # where the order comes from, one line
    explored: int | None = None


@dataclass(frozen=True)
class Plan:
    """Everything ``vertex-dispatch plan`` prints about one event."""

    verdict: PlanVerdict
    reason: str = ""  # why the event was rejected, matched nothing, or is not routed
    trigger: str = ""  # one line describing the decoded trigger ("" when it did not decode)
    route: str = ""
    template: str = ""
    run_key: str = ""
    run_id: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    manifest_uri: str | None = None  # dispatch checks the files it lists before creating a job
    quiet: QuietPlan | None = None  # completion: quiet: the run waits for its dataset to be quiet
    placements: tuple[PlacementPlan, ...] = ()  # in the order dispatch tries them
    placement_order: OrderPlan | None = None


def _utc_now() -> datetime:
    return datetime.now(UTC)


def cloud_event_from_json(
    text: str, *, topic: str | None = None, now: Callable[[], datetime] = _utc_now
) -> CloudEvent:
    """The CloudEvent a function would receive for ``text``; ``MalformedEvent`` when none.

    ``text`` is a structured-mode CloudEvent (``specversion``, ``type``, ``source``, ``id``,
    ``data`` or ``data_base64``) or a plain Pub/Sub push body (``{"message": ...,
    "subscription": ...}``). ``topic`` (``projects/P/topics/T``) stands for the push URL's path,
    which is where functions-framework reads a push body's topic from; it applies to push bodies
    only. ``now`` stamps a push message that has no ``publishTime``, as functions-framework does.
    """
    try:
        document = json.loads(text)
    except ValueError as error:
        raise MalformedEvent(
            f"the event file is not JSON ({error}); write a structured-mode CloudEvent or a "
            "Pub/Sub push body"
        ) from None
    if not isinstance(document, dict):
        raise MalformedEvent(
            "the event file must hold a JSON object: a structured-mode CloudEvent or a Pub/Sub "
            "push body"
        )
    if is_push_body(document):
        return push_body_to_cloud_event(document, topic=topic, now=now)
    if topic is not None:
        raise PlanUsageError(
            "--topic applies to a plain Pub/Sub push body only; a CloudEvent names its topic in "
            "its source attribute: drop --topic"
        )
    try:
        return from_json(text)
    except cloudevent_errors.GenericException as error:
        raise MalformedEvent(
            f"the event file is not a structured-mode CloudEvent ({error}); give it "
            "specversion 1.0, type, source, id and data"
        ) from None


def is_push_body(document: Mapping[str, Any]) -> bool:
    """A Pub/Sub push body rather than a CloudEvent (functions-framework's own test)."""
    return "specversion" not in document and {"message", "subscription"} <= document.keys()


def push_body_to_cloud_event(
    body: Mapping[str, Any], *, topic: str | None, now: Callable[[], datetime] = _utc_now
) -> CloudEvent:
    """The messagePublished CloudEvent functions-framework builds from a plain push body.

    Only ``data``, ``attributes``, ``messageId`` and ``publishTime`` survive the conversion, as
    there; ``subscription`` and ``orderingKey`` are dropped. Without ``topic`` the source ends at
    the service, as when the push URL's path names no topic.
    """
    if topic is not None and not PUSH_TOPIC.fullmatch(topic):
        raise PlanUsageError(
            f"--topic {topic!r} is not a topic name; write projects/PROJECT/topics/TOPIC"
        )
    message = body["message"]
    if not (isinstance(message, Mapping) and "data" in message and "messageId" in message):
        raise MalformedEvent(
            "Pub/Sub push body message must be an object with data and messageId: "
            "functions-framework converts no other push body; publish through Pub/Sub, which "
            "sets both"
        )
    publish_time = message.get("publishTime") or now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    attributes = {
        "specversion": PUSH_SPEC_VERSION,
        "type": events.PUBSUB_PUBLISHED,
        "source": PUSH_SOURCE_PREFIX + (topic or ""),
        "id": message["messageId"],
        "time": publish_time,
        "datacontenttype": "application/json",
    }
    data = {
        "message": {
            "@type": PUSH_MESSAGE_TYPE,
            "data": message["data"],
            "attributes": message.get("attributes", {}),
            "messageId": message["messageId"],
            "publishTime": publish_time,
        }
    }
    return CloudEvent(attributes, data)


def plan_event_json(
    config: Config,
    text: str,
    *,
    topic: str | None = None,
    placement_index: int | None = None,
    now: Callable[[], datetime] = _utc_now,
    history: HistoryReader | None = None,
) -> Plan:
    """``plan_event`` for an event file's text; an event that cannot be read is REJECTED."""
    try:
        cloud_event = cloud_event_from_json(text, topic=topic, now=now)
    except MalformedEvent as error:
        return Plan(PlanVerdict.REJECTED, reason=f"{type(error).__name__}: {error}")
    return plan_event(
        config, cloud_event, placement_index=placement_index, history=history, now=now
    )


def plan_event(
    config: Config,
    cloud_event: CloudEvent,
    *,
    placement_index: int | None = None,
    history: HistoryReader | None = None,
    now: Callable[[], datetime] = _utc_now,
) -> Plan:
    """What dispatch would do with ``cloud_event``: see the module docstring.

    ``placement_index`` plans that placement of the chain only; ``PlanUsageError`` when the
    template has no such placement. ``history`` reads a template's recent runs, for a
    ``placement_order: learned`` template (None: the chain as written). A ``ConfigError`` raised
    while routing propagates: it is the config's fault, not the event's.
    """
    try:
        trigger = events.decode(cloud_event)
    except MalformedEvent as error:
        return Plan(PlanVerdict.REJECTED, reason=f"{type(error).__name__}: {error}")
    if isinstance(trigger, RetryRequest):
        return Plan(
            PlanVerdict.NOT_ROUTED,
            reason=(
                f"a retry message continues run {trigger.run_id} from the ledger, which plan "
                "does not read; plan the event that started the run instead"
            ),
            trigger=describe_trigger(trigger),
            run_id=trigger.run_id,
        )
    try:
        match = routing.route(trigger, config)
    except ConfigError:
        raise
    except PermanentError as error:
        return Plan(
            PlanVerdict.REJECTED,
            reason=f"{type(error).__name__}: {error}",
            trigger=describe_trigger(trigger),
        )
    if match is None:
        return Plan(
            PlanVerdict.NO_ROUTE,
            reason=(
                f"no route of {config.source} matches this event; dispatch would drop it (logged "
                "at DEBUG) without creating anything"
            ),
            trigger=describe_trigger(trigger),
        )
    template = config.templates[match.template]
    order = plan_order(config, template, match.run_id, history, now())
    chosen = _chosen_indices(template, placement_index)
    placements = tuple(
        plan_placement(config, template, match, index) for index in order.order if index in chosen
    )
    first_valid = bool(placements) and placements[0].valid
    return Plan(
        PlanVerdict.VALID if first_valid else PlanVerdict.INVALID,
        trigger=describe_trigger(trigger),
        route=match.route,
        template=match.template,
        run_key=match.run_key,
        run_id=match.run_id,
        params=dict(match.params),
        manifest_uri=match.manifest_uri,
        quiet=_quiet_plan(config, match.route, trigger),
        placements=placements,
        placement_order=order,
    )


def plan_order(
    config: Config,
    template: Template,
    run_id: str,
    history: HistoryReader | None,
    now: datetime,
) -> OrderPlan:
    """The order run ``run_id`` of ``template`` would walk its chain in, as dispatch chooses it
    at the run's first walk (``policy.placement_order``), with why."""
    from shared.policy.placement_order import learn_order, written_order

    if template.placement_order is not PlacementOrder.LEARNED:
        written = written_order(template, "as written (placement_order: as_written)")
        return OrderPlan(written.order, written.reasons, False, "as written")
    if history is None:
        why = "as written: plan reads no history without --history-from-ledger"
        written = written_order(template, why)
        return OrderPlan(written.order, written.reasons, False, why)
    try:
        runs = history(template.name)
    except HistoryUnavailable as error:
        why = f"as written: the ledger could not be read ({error})"
        written = written_order(template, why)
        return OrderPlan(written.order, written.reasons, False, why)
    learned = learn_order(template, config.region, runs, run_id=run_id, now=now)
    source = f"learned from the template's {len(runs)} most recent run(s) in the ledger"
    return OrderPlan(learned.order, learned.reasons, True, source, learned.explored)


def _quiet_plan(config: Config, route_name: str, trigger: Trigger) -> QuietPlan | None:
    """The dataset ``trigger``'s object opens or joins, when its route is ``completion: quiet``."""
    chosen = next((route for route in config.routes if route.name == route_name), None)
    if not isinstance(chosen, GcsRoute) or chosen.quiet is None:
        return None
    assert isinstance(trigger, ObjectFinalized)  # only objects take a gcs route
    found = dataset_of(chosen.quiet.dataset, trigger.name)
    if found is None:  # dispatch refuses it too: routing.route raises before this on its side
        raise ConfigError(
            f"{config.source}: route {chosen.name!r}: object gs://{trigger.bucket}/{trigger.name} "
            f"matches its match {chosen.match!r} but lies under no directory its dataset "
            f"{chosen.quiet.dataset!r} names"
        )
    return QuietPlan(
        dataset_uri=f"gs://{trigger.bucket}/{found.prefix}",
        captures=dict(found.captures),
        quiet_for=describe_duration(chosen.quiet.quiet_for),
        min_objects=chosen.quiet.min_objects,
        after_start=chosen.quiet.after_start.value,
    )


def _chosen_indices(template: Template, placement_index: int | None) -> range:
    chain_length = len(template.placements)
    if placement_index is None:
        return range(chain_length)
    if not 0 <= placement_index < chain_length:
        raise PlanUsageError(
            f"--placement {placement_index}: template {template.name!r} has {chain_length} "
            f"placement(s), numbered 0 to {chain_length - 1}; pick one of those or leave "
            "--placement out to plan the whole chain"
        )
    return range(placement_index, placement_index + 1)


def plan_placement(
    config: Config, template: Template, match: routing.RouteMatch, index: int
) -> PlacementPlan:
    """Attempt 1 of ``match``'s run on placement ``index``, checked as dispatch checks it
    (``shared.validation.chain``), with the live rules skipped."""
    from shared.policy import jobspec
    from shared.validation.chain import check_placement

    check = check_placement(
        config, template, match.params, index, run_id=match.run_id, attempt=FIRST_ATTEMPT
    )
    rendered = check.rendered
    return PlacementPlan(
        index=index,
        placement=describe_placement(check.placement),
        parent=rendered.parent if rendered else None,
        job_json=jobspec.job_to_json(rendered.resource) if rendered else None,
        violations=check.violations,
        skipped_checks=_skipped_checks(check.placement),
        kind=template.kind,
    )


def _skipped_checks(placement: Placement) -> str:
    if isinstance(placement, PersistentResourcePlacement):
        return LIVE_CHECKS_PERSISTENT_RESOURCE
    if isinstance(placement, FlexStartPlacement):
        return LIVE_CHECKS_FLEX_START
    if isinstance(placement, SpotPlacement):
        return LIVE_CHECKS_SPOT
    if isinstance(placement, ReservationPlacement):
        return LIVE_CHECKS_RESERVATION if placement.name else LIVE_CHECKS_ANY_RESERVATION
    return LIVE_CHECKS_ON_DEMAND
