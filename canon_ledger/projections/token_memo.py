"""A content-addressed memo of token counts: (encoding, digest of the exact text) -> count.

A token count is a pure function of the text and the encoding, so a stored count can never
be stale, only corrupt (a hand edit, a disk fault). The memo is a cache, not canon and not a
read model: no build owns it, every build of the canon projection shares it, and a rebuild
after a schema change (texts unchanged) reads its counts instead of tokenizing 8.6 MB again.

What keeps a corrupt entry from hiding:
- the audit's scratch replay counts every text itself (it never sees the memo), so a packet
  compiled from a count the memo got wrong does not match its replay;
- ``canon rebuild --recount`` empties the memo and starts a new build, so every count in
  that build, and every entry the memo holds after it, is counted afresh.

It lives in the read models' database (one table for every story and build; the event
store's file on SQLite), written in the page's own transaction: a crash keeps or loses the
page's rows and its new entries together, and a resumed rebuild finds the same counts.
It grows by one row (~50 bytes plus its key index) per distinct text ever projected, so a
revised or re-rendered text leaves its old entry behind; ``--recount`` prunes it to the
texts of the current log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Column, Integer, LargeBinary, MetaData, String, Table, delete
from sqlalchemy.engine import Connection, Engine

from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.projections.sql_ops import Counted, Op, Run

metadata = MetaData()
token_memo = Table(
    "rm_token_memo", metadata,
    Column("encoding", String(100), primary_key=True),
    Column("digest", LargeBinary(32), primary_key=True),  # BLAKE2b-256 of the text's UTF-8 bytes
    Column("tokens", Integer, nullable=False),
    sqlite_with_rowid=False,  # the key is the table: one B-tree to search and to insert into, not two
)

# Up to this many distinct texts are counted without a look-up: counting a few short texts
# costs less than the look-up's statement (a server round trip on PostgreSQL); they are still
# stored, for the next rebuild.
COUNT_DIRECTLY = 4
SQLITE_CHUNK = 900  # keys per IN (...) lookup: under SQLite's bound-parameter limit on any build
Counter = Callable[[list[str]], list[int]]


def digest(text: str) -> bytes:
    # 256 bits: a collision (two texts sharing a count) is not a practical possibility.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()


class TokenMemo:
    """The memo for one encoding (``tokens.name``)."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding

    @staticmethod
    def setup(engine: Engine) -> None:
        metadata.create_all(engine)

    def counts(self, conn: Connection, texts: Sequence[str], count: Counter, *, later: list[Op] | None = None) -> list[int]:
        """The count of each text: from the memo where it has one, else ``count`` (one batch of
        the distinct missing texts), stored for next time, in ``conn``'s transaction. With
        ``later``, the store is appended to it as an op instead of run now, so it can go to the
        server with the page's other writes."""
        keys = {t: digest(t) for t in texts}  # distinct texts
        if len(keys) <= COUNT_DIRECTLY:  # a live catch-up of a command or two: count, just store
            known: dict[bytes, int] = {}
        else:
            known = self._lookup(conn, sorted(set(keys.values())))
        missing = [t for t, d in keys.items() if d not in known]
        if missing:
            fresh = count(missing)
            new = {keys[t]: n for t, n in zip(missing, fresh, strict=True)}
            if later is None:
                self._store(conn, new)
            else:
                later.append(Run("token_memo", None, {"counts": new}, many=self._store_runs))
            known.update(new)
        return [known[keys[t]] for t in texts]

    def clear(self, conn: Connection) -> int:
        """Forget every count of this encoding (``--recount``); returns how many."""
        return conn.execute(delete(token_memo).where(token_memo.c.encoding == self.encoding)).rowcount

    def size(self, conn: Connection) -> int:
        count: int = conn.exec_driver_sql(
            f"SELECT count(*) FROM {token_memo.name} WHERE encoding = {_mark(conn)}", (self.encoding,)).scalar_one()
        return count

    # -- SQL ---------------------------------------------------------------------------------
    def _lookup(self, conn: Connection, digests: list[bytes]) -> dict[bytes, int]:
        if not digests:
            return {}
        name = token_memo.name
        if conn.dialect.name == "postgresql":
            rows = conn.exec_driver_sql(
                f"SELECT digest, tokens FROM {name} WHERE encoding = %s AND digest = ANY(%s::bytea[])",
                (self.encoding, digests))
            return {bytes(d): n for d, n in rows}
        out: dict[bytes, int] = {}
        for i in range(0, len(digests), SQLITE_CHUNK):
            chunk = digests[i:i + SQLITE_CHUNK]
            rows = conn.exec_driver_sql(
                f"SELECT digest, tokens FROM {name} WHERE encoding = ? AND digest IN ({','.join('?' * len(chunk))})",
                (self.encoding, *chunk))
            out.update((bytes(d), n) for d, n in rows)
        return out

    def _store_runs(self, conn: Connection, params: list[dict[str, Any]]) -> bool:
        self._store(conn, {d: n for p in params for d, n in p["counts"].items()})
        return True

    def _store(self, conn: Connection, counts: dict[bytes, int]) -> None:
        # Sorted keys: two transactions storing overlapping texts (a rebuild and a live
        # catch-up on PostgreSQL) insert them in the same order, so they wait, not deadlock.
        # DO NOTHING: an entry stored meanwhile holds the same count (a pure function).
        items = sorted(counts.items())
        name = token_memo.name
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                f"INSERT INTO {name} (encoding, digest, tokens) SELECT %s, d, n "
                "FROM unnest(%s::bytea[], %s::integer[]) AS v(d, n) ON CONFLICT DO NOTHING",
                (self.encoding, [d for d, _ in items], [n for _, n in items]))
            return
        conn.exec_driver_sql(
            f"INSERT INTO {name} (encoding, digest, tokens) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [(self.encoding, d, n) for d, n in items])


def batch_counter(tokens: TokenCounter) -> Counter:
    """``texts -> counts``: the counter's own batch method when it has one (one call per page
    instead of one per text), else one ``count`` per text. Both give the same numbers."""
    many = getattr(tokens, "count_many", None)
    if many is not None:
        return many  # type: ignore[no-any-return]
    return lambda texts: [tokens.count(t) for t in texts]


class TokenCounts:
    """Fills the token counts of a page's ``Counted`` ops, in the page's transaction: from the
    memo where it has them, the rest counted in one batch and stored with the page's writes
    (the store goes last). Without a memo (the audit's scratch replay) every text is counted."""

    def __init__(self, tokens: TokenCounter, memo: TokenMemo | None = None) -> None:
        self.count = batch_counter(tokens)
        self.memo = memo

    def fill(self, conn: Connection | None, ops: list[Op | Counted]) -> list[Op]:
        """``ops`` with every ``Counted`` replaced by its op, counts set (new value dicts: an
        op is never changed once made)."""
        texts = [t for op in ops if type(op) is Counted for _, t in op.texts]
        if not texts:
            return ops  # type: ignore[return-value]
        stored: list[Op] = []
        if self.memo is not None and conn is not None:
            counts = iter(self.memo.counts(conn, texts, self.count, later=stored))
        else:
            counts = iter(self.count(texts))
        out: list[Op] = []
        for op in ops:
            if type(op) is Counted:
                inner = op.op
                out.append(replace(inner, values={**inner.values, **{c: next(counts) for c, _ in op.texts}}))
            else:
                out.append(op)  # type: ignore[arg-type]
        return out + stored


def _mark(conn: Connection) -> str:
    return "%s" if conn.dialect.paramstyle in ("format", "pyformat") else "?"
