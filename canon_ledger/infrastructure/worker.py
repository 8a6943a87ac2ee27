"""A live projection worker: follows the log and keeps read models current, off every request.

``ProjectionWorker.run`` loops: each read model it serves is brought up to the log's end (the
vector index embeds its backlog here, in batches, before its write transaction opens), then
the worker sleeps in ``LogWakeup.wait_beyond`` until the log grows. Every page it projects is
one transaction that also moves the model's tracking row (``projections.runner``), so a worker
killed at any point loses at most the page in flight, and the next worker, or the same one
restarted, goes on from the committed tracking position: nothing is applied twice. Several
workers (and requests' read-your-writes catch-ups) may run at once: they serialise on the
tracking row and the loser finds the work done.

Faults of the store are logged and retried with a growing pause (at most ``MAX_PAUSE``); the
loop never dies of them. A poison event is quarantined by the runner, as in every catch-up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.infrastructure.log_wakeup import LogWakeup
from canon_ledger.projections.retrieval import catch_up_vectors

log = logging.getLogger(__name__)
VECTOR_SLICE = 200  # log positions the vector index embeds and writes per step: progress is committed in steps
IDLE_WAIT = 1.0  # seconds between checks of the stop flag while the log is quiet
MAX_PAUSE = 10.0  # seconds, the longest pause after repeated store faults


class Progress:
    """What a worker tells its operator: a model is behind (``behind``), moved (``moved``), is
    embedding (``embedding``), has caught up (``caught_up``). The base class says nothing."""

    def behind(self, model: str, position: int, goal: int) -> None: ...

    def moved(self, model: str, position: int, goal: int) -> None: ...

    def embedding(self, model: str, done: int, total: int) -> None: ...

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None: ...

    def fault(self, model: str, error: str) -> None: ...


@dataclass
class ModelProgress:
    start: int
    started: float = field(default_factory=time.monotonic)


class ProjectionWorker:
    def __init__(self, services: Any, names: Sequence[str] | None = None, *, wakeup: LogWakeup | None = None,
                 progress: Progress | None = None, vector_slice: int = VECTOR_SLICE) -> None:
        self.services = services
        # A name it has no model for is refused (a CanonError), before anything runs.
        self.names = list(dict.fromkeys(n for name in names or ("all",) for n in services.named_models(name)))
        self._own_wakeup = wakeup is None
        self.wakeup = wakeup or LogWakeup(services.ledger, services.config)
        self.progress = progress or Progress()
        self.vector_slice = vector_slice
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy: dict[str, ModelProgress] = {}
        self._reached: dict[str, int] = {}  # the log position each sliced model was last brought to
        self.faults = 0  # store faults met so far (the loop retried each)
        self.last_error: str | None = None

    # -- one pass ----------------------------------------------------------------------------
    def step(self) -> int:
        """Bring each model a step towards the log's end; returns the end it aimed at.
        A model is done when this process ``knows`` it reflects the end."""
        end = self.services.ledger.position()
        for name in self.names:
            if self._stop.is_set():
                break
            models = self.services.read_models[name]
            if models.knows(end):
                continue
            self._catch_up(name, models, end)
        return end

    def _catch_up(self, name: str, models: Any, end: int) -> None:
        busy = self._busy.get(name)
        if busy is None:
            busy = self._busy[name] = ModelProgress(models.position())
            self.progress.behind(name, busy.start, end)

        def moved(reached: int, goal: int) -> None:
            self.progress.moved(name, reached, end)

        if name == "vectors":
            # From what this worker reached last: a slice with none of the model's events leaves
            # the tracking row where it was (``runner.QUIET_GAP``), but the slice is done.
            start = max(models.position(), self._reached.get(name, 0))
            goal = min(end, start + self.vector_slice)
            reached = catch_up_vectors(models, goal, lambda done, total: self.progress.embedding(name, done, total))
            self._reached[name] = reached
            moved(reached, end)
        else:
            reached = models.catch_up(end, moved)
        if models.knows(end) or reached >= end:
            self._busy.pop(name, None)
            self.progress.caught_up(name, reached, max(0, reached - busy.start), time.monotonic() - busy.started)

    def caught_up(self) -> bool:
        """Does every model this worker serves reflect the log's end (as this process knows)?"""
        end = self.services.ledger.position()
        return all(self.services.read_models[n].knows(end) for n in self.names)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Follow the log until ``stop()`` (or ``until()`` says so after a pass)."""
        pause = 0.5
        while not self._stop.is_set():
            try:
                end = self.step()
                pause = 0.5
            except Exception as e:  # noqa: BLE001 - a store fault or a failing model: retried
                self.faults += 1
                self.last_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                log.warning("projection worker: %s; retrying in %.1f s", self.last_error, pause)
                self.progress.fault("worker", self.last_error)
                self._stop.wait(pause)
                pause = min(MAX_PAUSE, pause * 2)
                continue
            if until is not None and until():
                return
            if self.wakeup.closed:  # the server is stopping: no more wake-ups, wait for stop()
                self._stop.wait(IDLE_WAIT)
            elif self.caught_up():
                self.wakeup.wait_beyond(end, IDLE_WAIT)

    def start(self) -> ProjectionWorker:
        """Run in a daemon thread of this process (``canon serve``)."""
        self._thread = threading.Thread(target=self.run, name="canon-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._own_wakeup:
            self.wakeup.close()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
