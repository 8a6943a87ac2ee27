"""No packet or search pays for a backlog in silence.

``index_now``: a verb that leaves a backlog behind (``canon import manuscript``, ``canon import
lorebook``) brings every read model the packet and search paths read (canon, authoring,
knowledge, the keyword index, the vectors) to the log's end before it returns, as ``canon
worker --once`` does (``ProjectionWorker.catch_up_to``: the vector index a slice of positions
at a time, each slice committed, so an interrupted import keeps what it embedded). On a
terminal it shows a bar per model and one for the embedding, with its whole total and an ETA.
The models a running worker follows (``following``) are left to it. A failure is reported,
never raised: the import's commands are applied, and importing again (all duplicates), the
next packet or a worker catches up.

``CatchUpWatch``: what the catch-up a CLI read makes itself costs (``canon packet``, ``canon
search``): the seconds and the texts embedded, and on a terminal a bar for the embedding. The
packet's bytes do not say it: they are hashed, and the same request at the same position must
give the same packet whether or not this request was the one that caught up (the CLI prints the
note on stderr); a search result's stages do (``Stage("catch-up", ...)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

NOTE_AFTER = 1.0  # seconds: a catch-up that embedded nothing is noted only when it took this long


@dataclass
class Indexed:
    """What a verb did about the indexes before returning."""

    by: str  # "import": this verb; "worker": a running worker follows every model; "none": --no-index
    position: int  # the log position the models were brought to (or are left to reach)
    seconds: float = 0.0
    chunks: int = 0  # texts the vector index embedded here
    models: list[str] = field(default_factory=list)  # caught up here
    handed: list[str] = field(default_factory=list)  # left to the running worker(s)
    error: str | None = None  # the failure that stopped the catch-up (the import stands)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"by": self.by, "position": self.position, "seconds": round(self.seconds, 3),
                                "chunks": self.chunks, "models": self.models, "handed_to_worker": self.handed}
        if self.error is not None:
            body["error"] = {"code": "indexing_failed", "message": self.error}
        return body

    def line(self) -> str:
        """One line for people."""
        if self.by == "none":
            return ("not indexed (--no-index): the next packet or search catches up first, or a worker does "
                    "(`canon worker`, `canon status` shows the backlog)")
        handed = (f"indexing of {', '.join(self.handed)} handed to the running worker: `canon status` shows its "
                  "progress") if self.handed else ""
        if self.by == "worker":
            return handed
        if self.error is not None:
            done = f"indexing stopped after {self.seconds:.1f} s ({self.chunks:,} text(s) embedded): {self.error}"
        else:
            done = (f"indexed for packets and search up to position {self.position} in {self.seconds:.1f} s: "
                    f"{self.chunks:,} text(s) embedded")
        return f"{done}; {handed}" if handed else done


def index_now(services: Any, *, shown: bool, skip: bool = False) -> Indexed:
    """Bring every read model of ``services`` to the log's end here (those a running worker
    follows excepted), with bars when ``shown``; ``skip`` (``--no-index``): nothing."""
    goal = services.ledger.event_log.position()
    if skip:
        return Indexed("none", goal)
    names = list(services.read_models)
    try:
        from canon_ledger.infrastructure.following import followed

        marked = followed(services.config, [services.read_models[n].spec.name for n in names])
    except Exception:  # noqa: BLE001 - cannot tell: index here (the tracking rows keep it exactly once)
        marked = set()
    handed = [n for n in names if services.read_models[n].spec.name in marked]
    mine = [n for n in names if n not in handed]
    if not mine:
        return Indexed("worker", goal, handed=handed)
    from canon_ledger.infrastructure.worker import ProjectionWorker
    from canon_ledger.infrastructure.worker_progress import IndexProgress

    progress = IndexProgress(shown)
    started = time.monotonic()
    error = None
    try:
        if shown and "vectors" in mine:
            progress.texts = _texts_to_embed(services, goal)
        ProjectionWorker(services, mine, progress=progress).catch_up_to(goal)
    except Exception as e:  # noqa: BLE001 - reported: the import's commands stand
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    finally:
        progress.close()
    return Indexed("import", goal, time.monotonic() - started, progress.embedded, mine, handed, error)


def _texts_to_embed(services: Any, goal: int) -> int:
    """The texts the vector index has yet to embed up to ``goal`` (the embedding bar's total)."""
    from canon_ledger.projections.model_status import pending_records, texts_waiting

    models = services.vectors
    position = models.position()
    _, records = pending_records(models, services.ledger.event_log, goal, limit=max(1, goal - position))
    return texts_waiting(models, services.ledger.event_log, records, services.text_counts)


class CatchUpWatch:
    """The catch-up a CLI read makes itself before it searches (``Services.watch``): seconds
    spent, texts embedded; ``shown``: a bar for the embedding on stderr."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self.seconds = 0.0
        self.embedded = 0
        self._bar: Any = None
        self._total = 0  # texts of the catch-up in flight

    @contextmanager
    def timed(self) -> Iterator[Callable[[int, int], None]]:
        """Around one catch-up; yields its progress(done, total) for the embedding."""
        started = time.monotonic()
        self._total = 0
        try:
            yield self.progress
            self.embedded += self._total
        finally:
            self.seconds += time.monotonic() - started
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def progress(self, done: int, total: int) -> None:
        self._total = total
        if self.shown:
            from canon_ledger.infrastructure.progress import bar, bar_to

            if self._bar is None:
                self._bar = bar("catch-up: embed", "text", disable=False, total=total)
            bar_to(self._bar, done, total)

    def note(self, before: str) -> str | None:
        """What the catch-up cost, or None when it cost nothing worth saying."""
        if not self.embedded and self.seconds < NOTE_AFTER:
            return None
        return f"caught up the indexes {before} in {self.seconds:.1f} s: {self.embedded:,} text(s) embedded"
