"""The keyword index kept in memory answers as each store's SQL does: the same hits in the same
order with the same BM25 scores (SQLite: bit for bit; PostgreSQL: ids and order, scores to the
last bits, since its ``sum`` adds in its plan's order), across collections, ``below`` bounds,
English, Chinese and a real novel's prose, and again after documents change."""

from __future__ import annotations

import gzip
import math
import random
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from canon_ledger.domain.commands import parse_command
from canon_ledger.projections.keyword_memory import fts5_totals

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CHINESE = ("林黛玉进贾府，步步留心，时时在意，不肯轻易多说一句话，多行一步路。\n\n"
           "贾母见了黛玉，一把搂入怀中，心肝儿肉叫着大哭起来。\n\n"
           "宝玉看罢，因笑道：这个妹妹我曾见过的。")


def _apply(services: Any, command: dict[str, Any]) -> None:
    [result] = services.ledger.apply([parse_command({"command_id": uuid.uuid4().hex, **command})])
    assert result.ok, result.as_dict()


def _ingest(services: Any, collection: str, document: str, body: str) -> None:
    _apply(services, {"type": "ingest_document", "collection_id": collection, "document_id": document,
                      "title": document, "text": body})


def _novel(chars: int) -> str:
    with gzip.open(FIXTURES / "moby_dick.txt.gz", "rt", encoding="utf-8") as f:
        return f.read(400_000)[200_000:200_000 + chars]


def _docs(services: Any) -> list[tuple[str, str, str]]:
    with services.retrieval_reader.engine.begin() as conn:
        docs = services.retrieval_reader._builds(conn).keyword.docs.name
        return [tuple(r) for r in conn.execute(text(f"SELECT collection_id, doc_id, terms FROM {docs} ORDER BY doc_id"))]


def _compare(services: Any, rng: random.Random, queries: int) -> int:
    """Memory and SQL answers for random queries: asserts them equal; returns the hits compared."""
    reader = services.retrieval_reader
    docs = _docs(services)
    postgres = services.config.is_postgres
    compared = 0
    for i in range(queries):
        collection, _, terms = rng.choice(docs)
        words = terms.split()
        query = " ".join(rng.sample(words, min(len(words), rng.randint(1, 40))))
        below = None if i % 3 == 0 else rng.choice(docs)[1]
        collections = [collection] if i % 4 else sorted({d[0] for d in docs})
        with reader.snapshot() as snap:
            memory = snap.keyword(query, collections, 30, below).hits
            held, reader.keywords = reader.keywords, None
            try:
                sql = snap.keyword(query, collections, 30, below).hits
            finally:
                reader.keywords = held
        if postgres:  # the same hits; two may trade places only where their scores tie to the last bits
            assert len(memory) == len(sql), (query, below, collections)
            by_id = {h.id: h.score for h in sql}
            for m, s in zip(memory, sql):
                assert m.id in by_id and math.isclose(m.score, by_id[m.id], rel_tol=1e-12), (query, m, s)
                assert m.id == s.id or math.isclose(m.score, s.score, rel_tol=1e-12), (query, m, s)
        else:
            assert [(h.id, h.score) for h in memory] == [(h.id, h.score) for h in sql], (query, below, collections)
        compared += len(sql)
    return compared


def test_memory_answers_as_the_sql_does_and_follows_every_change(rs: Any) -> None:
    _ingest(rs, "novel", "moby.txt", _novel(60_000))
    _ingest(rs, "guild", "zh.md", CHINESE)
    _ingest(rs, "guild", "notes.md", "# Notes\n\nThe whale oil smokes. The wick is trimmed at the ninth bell.")
    rs.catch_up_retrieval()
    rng = random.Random(7)
    assert _compare(rs, rng, 60) > 200  # the queries find something to compare

    # A few edits update the held index in place (rows emptied and added), answering as the SQL.
    held = rs.retrieval_reader.keywords._collections
    [novel] = [v for k, v in held.items() if k[1] == "novel"]
    for n, chunk in enumerate([d[1] for d in _docs(rs) if d[0] == "novel"][:4]):
        _apply(rs, {"type": "edit_chunk", "chunk_id": chunk, "text": f"Queequeg's harpoon, edit {n}: the whale oil."})
        rs.catch_up_retrieval()
        assert _compare(rs, rng, 8) > 0
    assert [v for k, v in held.items() if k[1] == "novel"] == [novel]  # the same index, updated
    assert len(novel.ids) == novel.docs + 4  # each edit emptied one row and wrote one

    # Every kind of change moves a collection's fingerprint: an edit, a re-ingest that drops
    # chunks, a new collection (on SQLite every collection's df and N count).
    chunk = next(d[1] for d in _docs(rs) if d[0] == "guild" and "notes.md" in d[1])
    _apply(rs, {"type": "edit_chunk", "chunk_id": chunk, "text": "Colza oil only; whale oil clouds the glass."})
    _ingest(rs, "novel", "moby.txt", _novel(20_000))
    _ingest(rs, "other", "zh.md", CHINESE + "\n\n黛玉又问宝玉。")
    rs.catch_up_retrieval()
    assert _compare(rs, rng, 60) > 200


def test_the_fts5_averages_record_gives_the_rows_and_tokens_bm25_reads(rs: Any) -> None:
    if rs.config.is_postgres:
        return  # FTS5 is SQLite's; PostgreSQL reads its totals from the stats table
    _ingest(rs, "guild", "notes.md", "# Notes\n\nThe whale oil smokes.\n\nThe wick is trimmed at the ninth bell.")
    _ingest(rs, "guild", "zh.md", CHINESE)
    rs.catch_up_retrieval()
    with rs.retrieval_reader.engine.begin() as conn:
        tables = rs.retrieval_reader._builds(conn).keyword
        rows, tokens = fts5_totals(conn, tables.fts)
        count, length = conn.execute(text(f"SELECT count(*), sum(length) FROM {tables.docs.name}")).one()
    assert (rows, tokens) == (count, length + count)  # one ``coll`` token a row
