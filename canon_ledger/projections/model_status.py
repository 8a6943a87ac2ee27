"""How far a read model trails the log: what ``canon status``, ``/readyz`` and a search's
stages report while a worker catches up.

Read only: nothing here writes a row or moves a tracking position. Counting stops at
``SCAN`` entries of the model's topics (a backlog that long is reported as at least that
many, ``capped``), so a status read stays cheap whatever the backlog.

While workers split a build (``projections.partitions``), the model's position is its
low-water mark: every share is applied at least that far. The shares workers have taken
further (a story, a collection) are listed with their own positions.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from canon_ledger.projections.retrieval import Put, changes

SCAN = 2000  # entries of a model's topics read to size its backlog


@dataclass(frozen=True)
class ShareStatus:
    share: str  # a story, or a collection
    position: int  # every event of the share up to here is applied
    behind: int  # log positions between it and the log's end (other shares' entries among them)
    story: str | None  # the story it belongs to (None: a collection of no story)


@dataclass(frozen=True)
class ModelStatus:
    name: str
    position: int  # the serving build's tracking position
    pending: int  # entries of the model's topics after it, up to the log's end (at most SCAN)
    capped: bool  # more than ``pending`` are waiting
    seconds: float  # since the oldest pending entry was appended (0 when none)
    texts: int | None = None  # texts not yet indexed / embedded in those entries (retrieval models)
    shares: tuple[ShareStatus, ...] = ()  # shares split workers took past ``position``
    # The serving build was made by an earlier schema version (``read_models.Outdated``): its
    # build tag, that version and the one this code reads. Its reads are refused until
    # `canon rebuild`; ``pending`` is not counted then.
    outdated: tuple[str, int, int] | None = None

    def as_dict(self, sees: Callable[[str | None], bool] | None = None) -> dict[str, Any]:
        """``sees``: which stories the reader may know of (a scoped key); a share of a story it
        may not see, or of no story, is left out. None: every share."""
        body: dict[str, Any] = {"position": self.position, "behind": self.pending, "behind_capped": self.capped,
                                "behind_seconds": round(self.seconds, 3)}
        if self.outdated is not None:
            tag, version, current = self.outdated
            body["outdated"] = {"build": tag, "schema_version": version, "reads_schema_version": current,
                                "remedy": "canon rebuild"}
        if self.texts is not None:
            body["backlog_texts"] = self.texts
        shown = [s for s in self.shares if sees is None or (s.story is not None and sees(s.story))]
        if shown:
            body["shares"] = {s.share: {"position": s.position, "behind_positions": s.behind} for s in shown}
        return body


def _projection(models: Any) -> Any:
    return models.runner(models.active()).projection


def pending_records(models: Any, log: Any, end: int, limit: int = SCAN) -> tuple[int, list[Any]]:
    """(tracking position, stored records of the model's topics after it up to ``end``)."""
    position = models.position()
    if position >= end:
        return position, []
    return position, log.records(position + 1, limit, end, _projection(models).topics)


class TextCounts:
    """Texts each log entry brings one retrieval model (to index or to embed), by collection.
    A pure function of the entry, and an entry's position never changes: so each is decoded
    and chunked once per process, not again by every status read and every request while a
    worker catches up (re-chunking the pending chapters would dominate such a packet's time:
    docs/benchmarks.md). A page that arrives with the embedding it was compiled with
    needs no embedding. Keeps the last ``LIMIT`` entries."""

    LIMIT = 20_000

    def __init__(self) -> None:
        self._known: OrderedDict[tuple[str, int], dict[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, projection: Any, log: Any, record: Any) -> dict[str, int]:
        key = (projection.name, record.id)
        with self._lock:
            known = self._known.get(key)
        if known is not None:
            return known
        given = getattr(projection, "given", None)
        counts: dict[str, int] = {}
        for change in changes(log.decode(record), projection.tokens):
            if isinstance(change, Put) and not (given is not None and given(change)):
                counts[change.collection_id] = counts.get(change.collection_id, 0) + 1
        with self._lock:
            self._known[key] = counts
            if len(self._known) > self.LIMIT:
                self._known.popitem(last=False)
        return counts


def texts_waiting(models: Any, log: Any, records: Sequence[Any], counts: TextCounts,
                  collections: Sequence[str] | None = None) -> int:
    """Texts the retrieval model ``models`` has yet to index (keyword) or embed (vectors) in
    ``records``, of ``collections`` (None: all)."""
    projection = _projection(models)
    wanted = set(collections) if collections is not None else None
    return sum(n for record in records for collection, n in counts.of(projection, log, record).items()
               if wanted is None or collection in wanted)


def collections_in(models: Any, log: Any, records: Sequence[Any], counts: TextCounts) -> set[str]:
    """The collections ``records`` index texts into (for the retrieval model ``models``)."""
    projection = _projection(models)
    return {collection for record in records for collection in counts.of(projection, log, record)}


def shares_ahead(models: Any, end: int) -> tuple[ShareStatus, ...]:
    """The shares of a split build standing past its low-water mark (none on SQLite, or when
    no worker splits it)."""
    partitioning = models.partitioning()
    if partitioning is None:
        return ()
    _, ahead = models.shares()
    return tuple(ShareStatus(share, p, max(0, end - p), partitioning.story(share)) for share, p in sorted(ahead.items()))


def outdated_status(name: str, models: Any, error: Any) -> ModelStatus:
    """What ``canon status`` says of a model whose serving build an earlier schema made
    (``error``: its ``read_models.Outdated``): where that build's tracking stands, and that it
    is outdated. Nothing of it is read but its tracking row."""
    from canon_ledger.projections.runner import tracked

    with models.read_engine.begin() as conn:
        position = tracked(conn, f"{models.spec.name}:{error.tag}") or 0
    return ModelStatus(name, position, 0, False, 0.0, outdated=(error.tag, error.version, error.current))


def model_status(name: str, models: Any, log: Any, end: int, *, texts: TextCounts | None = None) -> ModelStatus:
    """``texts``: count the texts waiting too (for a retrieval model), with these counts."""
    position, records = pending_records(models, log, end)
    seconds = 0.0
    if records:
        seconds = max(0.0, time.time() - log.decode(records[0]).timestamp.timestamp())
    return ModelStatus(name, position, len(records), len(records) >= SCAN, seconds,
                       texts_waiting(models, log, records, texts) if texts is not None else None,
                       shares_ahead(models, end) if records else ())
