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

from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.log_wakeup import LogWakeup
from canon_ledger.projections.partitioning import Partitioning

log = logging.getLogger(__name__)
VECTOR_SLICE = 200  # log positions the vector index embeds and writes per step: progress is committed in steps
IDLE_WAIT = 1.0  # seconds between checks of the stop flag while the log is quiet
MAX_PAUSE = 10.0  # seconds, the longest pause after repeated store faults
BUSY_ELSEWHERE = 0.2  # seconds a split worker waits when every story left is claimed by others
SPLIT_AFTER = 5000  # positions a split model may trail by before workers share it story by story


class Progress:
    """What a worker tells its operator: a model is behind (``behind``), moved (``moved``), is
    embedding (``embedding``), has caught up (``caught_up``). The base class says nothing."""

    def behind(self, model: str, position: int, goal: int) -> None: ...

    def moved(self, model: str, position: int, goal: int) -> None: ...

    def embedding(self, model: str, done: int, total: int) -> None: ...

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None: ...

    def applied(self, model: str, share: str, events: int, position: int, kind: str = "story") -> None:
        """A claimed share caught up: ``events`` applied by this worker, now at ``position``;
        ``kind`` says what the share is (``Partitioning.name``: "story", "collection")."""

    def fault(self, model: str, error: str) -> None: ...


@dataclass
class ModelProgress:
    start: int
    started: float = field(default_factory=time.monotonic)


class ProjectionWorker:
    def __init__(self, services: Any, names: Sequence[str] | None = None, *, wakeup: LogWakeup | None = None,
                 progress: Progress | None = None, vector_slice: int = VECTOR_SLICE, split: bool = False,
                 split_after: int = SPLIT_AFTER) -> None:
        """``split``: share the work with other workers (PostgreSQL): a model that can be split
        is caught up share by share (story, collection), each claimed by one worker at a time,
        once it trails the log by more than ``split_after`` positions (below that one whole-build
        step is cheaper); closer, a model is claimed whole. See ``SplitWork``."""
        self.services = services
        # A name it has no model for is refused (a CanonError), before anything runs.
        self.names = list(dict.fromkeys(n for name in names or ("all",) for n in services.named_models(name)))
        self._own_wakeup = wakeup is None
        self._wakeup = wakeup  # made when ``run`` starts: ``catch_up_to`` waits for nothing (no listener)
        self.progress = progress or Progress()
        self.vector_slice = vector_slice
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy: dict[str, ModelProgress] = {}
        self._reached: dict[str, int] = {}  # the log position each sliced model was last brought to
        self.faults = 0  # store faults met so far (the loop retried each)
        self.last_error: str | None = None
        self.split = SplitWork(self, split_after) if split else None
        # Following the log with canon and the vectors: the L1 queries of newly planned chapters
        # embedded before anyone asks (``query_vectors.QueryPrefetch``).
        from canon_ledger.infrastructure.query_vectors import QueryPrefetch

        queries = QueryPrefetch(services)
        self.queries = queries if "canon" in self.names and "vectors" in self.names and queries.usable else None

    # -- one pass ----------------------------------------------------------------------------
    def step(self) -> int:
        """Bring each model a step towards the log's end; returns the end it aimed at.
        A model is done when this process knows it reflects the end (``known_to_reflect``)."""
        end = self.services.ledger.event_log.position()
        for name in self.names:
            if self._stop.is_set():
                break
            models = self.services.read_models[name]
            if models.known_to_reflect(end):
                continue
            if self.split is not None:
                self.split.step(name, models, end)
            else:
                self._catch_up(name, models, end)
        return end

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def wakeup(self) -> LogWakeup:
        if self._wakeup is None:
            self._wakeup = LogWakeup(self.services.ledger.event_log, self.services.config)
        return self._wakeup

    def catch_up_to(self, goal: int) -> None:
        """Every model this worker serves brought to ``goal`` at least, here and now, step by
        step as ``run`` does (the vector index a slice at a time, each committed), but once:
        a fault is raised, never retried (``canon import`` reports it)."""
        while not self._stop.is_set() and not all(self.services.read_models[n].known_to_reflect(goal)
                                                  for n in self.names):
            self.step()

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
            from canon_ledger.projections.retrieval import catch_up_vectors  # numpy: only a worker that embeds

            reached = catch_up_vectors(models, goal, lambda done, total: self.progress.embedding(name, done, total))
            self._reached[name] = reached
            moved(reached, end)
        else:
            reached = models.catch_up_serving(end, moved)
        if models.known_to_reflect(end) or reached >= end:
            self._busy.pop(name, None)
            self.progress.caught_up(name, reached, max(0, reached - busy.start), time.monotonic() - busy.started)

    def caught_up(self) -> bool:
        """Does every model this worker serves reflect the log's end (as this process knows)?"""
        end = self.services.ledger.event_log.position()
        return all(self.services.read_models[n].known_to_reflect(end) for n in self.names)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Follow the log until ``stop()`` (or ``until()`` says so after a pass). Following
        until stopped, it marks its models followed (``following``): an import leaves their
        indexing to it."""
        from canon_ledger.infrastructure.following import Marks

        self.wakeup  # made now, so that a stop() from another thread closes it
        marks = Marks(self.services.config)
        if until is None:
            try:
                marks.hold(self.services.read_models[n].spec.name for n in self.names)
            except Exception as e:  # noqa: BLE001 - a store fault: unmarked, an import indexes itself
                log.warning("projection worker: not marked as following (%s: %s)", type(e).__name__, e)
        try:
            self._follow(until)
        finally:
            marks.release()

    def _follow(self, until: Callable[[], bool] | None) -> None:
        pause = 0.5
        while not self._stop.is_set():
            try:
                end = self.step()
                self._prefetch()
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

    def _prefetch(self) -> None:
        """Embed the queries of the chapters planned since the last pass; a failure is logged
        and costs only the first request of those chapters an embed."""
        if self.queries is None or self._stop.is_set():
            return
        try:
            self.queries.run()
        except Exception as e:  # noqa: BLE001 - never stops the worker: a request embeds for itself
            log.warning("projection worker: queries not embedded ahead (%s: %s)", type(e).__name__, e)

    def start(self) -> ProjectionWorker:
        """Run in a daemon thread of this process (``canon serve``)."""
        self._thread = threading.Thread(target=self.run, name="canon-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._own_wakeup and self._wakeup is not None:
            self._wakeup.close()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.split is not None:
            self.split.close()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class SplitWork:
    """How a ``split`` worker shares the work with others (PostgreSQL only).

    Per pass, for a model that can be split (``projections.partitioning``: canon and authoring
    by story, knowledge, the keyword index and the vectors by collection) and trails the log by
    more than ``split_after`` positions: every share (a story, a collection) not yet at the
    log's end is claimed in turn (``Claims``; a share another worker holds is left to it),
    caught up on its own (``ReadModels.catch_up_partition``) and released. When every share
    stands at the end, the build's low-water mark moves there without reading the log
    (``ReadModels.advance``). Closer to the end, the model is claimed whole and caught up as by
    a single worker; a model another worker holds is skipped this pass. Shares are found from
    the log's opening events (``Partitioning.openers``), each read once."""

    def __init__(self, worker: ProjectionWorker, split_after: int) -> None:
        from canon_ledger.infrastructure.claims import Claims

        services = worker.services
        if not services.config.is_postgres:
            raise CanonError("split_needs_postgres", "workers share the work only on PostgreSQL: on the embedded "
                             "store run one worker (it is one writer at a time)", "split")
        self.worker = worker
        self.split_after = split_after
        self.claims = Claims(services.config)
        self._found: dict[str, tuple[int, dict[str, None]]] = {}  # per partitioning: (log read up to, shares in order)
        self._since: dict[str, float] = {}  # when each model's split catch-up began

    def known_shares(self, partitioning: Partitioning, end: int) -> list[str]:
        """Every share of ``partitioning`` with an event up to ``end``, in the order they opened."""
        from canon_ledger.domain.topics import stored_topics

        seen, shares = self._found.get(partitioning.name, (0, {}))
        topics = stored_topics(*partitioning.openers)
        ledger = self.worker.services.ledger
        while seen < end:
            page = ledger.event_log.read(seen + 1, 1000, end, topics)
            shares.update(dict.fromkeys(partitioning.opened(e) for _, e in page))  # first opening kept: opening order
            seen = page[-1][0] if len(page) == 1000 else end
        self._found[partitioning.name] = (seen, shares)
        return list(shares)

    def step(self, name: str, models: Any, end: int) -> None:
        if models.splittable() and end - models.position() > self.split_after:
            self._by_share(name, models, end)
            return
        if not self.claims.take(name):
            return  # another worker has it this pass
        try:
            self.worker._catch_up(name, models, end)
        finally:
            self.claims.release(name)

    def _by_share(self, name: str, models: Any, end: int) -> None:
        partitioning = models.partitioning()
        shares = self.known_shares(partitioning, end)
        since = self._since.setdefault(name, time.monotonic())
        g, ahead = models.shares()
        worked = False
        for share in shares:
            if self.worker.stopping:
                return
            if ahead.get(share, g) >= end:
                continue
            claim = f"{name}/{share}"
            if not self.claims.take(claim):
                continue
            worked = True
            try:
                done_before = models.applied().get(share, 0)
                reached = models.catch_up_partition(share, end, lambda r, goal: self.worker.progress.moved(claim, r, goal),
                                                    stop=lambda: self.worker.stopping)
                self.worker.progress.applied(name, share, models.applied().get(share, 0) - done_before, reached,
                                             partitioning.name)
            finally:
                self.claims.release(claim)
        now, ahead = models.shares()
        if all(ahead.get(share, now) >= end for share in shares):
            if models.advance(shares, end):
                self.worker.progress.caught_up(name, end, end - g, time.monotonic() - self._since.pop(name, since))
        elif not worked:  # the shares left are other workers': look again shortly, do not spin
            self.worker._stop.wait(BUSY_ELSEWHERE)

    def close(self) -> None:
        self.claims.close()
