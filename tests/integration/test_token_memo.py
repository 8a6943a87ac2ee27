"""The token-count memo: a rebuild reuses counts of byte-equal texts, the audit does not, and
``rebuild --recount`` repairs a corrupt entry. On both stores."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from canon_ledger.application.packets.recipes import Request
from canon_ledger.projections.specs import canon_spec
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.infrastructure.tokenizer import token_counter
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.read_models import ReadModels
from canon_ledger.projections.token_memo import TokenMemo, digest, token_memo
from tests.cli_runner import canon
from tests.helpers import apply_demo


class CountingCounter:
    """The real counter, counting how many texts it was asked to count."""

    def __init__(self) -> None:
        self.inner = token_counter()
        self.name = self.inner.name
        self.texts = 0

    def count(self, text: str) -> int:
        self.texts += 1
        return self.inner.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return self.inner.truncate(text, max_tokens)


def _checksum(models: ReadModels) -> str:
    with models.read_engine.begin() as conn:
        return table_checksum(conn, models.tables(models.active(conn)))


def _models(services, tokens, memo: TokenMemo | None) -> ReadModels:
    """The services' canon builds, projected with ``tokens`` and ``memo``."""
    c = services.canon
    return ReadModels(canon_spec(tokens, memo), c.log, c.write_engine, c.read_engine)


def _memo_rows(services) -> dict[bytes, int]:
    with services.canon.read_engine.begin() as conn:
        return {bytes(d): n for d, n in conn.execute(select(token_memo.c.digest, token_memo.c.tokens))}


def test_counts_hit_the_memo_and_misses_are_counted_once_and_stored(services) -> None:
    tokens = token_counter()
    memo = TokenMemo(tokens.name)
    asked: list[list[str]] = []

    def count(texts: list[str]) -> list[int]:
        asked.append(list(texts))
        return [tokens.count(t) for t in texts]

    texts = ["Ilse keeps the lighthouse.", "", "Ilse keeps the lighthouse.", "Oskar — ☃ 雪 and \u00e9.", "x" * 5000]
    expected = [tokens.count(t) for t in texts]
    with services.canon.write_engine.begin() as conn:
        assert memo.counts(conn, texts, count) == expected
    assert [sorted(a) for a in asked] == [sorted(set(texts))]  # distinct misses, one batch
    with services.canon.write_engine.begin() as conn:
        assert memo.counts(conn, texts + ["a new text"], count) == expected + [tokens.count("a new text")]
        assert memo.size(conn) == 5
    assert asked[1:] == [["a new text"]]
    # Another encoding's entries are its own.
    other = TokenMemo("another_encoding")
    with services.canon.write_engine.begin() as conn:
        assert other.counts(conn, texts[:1], lambda ts: [7 for _ in ts]) == [7]
        assert memo.counts(conn, texts[:1], count) == expected[:1]


def test_a_few_texts_are_counted_without_a_lookup_and_still_stored(services, monkeypatch) -> None:
    """A live catch-up of one command: counting its text costs less than a look-up's statement."""
    from canon_ledger.projections.token_memo import COUNT_DIRECTLY

    tokens = token_counter()
    memo = TokenMemo(tokens.name)
    lookups = []
    real = memo._lookup
    monkeypatch.setattr(memo, "_lookup", lambda conn, digests: lookups.append(len(digests)) or real(conn, digests))
    few = [f"summary {i}" for i in range(COUNT_DIRECTLY)]
    with services.canon.write_engine.begin() as conn:
        assert memo.counts(conn, few, lambda ts: [tokens.count(t) for t in ts]) == [tokens.count(t) for t in few]
    assert lookups == [] and {digest(t) for t in few} <= set(_memo_rows(services))
    more = few + ["one more"]
    with services.canon.write_engine.begin() as conn:
        memo.counts(conn, more, lambda ts: [tokens.count(t) for t in ts])
    assert lookups == [len(more)]


def test_a_memo_larger_than_one_lookup_chunk(services) -> None:
    tokens = token_counter()
    memo = TokenMemo(tokens.name)
    texts = [f"entry {i}: the keeper's log" for i in range(2500)]
    with services.canon.write_engine.begin() as conn:
        first = memo.counts(conn, texts, lambda ts: [tokens.count(t) for t in ts])
    with services.canon.write_engine.begin() as conn:
        again = memo.counts(conn, texts, lambda ts: pytest.fail("all of them are in the memo"))
    assert first == again == [tokens.count(t) for t in texts]


def test_a_warm_rebuild_counts_nothing_and_builds_the_same_tables_as_one_without_memo(projected_demo) -> None:
    before = _checksum(projected_demo.canon)
    counter = CountingCounter()
    warm = _models(projected_demo, counter, TokenMemo(counter.name))
    warm.rebuild()
    assert counter.texts == 0  # every text of the demo was counted by the first catch-up
    assert _checksum(warm) == before
    plain = _models(projected_demo, counter, None)  # as before the memo: every text counted
    plain.rebuild()
    assert counter.texts >= len(_memo_rows(projected_demo)) > 20  # every text of the log
    assert _checksum(plain) == before


def test_a_corrupt_memo_entry_is_caught_by_audit_and_repaired_by_recount(projected_demo) -> None:
    packet = projected_demo.packets.packet(Request(STORY, "writer", 5))
    assert projected_demo.auditor.audit(packet.packet_id).ok
    tables = projected_demo.canon.tables(projected_demo.canon.active())
    with projected_demo.canon.read_engine.begin() as conn:
        text, tokens = conn.execute(select(tables.canon.c.text, tables.canon.c.tokens)
                                    .where(tables.canon.c.key == "oskar").order_by(tables.canon.c.step.desc())).first()
    key = digest(text)
    assert _memo_rows(projected_demo)[key] == tokens
    with projected_demo.canon.write_engine.begin() as conn:  # a hand edit (or a bad sector) in the cache
        conn.execute(update(token_memo).where(token_memo.c.digest == key).values(tokens=tokens + 40))

    projected_demo.canon.rebuild()  # a warm rebuild trusts the memo: the wrong count reaches the read model
    report = projected_demo.auditor.audit(packet.packet_id)
    # The replay counts for itself, so it still reproduces the packet; the live model does not.
    assert not report.ok and report.replayed_hash == packet.hash
    assert report.live.startswith("mismatch") and "oskar" in report.live

    counter = CountingCounter()
    repaired = _models(projected_demo, counter, TokenMemo(counter.name)).rebuild(recount=True)
    assert counter.texts >= len(_memo_rows(projected_demo)) > 20 and not repaired.resumed
    assert _memo_rows(projected_demo)[key] == tokens
    report = projected_demo.auditor.audit(packet.packet_id)
    assert report.ok and report.live == "ok", report.as_dict()


def test_recount_prunes_the_memo_to_the_texts_of_the_log(projected_demo) -> None:
    memo = TokenMemo(token_counter().name)
    with projected_demo.canon.write_engine.begin() as conn:
        memo.counts(conn, ["a text no event renders"], lambda ts: [3])
    stale = digest("a text no event renders")
    assert stale in _memo_rows(projected_demo)
    projected_demo.canon.rebuild(recount=True)
    rows = _memo_rows(projected_demo)
    assert stale not in rows and rows
    projected_demo.canon.rebuild()
    assert _memo_rows(projected_demo) == rows


def test_recount_does_not_resume_an_unfinished_build(projected_demo) -> None:
    unfinished, _ = projected_demo.canon._begin_build()
    report = projected_demo.canon.rebuild(recount=True)
    assert not report.resumed and report.new != unfinished
    assert projected_demo.canon.building() is None


def test_cli_rebuild_recount(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(url)
    try:
        apply_demo(s)
        packet = s.packets.packet(Request(STORY, "writer", 5))
        with s.canon.write_engine.begin() as conn:
            conn.execute(update(token_memo).values(tokens=token_memo.c.tokens + 1))
    finally:
        s.close()
    run = canon("--db", url, "rebuild", "--projection", "canon", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert canon("--db", url, "audit", packet.packet_id).returncode != 0
    run = canon("--db", url, "rebuild", "--projection", "canon", "--recount", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["projection"] == "canon"
    audit = canon("--db", url, "audit", packet.packet_id)
    assert audit.returncode == 0, audit.stdout + audit.stderr
