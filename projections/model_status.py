"""How far a read model trails the log: what ``canon status``, ``/readyz`` and a search's
stages report while a worker catches up.

Read only: nothing here writes a row or moves a tracking position. Counting stops at
``SCAN`` entries of the model's topics (a backlog that long is reported as at least that
many, ``capped``), so a status read stays cheap whatever the backlog.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from projections.retrieval import Put, changes

SCAN = 2000  # entries of a model's topics read to size its backlog


@dataclass(frozen=True)
class ModelStatus:
    name: str
    position: int  # the serving build's tracking position
    pending: int  # entries of the model's topics after it, up to the log's end (at most SCAN)
    capped: bool  # more than ``pending`` are waiting
    seconds: float  # since the oldest pending entry was appended (0 when none)
    texts: int | None = None  # texts not yet indexed / embedded in those entries (retrieval models)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"position": self.position, "behind": self.pending, "behind_capped": self.capped,
                                "behind_seconds": round(self.seconds, 3)}
        if self.texts is not None:
            body["backlog_texts"] = self.texts
        return body


def _projection(models: Any) -> Any:
    return models.runner(models.active()).projection


def pending_records(models: Any, log: Any, end: int, limit: int = SCAN) -> tuple[int, list[Any]]:
    """(tracking position, stored records of the model's topics after it up to ``end``)."""
    position = models.position()
    if position >= end:
        return position, []
    return position, log.records(position + 1, limit, end, _projection(models).topics)


def texts_waiting(models: Any, log: Any, records: Sequence[Any], collections: Sequence[str] | None = None) -> int:
    """Texts the retrieval model ``models`` has yet to index (keyword) or embed (vectors) in
    ``records``, of ``collections`` (None: all). A page that arrives with the embedding it was
    compiled with needs no embedding."""
    projection = _projection(models)
    wanted = set(collections) if collections is not None else None
    given = getattr(projection, "given", None)
    count = 0
    for record in records:
        for change in changes(log.decode(record), projection.tokens):
            if isinstance(change, Put) and (wanted is None or change.collection_id in wanted):
                count += 0 if given is not None and given(change) else 1
    return count


def collections_in(models: Any, log: Any, records: Sequence[Any]) -> set[str]:
    """The collections ``records`` index texts into (for the retrieval model ``models``)."""
    tokens = _projection(models).tokens
    return {change.collection_id for record in records for change in changes(log.decode(record), tokens)
            if isinstance(change, Put)}


def model_status(name: str, models: Any, log: Any, end: int, *, texts: bool = False) -> ModelStatus:
    position, records = pending_records(models, log, end)
    seconds = 0.0
    if records:
        seconds = max(0.0, time.time() - log.decode(records[0]).timestamp.timestamp())
    return ModelStatus(name, position, len(records), len(records) >= SCAN, seconds,
                       texts_waiting(models, log, records) if texts else None)
