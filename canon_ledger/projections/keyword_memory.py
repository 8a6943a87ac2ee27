"""BM25 over a keyword index held in memory: the same hits, in the same order, as each store's
SQL (``retrieval_view``), without a statement per query term.

A reader keeps, per docs table and collection, the collection's terms as postings (a term's
documents and frequencies, as arrays) with each document's id and length. A collection is
read again whole when its fingerprint moved: (number of docs, highest ``source``). That pair
changes with every write to the collection: the retrieval projection applies a collection's
events in log order and stamps each upserted doc with its event's position, so an insert or an
update raises the highest source and a delete lowers the count. One statement, on the docs
table's collection index, reads every fingerprint.

The scores are computed as each store computes them, operation for operation, in IEEE double:

* **SQLite** (FTS5 ``bm25(fts, 0.0, 1.0)`` of ``coll : (c) AND terms : (t1 OR t2 ...)``): N and
  the token total are the whole FTS table's (its averages record: every collection, and the
  one ``coll`` token of each row), a document's length D counts that token too, and a term's
  IDF is ``log((N - df + 0.5) / (df + 0.5))`` (at least 1e-6) with df over every collection.
  The per-term contributions are added in query order, as FTS5 adds its phrases.
* **PostgreSQL** (``_postgres_bm25``): N, the average length and df over the collections
  searched; the IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``. PostgreSQL's ``sum`` adds in the
  order its plan reads the postings, so its last bit may differ; the order of hits differs
  only where two scores tie within that bit.

Ties are broken by doc id, as both statements do (``ORDER BY score DESC, doc_id``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.domain.wiki import PAGE_PREFIX
from canon_ledger.projections.driver_sql import Statements

if TYPE_CHECKING:
    import numpy as np

    from canon_ledger.projections.retrieval_tables import RetrievalTables

K1, B = 1.2, 0.75
MAX_DOCS = 500_000  # a table with more docs is searched in SQL (the memory it would take)


class CollectionTerms:
    """One collection's keyword index, as of ``fingerprint``: a row per doc (a removed doc's row
    is left empty, with no postings, until the rows are packed), each term's rows and
    frequencies as arrays. ``update`` applies what changed since (docs removed, added or
    rewritten), touching only their terms' arrays."""

    def __init__(self) -> None:
        self.fingerprint: tuple[int, int] = (0, 0)
        self.ids: list[str] = []  # row -> doc id ("" for an empty row)
        self.rows: dict[str, int] = {}  # doc id -> row
        self.sources: dict[str, int] = {}  # doc id -> the position that wrote it
        self.lengths: list[int] = []  # row -> the doc's number of terms (0 for an empty row)
        self.terms: list[tuple[str, ...]] = []  # row -> the doc's distinct terms
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # term -> (rows, frequencies, float64)
        self.total_length = 0
        self._length: np.ndarray | None = None
        self._plain: np.ndarray | None = None
        self._below: dict[str, np.ndarray] = {}

    @property
    def docs(self) -> int:
        return len(self.rows)

    @property
    def length(self) -> np.ndarray:
        """float64: each row's number of terms."""
        import numpy as np

        if self._length is None:
            self._length = np.asarray(self.lengths, dtype=np.float64)
        return self._length

    def df(self, term: str) -> int:
        found = self.postings.get(term)
        return 0 if found is None else len(found[0])

    def kept(self, below: str | None) -> np.ndarray | None:
        """The rows ``below`` keeps (None: every row), kept for the next query with the same bound."""
        import numpy as np

        if below is None:
            return None
        mask = self._below.get(below)
        if mask is None:
            if self._plain is None:  # the ids as ``below`` compares them (a page's without ``page:``)
                self._plain = np.array([i.removeprefix(PAGE_PREFIX) for i in self.ids] or [""], dtype=str)[
                    :len(self.ids)]
            if len(self._below) > 64:
                self._below.clear()
            mask = self._below[below] = self._plain < below
        return mask

    def update(self, gone: Sequence[str], docs: Sequence[Any], fingerprint: tuple[int, int]) -> None:
        """Remove the docs ``gone`` and (re)write ``docs`` (doc id, length, terms, source rows)."""
        import numpy as np

        freed = [self.rows.pop(doc_id) for doc_id in [*gone, *(d[0] for d in docs)] if doc_id in self.rows]
        touched: set[str] = set()
        for row in freed:
            touched.update(self.terms[row])
            self.sources.pop(self.ids[row], None)
            self.total_length -= self.lengths[row]
            self.ids[row], self.lengths[row], self.terms[row] = "", 0, ()
        dropped = np.asarray(freed, dtype=np.int64)
        added: dict[str, tuple[list[int], list[int]]] = {}
        for doc_id, length, text, source in docs:
            row = len(self.ids)
            counts: dict[str, int] = {}
            for term in text.split():
                counts[term] = counts.get(term, 0) + 1
            self.ids.append(doc_id)
            self.rows[doc_id], self.sources[doc_id] = row, int(source)
            self.lengths.append(int(length))
            self.terms.append(tuple(counts))
            self.total_length += int(length)
            for term, tf in counts.items():
                entry = added.get(term)
                if entry is None:
                    entry = added[term] = ([], [])
                entry[0].append(row)
                entry[1].append(tf)
        for term in touched | added.keys():
            rows, tfs = self.postings.get(term, (_EMPTY_ROWS, _EMPTY_TFS))
            if len(dropped) and term in touched:
                keep = ~np.isin(rows, dropped)
                rows, tfs = rows[keep], tfs[keep]
            more = added.get(term)
            if more is not None:
                rows = np.concatenate([rows, np.asarray(more[0], dtype=np.int64)])
                tfs = np.concatenate([tfs, np.asarray(more[1], dtype=np.float64)])
            if len(rows):
                self.postings[term] = (rows, tfs)
            else:
                self.postings.pop(term, None)
        self.fingerprint = fingerprint
        self._length = self._plain = None
        self._below = {}


_EMPTY_ROWS: Any = None  # set on first use (numpy loads with the first keyword query)
_EMPTY_TFS: Any = None


def _empty() -> None:
    global _EMPTY_ROWS, _EMPTY_TFS
    if _EMPTY_ROWS is None:
        import numpy as np

        _EMPTY_ROWS, _EMPTY_TFS = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)


def _varint(blob: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at``: (value, next offset)."""
    value = 0
    for i in range(8):
        byte = blob[at + i]
        if byte < 0x80:
            return (value << 7) | byte, at + i + 1
        value = (value << 7) | (byte & 0x7F)
    return (value << 8) | blob[at + 8], at + 9


def fts5_totals(conn: Connection, fts: str, statements: Statements | None = None) -> tuple[int, int]:
    """(rows, tokens over every column) of an FTS5 table, from its averages record (rowid 1 of
    ``<fts>_data``: a varint row count, then one varint token total per column) — what its
    ``bm25`` takes N and the average length from."""
    found = (statements or Statements()).rows(conn, f"SELECT block FROM {fts}_data WHERE id = 1")
    if not found or not found[0][0]:
        return 0, 0
    blob = bytes(found[0][0])
    rows, at = _varint(blob, 0)
    tokens = 0
    while at < len(blob):
        value, at = _varint(blob, at)
        tokens += value
    return rows, tokens


class KeywordMemory:
    """The keyword indexes a reader keeps (``SqlRetrievalReader``), per docs table and collection."""

    def __init__(self) -> None:
        self._collections: dict[tuple[str, str], CollectionTerms] = {}
        self._lock = threading.Lock()
        self._sql = Statements()
        self._asked: set[tuple[str, str]] = set()  # collections searched once, in SQL (``_current``)

    def search(self, conn: Connection, tables: RetrievalTables, terms: list[str], collection_ids: Sequence[str],
               limit: int, below: str | None) -> list[Hit] | None:
        """The BM25 hits of ``terms`` (each weighing 1), best first, as the store's SQL ranks
        them; None (search it in SQL) for a collection's first query in this process, or when
        the index is too large to keep."""
        docs = tables.docs.name
        searched = list(dict.fromkeys(collection_ids))
        postgres = tables.postings is not None
        with self._lock:
            held = self._current(conn, docs, None if not postgres else searched)
            if held is None:
                return None
            totals = None if postgres else fts5_totals(conn, tables.fts or "", self._sql)
            return bm25(held, searched, terms, limit, below, totals)

    def _current(self, conn: Connection, docs: str, collections: list[str] | None) -> dict[str, CollectionTerms] | None:
        """The indexes of ``collections`` (None: every collection of the table), each read again
        if its fingerprint moved. Called under the lock."""
        if collections is None:
            marks = self._sql.rows(conn, f"SELECT collection_id, count(*), max(source) FROM {docs} "
                                         f"GROUP BY collection_id")
        else:
            marks = self._sql.rows(conn, f"SELECT collection_id, count(*), max(source) FROM {docs} "
                                         f"WHERE collection_id = ANY(:c) GROUP BY collection_id", {"c": collections})
        if sum(int(m[1]) for m in marks) > MAX_DOCS:
            return None
        unread = [(docs, m[0]) for m in marks if (docs, m[0]) not in self._collections]
        if unread and not all(key in self._asked for key in unread):
            # A collection's first query in this process goes to SQL: a one-shot process (a CLI
            # verb) asks once, and reading the whole collection would cost it more.
            self._asked.update(unread)
            return None
        held: dict[str, CollectionTerms] = {}
        for collection, count, top in marks:
            key = (docs, collection)
            fingerprint = (int(count), int(top))
            known = self._collections.get(key)
            if known is None or known.fingerprint != fingerprint:
                known = self._collections[key] = self._refreshed(conn, docs, collection, known, fingerprint)
            held[collection] = known
        if collections is None:  # a collection gone from the table goes from memory too
            for key in [k for k in self._collections if k[0] == docs and k[1] not in held]:
                del self._collections[key]
        return held




    def _refreshed(self, conn: Connection, docs: str, collection: str, known: CollectionTerms | None,
                   fingerprint: tuple[int, int]) -> CollectionTerms:
        """``known`` brought to ``fingerprint``: the docs whose source changed read again, the docs
        gone removed; a new index, read whole, when there is none or most of it changed."""
        _empty()
        sources = dict(self._sql.rows(conn, f"SELECT doc_id, source FROM {docs} WHERE collection_id = :c",
                                      {"c": collection}))
        if known is not None:
            changed = [d for d, source in sources.items() if known.sources.get(d) != source]
            gone = [d for d in known.sources if d not in sources]
            if len(changed) + len(gone) <= max(64, len(sources) // 4) and len(known.ids) <= 2 * max(len(sources), 64):
                rows: list[Any] = []
                for i in range(0, len(changed), 500):  # SQLite binds each id as a parameter
                    rows += self._sql.rows(conn, f"SELECT doc_id, length, terms, source FROM {docs} "
                                                 f"WHERE collection_id = :c AND doc_id = ANY(:ids)",
                                           {"c": collection, "ids": changed[i:i + 500]})
                known.update(gone, rows, fingerprint)
                return known
        fresh = CollectionTerms()
        fresh.update((), self._sql.rows(conn, f"SELECT doc_id, length, terms, source FROM {docs} "
                                              f"WHERE collection_id = :c ORDER BY doc_id", {"c": collection}),
                     fingerprint)
        return fresh


def bm25(held: dict[str, CollectionTerms], searched: Sequence[str], terms: list[str], limit: int,
         below: str | None, fts_totals: tuple[int, int] | None) -> list[Hit]:
    """The hits of ``terms`` over the ``searched`` collections among ``held``, best first: as
    FTS5's ``bm25`` ranks them when ``fts_totals`` (its rows and tokens) is given, with df over
    every held collection; else as the PostgreSQL statement does, over the searched ones."""
    every = [held[c] for c in dict.fromkeys(searched) if c in held]
    idf: dict[str, float] = {}
    if fts_totals is None:
        n = sum(c.docs for c in every)
        for t in terms:
            df = float(sum(c.df(t) for c in every))
            if df:
                idf[t] = math.log(1 + (float(n) - df + 0.5) / (df + 0.5))
        avgdl, extra = float(sum(c.total_length for c in every)) / max(n, 1), 0.0
    else:
        n, tokens = fts_totals
        for t in terms:
            df = sum(c.df(t) for c in held.values())
            if df:
                value = math.log((n - df + 0.5) / (df + 0.5))
                idf[t] = value if value > 0.0 else 1e-6
        avgdl = float(tokens) / float(n) if n else 1.0
        extra = 1.0  # a row's ``coll`` token counts in its length
    return _ranked(every, terms, idf, avgdl, extra, limit, below, fts_totals is None)


def _ranked(collections: list[CollectionTerms], terms: list[str], idf: dict[str, float], avgdl: float, extra: float,
            limit: int, below: str | None, postgres: bool) -> list[Hit]:
    import numpy as np

    ids: list[str] = []
    scores: list[np.ndarray] = []
    for c in collections:
        if not c.ids:
            continue
        found = [(idf[t], c.postings[t]) for t in (sorted(terms) if postgres else terms)
                 if t in idf and t in c.postings]
        if not found:
            continue
        # Every (doc, term) pair in term order: ``bincount`` adds each doc's contributions in
        # that order, as the statement's sum does, term by term.
        rows = np.concatenate([p[0] for _, p in found])
        tf = np.concatenate([p[1] for _, p in found])
        weight = np.repeat([w for w, _ in found], [len(p[0]) for _, p in found])
        mask = c.kept(below)
        if mask is not None:
            keep = mask[rows]
            rows, tf, weight = rows[keep], tf[keep], weight[keep]
        norm = K1 * ((1 - B) + (B * (c.length[rows] + extra)) / avgdl)
        if postgres:  # w * ln(...) * tf * (k1 + 1) / (tf + k1 * (...)), left to right
            part = ((weight * tf) * (K1 + 1.0)) / (tf + norm)
        else:  # idf * ((f * (k1 + 1)) / (f + k1 * (...))), as FTS5's bm25
            part = weight * ((tf * (K1 + 1.0)) / (tf + norm))
        score = np.bincount(rows, weights=part, minlength=len(c.ids))
        hit = np.zeros(len(c.ids), dtype=bool)
        hit[rows] = True
        rows_hit = np.flatnonzero(hit)
        ids += [c.ids[i] for i in rows_hit]
        scores.append(score[rows_hit])
    if not ids or limit <= 0:
        return []
    every = np.concatenate(scores)
    k = min(limit, len(ids))
    if k < len(ids):  # every doc scoring at least the k-th best: ties at the bound sort by id
        bound = np.partition(-every, k - 1)[k - 1]
        top = np.flatnonzero(-every <= bound)
    else:
        top = np.arange(len(ids))
    order = sorted(top.tolist(), key=lambda i: (-float(every[i]), ids[i]))[:k]
    return [Hit(ids[i], float(every[i])) for i in order]

