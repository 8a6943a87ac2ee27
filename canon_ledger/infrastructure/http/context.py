"""The server's composition root: built once in the app's lifespan, closed at shutdown.

Pools, read models, the tokenizer and the embedder are loaded here once, never per request.
Constructing a ``ServerContext`` does the I/O of opening the store; nothing is registered as a
side effect of importing or constructing anything else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, cast

from starlette.requests import Request

from canon_ledger.application.keys import Keys
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.http.door import StoreGate
from canon_ledger.infrastructure.http.metrics import Metrics
from canon_ledger.infrastructure.http.recording import RecordBudgets
from canon_ledger.infrastructure.log_wakeup import LogWakeup
from canon_ledger.infrastructure.services import Services
from canon_ledger.infrastructure.worker import ProjectionWorker


@dataclass
class RebuildJob:
    """One background rebuild (``POST /v1/rebuild``), and how far it got."""

    projections: list[str]
    started: float = field(default_factory=time.time)
    current: str | None = None
    reached: int = 0
    goal: int = 0
    reports: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    finished: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"projections": self.projections, "running": self.finished is None, "current": self.current,
                "reached": self.reached, "goal": self.goal, "reports": self.reports, "error": self.error,
                "started": self.started, "finished": self.finished}


class Rebuilds:
    """At most one rebuild at a time per process, on a thread of its own (the rebuilt tables
    are switched to only when caught up, so serving goes on meanwhile)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.job: RebuildJob | None = None
        self._lock = threading.Lock()

    def start(self, names: list[str]) -> RebuildJob | None:
        """The new job, or None if one is running."""
        with self._lock:
            if self.job is not None and self.job.finished is None:
                return None
            job = self.job = RebuildJob(names)
        threading.Thread(target=self._run, args=(job,), name="canon-rebuild", daemon=True).start()
        return job

    def _run(self, job: RebuildJob) -> None:
        try:
            for name in job.projections:
                job.current = name

                def progress(reached: int, goal: int) -> None:
                    job.reached, job.goal = reached, goal

                job.reports.append(self.services.read_models[name].rebuild(progress).as_dict())
        except Exception as e:  # noqa: BLE001 - reported through GET /v1/rebuild
            job.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
        finally:
            job.current = None
            job.finished = time.time()


# Requests that read the store at once (packets, views, search, audits). A packet holds its
# snapshot's connection while its L1 retrieval takes up to two more, so without a gate enough
# packets at once each hold one connection of the pool and wait for another (seen: 8 clients on
# PostgreSQL, 30 s pool timeouts). READERS x 3 stays inside the read engines' pool.
READERS = 4
P = ParamSpec("P")
T = TypeVar("T")


class ServerContext:
    def __init__(self, url: str | None, *, open_access: bool = False, embedder: Any = None, worker: bool = True) -> None:
        """``worker``: run a projection worker in this process (``canon serve``'s default); without
        one, separate ``canon worker`` processes keep the slow models current. Either way requests
        never catch up the knowledge, keyword and vector models themselves."""
        self.services = bootstrap(url, embedder=embedder, indexed_by_worker=True)
        self.gate = StoreGate()  # the door's: requests answered at once while the store is down
        self.keys = Keys(self.services.ledger)
        self.open_access = open_access
        self.search = self.services.search_service("offline")
        self.rebuilds = Rebuilds(self.services)
        self.records = RecordBudgets()  # packets a key below author scope may have recorded, a minute
        self.metrics = Metrics(self.lags, self._quota_left)
        self._readers = threading.BoundedSemaphore(READERS)
        self.wakeup = LogWakeup(self.services.ledger.event_log, self.services.config,  # event streams and the worker wait on it
                                reachable=lambda up: self.gate.recovered() if up else self.gate.failed())
        if self.services.config.is_postgres:
            wakeup = self.wakeup
            self.gate.listener = lambda: wakeup.listening  # probes go only while it is connected
            self.gate.fail_fast(cast(Any, self.services.ledger.factory).datastore.pool)
        self.worker = ProjectionWorker(self.services, wakeup=self.wakeup).start() if worker else None

    def reading(self, read: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``read(*args, **kwargs)`` once one of the ``READERS`` places is free (call it in a
        worker thread: it blocks)."""
        with self._readers:
            return read(*args, **kwargs)

    def lags(self) -> dict[str, int]:
        """Entries of its topics each read model's serving build has yet to project."""
        return {name: status.pending for name, status in self.services.status().items()}

    def _quota_left(self) -> dict[str, int]:
        status = self.services.quota.status("gemini")
        return {"generate": status["generate"]["left"], "embed": status["embed"]["left"]}

    def close(self) -> None:
        self.wakeup.close()  # first: a worker waiting for the log to grow returns now, not after its idle wait
        if self.worker is not None:
            self.worker.stop()
        self.services.close()


def ctx(request: Request) -> ServerContext:
    """The server's context of ``request`` (built in the app's lifespan)."""
    context: ServerContext = request.app.state.ctx
    return context
