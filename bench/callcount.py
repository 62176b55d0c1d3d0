"""Count the gRPC calls this process makes, per server and method, at the channel.

The Firestore emulator keeps no request log, so ledger round trips are counted where they leave
the process: ``install()`` makes every ``grpc.insecure_channel`` (what the Firestore, Pub/Sub and
our Vertex AI clients open against emulators) an intercepted channel that counts each call. It
changes nothing about the calls themselves. Install it before the first client is built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc

calls: Counter[tuple[str, str]] = Counter()
"""(server address, "/package.Service/Method") → calls made since the last ``reset``."""


class _CountingInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, target: str) -> None:
        self._target = target

    def _count(self, details: grpc.ClientCallDetails) -> None:
        calls[(self._target, details.method)] += 1

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        self._count(details)
        return continuation(details, request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        self._count(details)
        return continuation(details, request)

    def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, requests: Any
    ) -> Any:
        self._count(details)
        return continuation(details, requests)

    def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, requests: Any
    ) -> Any:
        self._count(details)
        return continuation(details, requests)


def install() -> None:
    """Count every call on every insecure channel opened from now on (idempotent)."""
    if getattr(grpc.insecure_channel, "_counting", False):
        return
    plain_channel = grpc.insecure_channel

    def counting_channel(target: str, *args: Any, **kwargs: Any) -> grpc.Channel:
        return grpc.intercept_channel(
            plain_channel(target, *args, **kwargs), _CountingInterceptor(target)
        )

    counting_channel._counting = True  # type: ignore[attr-defined]
    grpc.insecure_channel = counting_channel


def reset() -> None:
    calls.clear()


def calls_to(target: str) -> int:
    """Calls made to the server at ``target`` (host:port) since the last ``reset``."""
    return sum(count for (where, _), count in calls.items() if where == target)


def methods_to(target: str) -> dict[str, int]:
    """Those calls by method (the last part of the gRPC path), for the raw JSON."""
    by_method: Counter[str] = Counter()
    for (where, method), count in calls.items():
        if where == target:
            by_method[method.rsplit("/", 1)[-1]] += count
    return dict(by_method)
