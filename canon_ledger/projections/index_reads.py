"""How a read over the indexes (a search, a packet's L1) keeps current with the log.

Two ways, chosen per store: ``by_worker`` False (the CLI), a read catches knowledge and the
keyword index up to the log's end itself, then the vectors (their backlog embedded before
their write transaction opens), and reports no lag; ``by_worker`` True (a server whose worker
feeds the indexes), a read catches nothing up and its stages say what the worker has not
indexed yet (``lag``). Either way nothing is read twice and nothing is applied twice: the
catch-ups are the read models' own (``ReadModels.ensure_reflects``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from canon_ledger.application.event_log import EventLogReader
from canon_ledger.projections.model_status import SCAN, TextCounts, pending_records, texts_waiting
from canon_ledger.projections.read_models import ReadModels
from canon_ledger.projections.retrieval import catch_up_vectors


class IndexReads:
    """The catch-up (or the lag) of knowledge, the keyword index and the vectors, as a search
    and a packet's L1 ask for it (``SearchService``'s ``catch_up``, ``catch_up_vectors`` and
    ``lag``). ``watch``: a CLI's eye on the catch-ups its reads make (``timed()``, yielding
    the embedding's progress), or None."""

    def __init__(self, log: EventLogReader, knowledge: ReadModels, retrieval: ReadModels, vectors: ReadModels | None,
                 text_counts: TextCounts, *, by_worker: bool) -> None:
        self.log = log
        self.knowledge = knowledge
        self.retrieval = retrieval
        self.vectors = vectors
        self.text_counts = text_counts  # texts each pending entry brings: counted once per process
        self.by_worker = by_worker
        self.watch: Any = None

    def catch_up(self, goal: int) -> None:
        """Knowledge and the keyword index up to ``goal``; nothing when a worker feeds them."""
        if self.by_worker:
            return
        with self._watched():
            self.knowledge.ensure_reflects(goal)
            self.retrieval.ensure_reflects(goal)

    def catch_up_vectors(self, goal: int) -> None:
        """The vectors up to ``goal`` (embedding before the write transaction opens); nothing
        without an embedder or when a worker feeds them."""
        if self.by_worker or self.vectors is None:
            return
        with self._watched() as progress:
            catch_up_vectors(self.vectors, goal, progress)

    def lag(self, collections: Sequence[str], end: int) -> dict[str, str]:
        """Stage notes for a search of ``collections`` at log position ``end`` while the worker
        has not indexed that far: what the keyword index and the vectors do not hold yet (none
        when this read catches them up itself)."""
        if not self.by_worker:
            return {}
        notes: dict[str, str] = {}
        for stage, models, what in (("keyword", self.retrieval, "not yet indexed"),
                                    ("vector", self.vectors, "not yet embedded")):
            if models is None or models.known_to_reflect(end):  # this process's worker projected it all: no read
                continue
            _, records = pending_records(models, self.log, end)
            waiting = texts_waiting(models, self.log, records, self.text_counts, collections) if records else 0
            if waiting:
                more = "+" if len(records) >= SCAN else ""
                notes[stage] = (f"{waiting}{more} text(s) {what}; keyword only for them" if stage == "vector" else
                                f"{waiting}{more} text(s) {what}: not searchable until the worker indexes them")
        return notes

    def _watched(self) -> Any:
        return nullcontext() if self.watch is None else self.watch.timed()
