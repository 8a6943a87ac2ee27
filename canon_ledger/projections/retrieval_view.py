"""Reads the retrieval read models for hybrid search, in one snapshot with the knowledge model
(which holds the texts, the page staleness and the topics).

Keyword scoring is BM25 on both stores (k1 1.2, b 0.75). SQLite: FTS5 ``bm25()`` over the
MATCH of the quoted, OR-joined query terms (FTS5 MATCH is AND by default: one unknown word
would empty the result), scoped by the collection token; FTS5 takes N and the average length
over the whole index. PostgreSQL: the same formula in SQL over the postings, with the IDF
ln(1 + (N - df + 0.5) / (df + 0.5)) and N, df and the average length over the collections
searched.

A weighted query (RM3's expansion, ``application/retrieval/feedback.py``) multiplies each
term's BM25 contribution by its weight. PostgreSQL: the same SQL with a weight per term.
FTS5 cannot weigh the phrases of one MATCH, so each term is its own MATCH and the weighted
contributions are summed in SQL (FTS5's bm25 of an OR query is that sum with unit weights).
The feedback statistics (N, df) are the ones each store's IDF uses: on SQLite the whole
index's, read through an ``fts5vocab`` table in the connection's temp schema (a view of the
index, nothing stored); on PostgreSQL the searched collections' postings.

Vector search: cosine in numpy over a per-collection matrix of normalised vectors, cached
in this process and reloaded when the collection's last-changed position moves. Vector
feedback (Rocchio) reads its feedback chunks' rows from the same matrices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Connection, Engine

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.ports import Doc, KeywordResult, RetrievalSnapshot, TermStats
from canon_ledger.domain.wiki import PAGE_PREFIX, page_summary
from canon_ledger.projections.driver_sql import Statements
from canon_ledger.projections.keyword_memory import KeywordMemory
from canon_ledger.projections.knowledge_tables import KnowledgeTables
from canon_ledger.projections.read_models import ReadModels
from canon_ledger.projections.retrieval import from_blob
from canon_ledger.projections.retrieval_tables import RetrievalTables, VectorTables, collection_token
from canon_ledger.projections.retrieval_text import key64, query_terms

if TYPE_CHECKING:  # numpy loads with the first vector read: a verb that reads none never imports it
    import numpy as np

K1, B = 1.2, 0.75
# ``below``: a document id bound, a page compared without its ``page:`` prefix (a page's id is
# ``page:`` + its topic id, which starts with its document's id).
_BELOW = " AND (CASE WHEN d.kind = 'page' THEN substr(d.doc_id, 6) ELSE d.doc_id END) < :below"
OVERVIEW_TOPICS = 60  # a table of contents longer than this is cut, and says so


@dataclass(frozen=True)
class Builds:
    keyword: RetrievalTables
    vectors: VectorTables | None
    knowledge: KnowledgeTables


@dataclass(frozen=True)
class ActiveBuilds:
    """The builds a retrieval snapshot reads, each its model's active one, asked in one
    statement of the snapshot's own transaction (``ReadModels.active_of``)."""

    retrieval: ReadModels
    vectors: ReadModels | None
    knowledge: ReadModels

    def __call__(self, conn: Connection) -> Builds:
        keyword, vector, text = ReadModels.active_of(conn, [self.retrieval, self.vectors, self.knowledge])
        assert keyword is not None and text is not None  # their models are always there
        return Builds(self.retrieval.tables(keyword),
                      None if self.vectors is None or vector is None else self.vectors.tables(vector),
                      self.knowledge.tables(text))


@dataclass
class _Matrix:
    changed: int
    ids: list[str]
    matrix: np.ndarray  # rows normalised, float32
    _plain: np.ndarray | None = field(default=None, repr=False)
    _rows: dict[str, int] | None = field(default=None, repr=False)

    @property
    def plain_ids(self) -> np.ndarray:
        """The ids as an array, a page's without its prefix: what ``below`` compares."""
        import numpy as np

        if self._plain is None:
            self._plain = np.array([i.removeprefix(PAGE_PREFIX) for i in self.ids] or [""], dtype=str)[:len(self.ids)]
        return self._plain

    @property
    def rows(self) -> dict[str, int]:
        """id -> its row in the matrix."""
        if self._rows is None:
            self._rows = {doc_id: i for i, doc_id in enumerate(self.ids)}
        return self._rows


class SqlRetrievalReader:
    def __init__(self, engine: Engine, builds: Callable[[Connection], Builds], vector_model: str | None,
                 keyword_memory: bool = True, query_vectors: Any = None) -> None:
        """``keyword_memory``: answer keyword queries from indexes kept in memory
        (``keyword_memory.KeywordMemory``, the same hits as the SQL); False: in SQL.
        ``query_vectors``: stored query vectors (``get(model, text, conn)``), read in a snapshot."""
        self.engine = engine
        self.query_vectors = query_vectors
        self._builds = builds
        self.vector_model = vector_model
        self.keywords = KeywordMemory() if keyword_memory else None
        self.sql = Statements()  # the reads' statements, made once
        self._matrices: dict[tuple[str, str], _Matrix] = {}
        self._lock = threading.Lock()

    @contextmanager
    def snapshot(self) -> Iterator[SqlRetrievalSnapshot]:
        with self.engine.begin() as conn:
            yield SqlRetrievalSnapshot(conn, self._builds(conn), self)

    def matrix(self, conn: Connection, tables: VectorTables, collection_id: str) -> _Matrix | None:
        import numpy as np

        vs, vecs = tables.vecsets, tables.vectors
        found = self.sql.rows(conn, f"SELECT changed FROM {vs.name} WHERE collection_id = :c", {"c": collection_id})
        changed = found[0][0] if found else None
        if changed is None:
            return None
        key = (vecs.name, collection_id)
        with self._lock:
            cached = self._matrices.get(key)
        if cached is not None and cached.changed == changed:
            return cached
        rows = conn.execute(select(vecs.c.doc_id, vecs.c.vector).where(vecs.c.collection_id == collection_id)
                            .order_by(vecs.c.doc_id)).all()
        if rows:
            m = np.vstack([from_blob(r.vector) for r in rows]).astype(np.float32)
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            m /= np.where(norms > 0, norms, 1.0)
        else:
            m = np.zeros((0, 0), dtype=np.float32)
        fresh = _Matrix(changed, [r.doc_id for r in rows], m)
        with self._lock:
            self._matrices[key] = fresh
        return fresh


class SqlRetrievalSnapshot(RetrievalSnapshot):
    def __init__(self, conn: Connection, builds: Builds, reader: SqlRetrievalReader) -> None:
        self.conn = conn
        self.builds = builds
        self.reader = reader
        self.vector_model = reader.vector_model if builds.vectors is not None else None

    # -- keyword ------------------------------------------------------------------------------------
    def keyword(self, query: str, collection_ids: Sequence[str], limit: int, below: str | None = None) -> KeywordResult:
        """``below``: only documents whose id (a page's without ``page:``) sorts before it."""
        terms = query_terms(query)
        postgres = self.builds.keyword.postings is not None
        method = f"postgres bm25 (k1 {K1}, b {B})" if postgres else "fts5 bm25 (quoted terms, OR)"
        if not (terms and collection_ids and limit > 0):
            return KeywordResult([], terms, method)
        memory = self.reader.keywords
        hits = memory.search(self.conn, self.builds.keyword, terms, collection_ids, limit, below) if memory else None
        if hits is None:
            hits = (self._postgres_bm25(dict.fromkeys(terms, 1.0), collection_ids, limit, below) if postgres
                    else self._fts5(terms, collection_ids, limit, below))
        return KeywordResult(hits, terms, method)

    def keyword_weighted(self, weights: Mapping[str, float], collection_ids: Sequence[str], limit: int,
                         below: str | None = None) -> list[Hit]:
        weights = {t: float(w) for t, w in weights.items() if w > 0}
        if not weights or not collection_ids or limit <= 0:
            return []
        if self.builds.keyword.postings is not None:
            return self._postgres_bm25(weights, collection_ids, limit, below)
        return self._fts5_weighted(weights, collection_ids, limit, below)

    def term_stats(self, doc_ids: Sequence[str], collection_ids: Sequence[str]) -> TermStats:
        d = self.builds.keyword.docs
        rows = self.conn.execute(
            select(d.c.doc_id, d.c.terms)
            .where(d.c.collection_id.in_(bindparam("colls", expanding=True)),
                   d.c.doc_id.in_(bindparam("ids", expanding=True)), d.c.kind == "chunk"),
            {"colls": list(collection_ids), "ids": list(doc_ids)}).all() if doc_ids and collection_ids else []
        doc_terms = {r.doc_id: r.terms.split() for r in rows}
        vocabulary = sorted({t for ts in doc_terms.values() for t in ts})
        if self.builds.keyword.postings is not None:
            documents, df = self._postgres_df(vocabulary, collection_ids)
        else:
            documents, df = self._fts5_df(vocabulary)
        return TermStats(doc_terms, documents, df)

    def _fts5(self, terms: list[str], collection_ids: Sequence[str], limit: int, below: str | None) -> list[Hit]:
        fts, docs = self.builds.keyword.fts, self.builds.keyword.docs.name
        colls = " OR ".join(_quote(collection_token(c)) for c in collection_ids)
        words = " OR ".join(_quote(t) for t in terms)
        match = f"coll : ({colls}) AND terms : ({words})"
        rows = self.conn.execute(text(
            f"SELECT d.doc_id, -bm25({fts}, 0.0, 1.0) AS score FROM {fts} JOIN {docs} d ON d.doc_key = {fts}.rowid "
            f"WHERE {fts} MATCH :match{_BELOW if below is not None else ''} "
            f"ORDER BY bm25({fts}, 0.0, 1.0), d.doc_id LIMIT :limit"),
            {"match": match, "limit": limit, "below": below})
        return [Hit(r.doc_id, float(r.score)) for r in rows]

    def _fts5_weighted(self, weights: dict[str, float], collection_ids: Sequence[str], limit: int,
                       below: str | None) -> list[Hit]:
        """FTS5 cannot weigh the phrases of one MATCH, but its bm25 of an OR query is the sum of
        each phrase's own bm25 (the same N, length and IDF): one MATCH per term, each scaled by
        its weight, summed per document in the same statement."""
        fts, docs = self.builds.keyword.fts, self.builds.keyword.docs.name
        colls = " OR ".join(_quote(collection_token(c)) for c in collection_ids)
        params: dict[str, Any] = {"limit": limit, "below": below}
        parts = []
        for i, term in enumerate(sorted(weights)):
            params[f"m{i}"] = f"coll : ({colls}) AND terms : ({_quote(term)})"
            params[f"w{i}"] = weights[term]
            parts.append(f"SELECT rowid AS k, :w{i} * -bm25({fts}, 0.0, 1.0) AS s FROM {fts} WHERE {fts} MATCH :m{i}")
        rows = self.conn.execute(text(
            f"SELECT d.doc_id, t.score FROM (SELECT k, sum(s) AS score FROM ({' UNION ALL '.join(parts)}) GROUP BY k) t "
            f"JOIN {docs} d ON d.doc_key = t.k WHERE TRUE{_BELOW if below is not None else ''} "
            f"ORDER BY t.score DESC, d.doc_id LIMIT :limit"), params)  # noqa: S608 - names are ours, values bound
        return [Hit(r.doc_id, float(r.score)) for r in rows]

    def _fts5_df(self, vocabulary: list[str]) -> tuple[int, dict[str, int]]:
        """N and df over the whole FTS5 index, as its bm25 takes them. The fts5vocab table lives in
        this connection's temp schema: it is a view of the index, nothing is stored."""
        fts, docs = self.builds.keyword.fts, self.builds.keyword.docs.name
        documents = int(self.conn.execute(text(f"SELECT count(*) FROM {docs}")).scalar() or 0)
        if not vocabulary:
            return documents, {}
        self.conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{fts}_vocab USING fts5vocab(main, {fts}, col)"))
        rows = self.conn.execute(text(f"SELECT term, doc FROM temp.{fts}_vocab WHERE col = 'terms' "
                                      f"AND term IN :terms").bindparams(bindparam("terms", expanding=True)),
                                 {"terms": vocabulary})
        return documents, {r.term: int(r.doc) for r in rows}

    def _postgres_df(self, vocabulary: list[str], collection_ids: Sequence[str]) -> tuple[int, dict[str, int]]:
        """N and df over the collections searched, as the postings BM25 takes them."""
        t = self.builds.keyword
        assert t.stats is not None and t.postings is not None  # a PostgreSQL build has both
        documents = int(self.conn.execute(
            text(f"SELECT coalesce(sum(docs), 0) FROM {t.stats.name} WHERE collection_id = ANY(:colls)"),
            {"colls": list(collection_ids)}).scalar() or 0)
        if not vocabulary:
            return documents, {}
        rows = self.conn.execute(text(
            f"SELECT term, count(*) AS df FROM {t.postings.name} WHERE coll_key = ANY(:coll_keys) "
            f"AND term = ANY(:terms) GROUP BY term"),
            {"coll_keys": [key64(c) for c in collection_ids], "terms": vocabulary})
        return documents, {r.term: int(r.df) for r in rows}

    def _postgres_bm25(self, weights: dict[str, float], collection_ids: Sequence[str], limit: int,
                       below: str | None) -> list[Hit]:
        """Each term's BM25 contribution times its weight (1 for a plain query)."""
        t = self.builds.keyword
        assert t.stats is not None and t.postings is not None  # a PostgreSQL build has both
        sql = text(f"""
            WITH s AS (
                SELECT sum(docs)::float8 AS n, sum(total_length)::float8 / greatest(sum(docs), 1) AS avgdl
                FROM {t.stats.name} WHERE collection_id = ANY(:colls)),
            q AS (SELECT * FROM unnest(CAST(:terms AS text[]), CAST(:weights AS float8[])) AS q(term, w)),
            h AS (
                SELECT doc_key, term, tf, dl FROM {t.postings.name}
                WHERE coll_key = ANY(:coll_keys) AND term = ANY(:terms)),
            df AS (SELECT term, count(*)::float8 AS df FROM h GROUP BY term),
            r AS (
                SELECT h.doc_key, sum(q.w * ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
                                      * h.tf * ({K1} + 1) / (h.tf + {K1} * (1 - {B} + {B} * h.dl / s.avgdl))) AS score
                FROM h JOIN df ON df.term = h.term JOIN q ON q.term = h.term CROSS JOIN s
                GROUP BY h.doc_key)
            SELECT d.doc_id, r.score FROM r JOIN {t.docs.name} d ON d.doc_key = r.doc_key
            WHERE TRUE{_BELOW.replace(" < :below", ' COLLATE "C" < :below') if below is not None else ''}
            ORDER BY r.score DESC, d.doc_id LIMIT :limit""")  # noqa: S608 - names are ours, values are bound
        terms = list(weights)
        rows = self.conn.execute(sql, {"colls": list(collection_ids), "coll_keys": [key64(c) for c in collection_ids],
                                       "terms": terms, "weights": [weights[w] for w in terms], "limit": limit,
                                       "below": below})
        return [Hit(r.doc_id, float(r.score)) for r in rows]

    def stored_vector(self, model: str, query: str) -> list[float] | None:
        """The query's vector of ``model`` kept in the store, or None (read in this snapshot)."""
        store = self.reader.query_vectors
        found: list[float] | None = None if store is None else store.get(model, query, self.conn)
        return found

    # -- vectors --------------------------------------------------------------------------------------
    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> list[Hit]:
        import numpy as np

        if self.builds.vectors is None or limit <= 0:
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q /= norm
        ids: list[str] = []
        scores: list[np.ndarray] = []
        for collection in dict.fromkeys(collection_ids):
            m = self.reader.matrix(self.conn, self.builds.vectors, collection)
            if m is None or not m.ids:
                continue
            if m.matrix.shape[1] != q.shape[0]:
                raise ValueError(f"query vector has {q.shape[0]} dimensions, the index {m.matrix.shape[1]}")
            collection_scores = m.matrix @ q
            if below is not None:
                keep = m.plain_ids < below
                ids += [i for i, k in zip(m.ids, keep) if k]
                collection_scores = collection_scores[keep]
            else:
                ids += m.ids
            scores.append(collection_scores)
        if not ids:
            return []
        all_scores = np.concatenate(scores)
        k = min(limit, len(ids))
        top = np.argpartition(-all_scores, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(all_scores[i]), ids[i]))
        return [Hit(ids[i], float(all_scores[i])) for i in order]

    def vectors(self, ids: Sequence[str], collection_ids: Sequence[str]) -> dict[str, list[float]]:
        """The rows of the cached matrices (normalised, as the cosine search reads them)."""
        if self.builds.vectors is None or not ids:
            return {}
        out: dict[str, list[float]] = {}
        for collection in dict.fromkeys(collection_ids):
            m = self.reader.matrix(self.conn, self.builds.vectors, collection)
            if m is None or not m.ids:
                continue
            for doc_id in ids:
                row = m.rows.get(doc_id)
                if row is not None and doc_id not in out:
                    out[doc_id] = m.matrix[row].tolist()
        return out

    # -- documents ------------------------------------------------------------------------------------
    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        kb = self.builds.knowledge
        out: dict[str, Doc] = {}
        for collection, (chunk_ids, topic_ids) in _by_collection(ids).items():
            if chunk_ids:
                for chunk_id, body, source in self.reader.sql.rows(self.conn, (
                        f"SELECT chunk_id, text, source FROM {kb.chunks.name} WHERE collection_id = :c "
                        f"AND chunk_id = ANY(:ids) AND removed = false"), {"c": collection, "ids": chunk_ids}):
                    out[chunk_id] = Doc(chunk_id, "chunk", collection, body, False, [source])
            if topic_ids:
                for topic_id, title, tldr, edited, set_changed, compiled in self.reader.sql.rows(self.conn, (
                        f"SELECT topic_id, title, tldr, edited, set_changed, compiled FROM {kb.pages.name} "
                        f"WHERE collection_id = :c AND topic_id = ANY(:ids)"), {"c": collection, "ids": topic_ids}):
                    doc_id = PAGE_PREFIX + topic_id
                    # A stale page serves its last good TLDR, flagged: never a guess at a newer one.
                    out[doc_id] = Doc(doc_id, "page", collection, page_summary(title, tldr),
                                      bool(edited or set_changed), [compiled])
        return out

    def overview(self, collection_id: str) -> Doc | None:
        tp = self.builds.knowledge.topics
        rows = self.conn.execute(select(tp.c.title, tp.c.source).where(tp.c.collection_id == collection_id)
                                 .order_by(tp.c.document_id, tp.c.ordinal)).all()
        if not rows:
            return None
        lines = [f"- {r.title}" for r in rows[:OVERVIEW_TOPICS]]
        if len(rows) > OVERVIEW_TOPICS:
            lines.append(f"- ... and {len(rows) - OVERVIEW_TOPICS} more topics")
        body = f"Overview of {collection_id} ({len(rows)} topics):\n" + "\n".join(lines)
        return Doc(f"overview:{collection_id}", "overview", collection_id, body, False,
                   sorted({r.source for r in rows}))


def _quote(token: str) -> str:
    """An FTS5 string: double quotes doubled, so no query text is ever read as syntax."""
    return '"' + token.replace('"', '""') + '"'


def _by_collection(ids: Sequence[str]) -> dict[str, tuple[list[str], list[str]]]:
    """collection -> (chunk ids, page topic ids); every id starts with ``collection/``."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for i in ids:
        page = i.startswith(PAGE_PREFIX)
        key = i[len(PAGE_PREFIX):] if page else i
        chunks, topics = out.setdefault(key.partition("/")[0], ([], []))
        (topics if page else chunks).append(key)
    return out
