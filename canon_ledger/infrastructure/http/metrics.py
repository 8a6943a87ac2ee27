"""Prometheus metrics of one server process, in a registry of its own (nothing global).

Request latency by route template (never the raw path: story ids stay out of label sets),
packet compile latency by role, and, read at scrape time, each read model's lag behind the
log and the LLM quota left today.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from canon_ledger.infrastructure.http import problems

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self, lags: Callable[[], dict[str, int]], quota: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Histogram("canon_http_request_seconds", "HTTP request latency", ("method", "route", "status"),
                                  buckets=BUCKETS, registry=self.registry)
        self.packets = Histogram("canon_packet_seconds", "Packet compile latency (read your writes included)",
                                 ("role",), buckets=BUCKETS, registry=self.registry)
        self.registry.register(_Scraped(lags, quota))

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _Scraped:
    def __init__(self, lags: Callable[[], dict[str, int]], quota: Callable[[], dict[str, int]]) -> None:
        self._lags = lags
        self._quota = quota

    def collect(self) -> Iterator[Any]:
        lag = GaugeMetricFamily("canon_projection_lag_events", "Events a read model is behind the log",
                                labels=("projection",))
        for name, behind in self._lags().items():
            lag.add_metric((name,), behind)
        yield lag
        left = GaugeMetricFamily("canon_quota_left", "LLM calls left today", labels=("kind",))
        for kind, n in self._quota().items():
            left.add_metric((kind,), n)
        yield left


class RequestMiddleware:
    """Times every request by route template, and answers whatever escapes a route
    (``problems.unexpected``, rendered off the event loop) instead of re-raising it; a client
    that leaves mid-request (``ClientDisconnect``) is counted as 499, not an error. Pure ASGI: no per-request task or body
    copy, unlike Starlette's BaseHTTPMiddleware."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status, started = [500], [False]

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0], started[0] = message["status"], True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except ClientDisconnect:
            status[0] = 499  # the client left mid-request: nobody to answer, nothing went wrong here
        except Exception as e:  # noqa: BLE001 - the last line of defence: answered, logged once
            if started[0]:
                raise
            # Rendering a trace takes milliseconds to seconds: never on the event loop.
            response = await run_in_threadpool(problems.unexpected, scope, e)
            await response(scope, receive, sending)
        finally:
            metrics: Metrics | None = getattr(scope["app"].state, "metrics", None) if "app" in scope else None
            if metrics is not None:
                route = scope.get("route")
                template = getattr(route, "path", "unmatched")
                metrics.requests.labels(scope["method"], template, str(status[0])).observe(time.perf_counter() - began)
