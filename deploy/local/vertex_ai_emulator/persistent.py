"""Persistent resources: the stored clusters and the pool replicas that jobs hold on them.

`used_replica_count` is never stored: it is computed from the jobs holding replicas whenever a
resource is read, so it cannot drift from the jobs' states.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from google.cloud import aiplatform_v1

from vertex_ai_emulator.placement import resource_pool_capacity

RUNNING = aiplatform_v1.PersistentResource.State.RUNNING
STATE_UNSPECIFIED = aiplatform_v1.PersistentResource.State.STATE_UNSPECIFIED


class PersistentResources:
    """The persistent resources by canonical name, and the replicas each job holds on them."""

    def __init__(self) -> None:
        self._resources: dict[str, aiplatform_v1.PersistentResource] = {}
        self._holds: dict[str, tuple[str, dict[str, int]]] = {}

    def put(
        self, resource: aiplatform_v1.PersistentResource, now: datetime
    ) -> aiplatform_v1.PersistentResource:
        """Store a copy of `resource` (its `name` must be canonical), filling what the service
        would: pool ids, RUNNING when no state is given, and the timestamps."""
        stored = aiplatform_v1.PersistentResource(resource)
        for index, pool in enumerate(stored.resource_pools):
            if not pool.id:
                pool.id = f"pool-{index}"
            pool.used_replica_count = 0
        if stored.state == STATE_UNSPECIFIED:
            stored.state = RUNNING
        if not stored.create_time:
            stored.create_time = now
        if stored.state == RUNNING and not stored.start_time:
            stored.start_time = now
        stored.update_time = now
        self._resources[stored.name] = stored
        return self.get(stored.name)

    def get(self, name: str) -> aiplatform_v1.PersistentResource | None:
        """A copy of the resource with `used_replica_count` filled in, or None."""
        stored = self._resources.get(name)
        if stored is None:
            return None
        view = aiplatform_v1.PersistentResource(stored)
        used = self._used_replicas(name)
        for pool in view.resource_pools:
            pool.used_replica_count = used.get(pool.id, 0)
        return view

    def names(self) -> list[str]:
        """Every stored resource name, sorted."""
        return sorted(self._resources)

    def is_running(self, name: str) -> bool:
        """Whether the resource exists and can run jobs."""
        stored = self._resources.get(name)
        return stored is not None and stored.state == RUNNING

    def free_replicas(self, name: str) -> dict[str, int]:
        """Replicas each pool of the resource could give a new job now."""
        stored = self._resources.get(name)
        if stored is None:
            return {}
        used = self._used_replicas(name)
        return {
            pool.id: max(0, resource_pool_capacity(pool) - used.get(pool.id, 0))
            for pool in stored.resource_pools
        }

    def fits(self, name: str, demand: Mapping[str, int]) -> bool:
        """Whether the running resource has `demand` replicas free in every pool at once."""
        free = self.free_replicas(name)
        return self.is_running(name) and all(
            free.get(pool_id, 0) >= count for pool_id, count in demand.items()
        )

    def hold(self, holder: str, name: str, demand: Mapping[str, int]) -> None:
        """Take `demand` replicas (per pool id) for `holder` (a job name) until `release`."""
        self._holds[holder] = (name, dict(demand))

    def release(self, holder: str) -> None:
        """Give back whatever `holder` holds (nothing if it holds nothing)."""
        self._holds.pop(holder, None)

    def _used_replicas(self, name: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for resource_name, demand in self._holds.values():
            if resource_name == name:
                for pool_id, count in demand.items():
                    used[pool_id] = used.get(pool_id, 0) + count
        return used
