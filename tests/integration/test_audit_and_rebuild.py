"""Audit by replay, time travel, blue/green rebuilds, schema and event evolution."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect, update

from canon_ledger.application.packets.replay import compile_packet
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_line
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.infrastructure.read_store import engines
from canon_ledger.infrastructure.stores import store_config
from canon_ledger.infrastructure.tokenizer import token_counter
from canon_ledger.projections.canon import CanonProjection
from canon_ledger.projections import canon_tables as canon_tables_module
from canon_ledger.projections.canon_tables import canon_tables
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.read_models import ProjectionSpec, ReadModels
from canon_ledger.projections.runner import tracked
from tests.cli_runner import CANON, canon
from tests.fixture_log import load_fixture
from tests.helpers import apply_demo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROLES_AND_CHAPTERS = [(r, c) for r in ("planner", "writer", "qa", "chat") for c in range(1, 6)] + [
    ("summarizer", c) for c in range(1, 5)]


def _issue_all(services) -> list:
    return [services.packets.packet(Request(STORY, role, chapter)) for role, chapter in ROLES_AND_CHAPTERS]


def _checksum(services) -> str:
    models = services.canon
    with models.read_engine.begin() as conn:
        return table_checksum(conn, models.tables(models.active(conn)))


def test_every_demo_packet_audits_ok_with_lineage(demo) -> None:
    packets = _issue_all(demo)
    for packet in packets:
        report = demo.auditor.audit(packet.packet_id)
        assert report.ok and report.replayed_hash == packet.hash and report.live == "ok", report.as_dict()
        for item, lineage in report.items:
            assert [s.position for s in lineage] == list(item.sources)
            assert all(s.command_id and s.type != "unknown" for s in lineage)
    writer5 = demo.auditor.audit(packets[ROLES_AND_CHAPTERS.index(("writer", 5))].packet_id)
    ilse = next(lineage for item, lineage in writer5.items if item.kind == "character" and item.key == "ilse")
    assert ilse[0].type == "CanonEntry.Revised" and ilse[0].command_type == "confirm_canon"


def test_audit_still_reproduces_after_canon_moves_on_and_time_travel_matches(demo) -> None:
    packet = demo.packets.packet(Request(STORY, "writer", 5))
    demo.ledger.apply([parse_line(json.dumps({
        "type": "record_chapter_summary", "command_id": "later", "story_id": STORY, "chapter": 4, "text": "rewritten"}))])
    now = demo.packets.packet(Request(STORY, "writer", 5))
    assert now.hash != packet.hash
    report = demo.auditor.audit(packet.packet_id)
    assert report.ok and report.live.startswith("skipped")
    travelled = demo.auditor.packet_at(Request(STORY, "writer", 5, budget=packet.budget), packet.position)
    assert travelled.to_json() == packet.to_json()
    # Any position between the packet's and the next canon change gives the same bytes.
    assert demo.auditor.packet_at(Request(STORY, "writer", 5, budget=packet.budget), now.position - 1).to_json() == packet.to_json()


def test_a_hand_edited_read_model_row_is_caught(demo) -> None:
    packet = demo.packets.packet(Request(STORY, "writer", 5))
    tables = demo.canon.tables(demo.canon.active())
    with demo.canon.write_engine.begin() as conn:
        conn.execute(update(tables.canon).where(tables.canon.c.key == "oskar").values(text="Oskar is a dragon."))
    report = demo.auditor.audit(packet.packet_id)
    assert not report.ok and report.replayed_hash == packet.hash
    assert report.live.startswith("mismatch") and "oskar" in report.live


def test_unknown_packet_is_a_structured_error(demo) -> None:
    from canon_ledger.domain.errors import NotFound

    with pytest.raises(NotFound) as e:
        demo.auditor.audit("pkt_nope")
    assert e.value.code == "unknown_packet"


def _indexes_complete(services) -> bool:
    """The active build has every index its tables declare (a rebuild builds some last)."""
    models = services.canon
    with models.read_engine.begin() as conn:
        tables = models.tables(models.active(conn))
        inspector = inspect(conn)
        have = {ix["name"] for t in tables.all() for ix in inspector.get_indexes(t.name)}
    return {ix.name for t in tables.all() for ix in t.indexes} <= have


def test_rebuild_switches_builds_and_changes_nothing_a_reader_can_see(demo) -> None:
    packets = _issue_all(demo)
    before = _checksum(demo)
    old = demo.canon.active()
    report = demo.canon.rebuild()
    assert report.old == old and report.new != old and demo.canon.active() == report.new
    assert _checksum(demo) == before
    assert _indexes_complete(demo)
    with demo.canon.read_engine.begin() as conn:
        names = set(inspect(conn).get_table_names())
    assert not any(n.endswith(f"_{old.tag}") for n in names), "old build's tables were not dropped"
    for packet in packets:
        assert demo.auditor.audit(packet.packet_id).ok
    again = _issue_all(demo)
    assert [p.to_json() for p in again] == [p.to_json() for p in packets]


def test_the_old_build_serves_while_the_new_one_fills(demo) -> None:
    demo.packets.packet(Request(STORY, "writer", 5))
    served: list[str] = []

    def progress(reached: int, goal: int) -> None:
        # Mid-rebuild: packets come from the active build, unchanged.
        served.append(demo.packets.packet(Request(STORY, "writer", 5), record=False).hash)

    models = ReadModels(demo.canon.spec, demo.ledger.event_log, demo.canon.write_engine, demo.canon.read_engine, page_size=10)
    models.rebuild(progress)
    assert len(served) > 3 and len(set(served)) == 1


def test_rebuild_gives_identical_tables_and_packets_on_sqlite_and_postgres(tmp_path, pg_url) -> None:
    results = []
    for url in (f"sqlite:///{tmp_path / 'a.db'}", pg_url):
        s = bootstrap(url)
        try:
            apply_demo(s)
            hashes = [p.hash for p in _issue_all(s)]
            retriever, s.packets.retriever = s.packets.retriever, None
            l0 = [p.hash for p in _issue_all(s)]
            s.packets.retriever = retriever
            for models in s.read_models.values():
                models.rebuild()
            results.append((_checksum(s), l0, hashes, [p.hash for p in _issue_all(s)]))
        finally:
            s.close()
    (sq_sum, sq_l0, sq_before, sq_after), (pg_sum, pg_l0, pg_before, pg_after) = results
    assert sq_sum == pg_sum
    assert sq_l0 == pg_l0  # L0 does not depend on the store, byte for byte
    # L1 ranks with each store's own keyword index (FTS5 bm25 / PostgreSQL BM25), so the
    # stores may differ there; each store's packets survive a rebuild of every read model.
    assert sq_before == sq_after and pg_before == pg_after


def test_a_store_whose_active_build_is_older_refuses_to_serve_until_rebuilt(store_url) -> None:
    """One canon schema version is read. A store whose active build an earlier version made
    (marked so in the registry, as the previous release left it) refuses packets with
    ``read_model_outdated`` and changes nothing; ``rebuild`` makes a current build, and every
    packet issued before audits OK and compiles to the same bytes again."""
    from canon_ledger.domain.errors import CanonError

    tokens = token_counter()
    config = store_config(store_url)
    read, write = engines(config)
    s = bootstrap(store_url)
    try:
        apply_demo(s)
        issued = _issue_all(s)
        old = ReadModels(ProjectionSpec("canon", 1, canon_tables, lambda t: CanonProjection(t, tokens)),
                         s.ledger.event_log, write, read)
        assert old.rebuild().new.version == 1
        position = s.ledger.event_log.position()
        with pytest.raises(CanonError) as refused:
            s.packets.packet(Request(STORY, "writer", 5))
        assert refused.value.code == "read_model_outdated" and "run `canon rebuild`" in refused.value.message
        assert s.ledger.event_log.position() == position  # nothing recorded
        report = s.canon.rebuild()
        assert (report.old.version, report.new.version) == (1, canon_tables_module.VERSION)
        for packet in issued:
            assert s.auditor.audit(packet.packet_id).ok
        again = _issue_all(s)
        assert [p.hash for p in again] == [p.hash for p in issued]
    finally:
        s.close()
        read.dispose()
        write.dispose()


def test_v1_events_written_by_the_real_store_still_read_upcast_and_project(store_url) -> None:
    s = bootstrap(store_url)
    try:
        load_fixture(s.ledger, "v1-events.jsonl")
        receipts = [e for e in s.ledger.event_log.history() if e.type == "CommandReceipt.Recorded"]
        assert receipts and all(e.data["events"] == [] for e in receipts)  # upcast v1 -> v2
        expected = json.loads((FIXTURES / "v1-ch5-writer.json").read_text())
        assert s.ledger.packet_records.get(expected["packet_id"]).compiler == 1  # upcast PacketIssued v1 -> v2
        s.packets.packet(Request(STORY, "writer", 5, budget=expected["budget"]), record=False)  # catch up
        with s.packets.reader.snapshot() as snap:  # the compiler that issued it gives the same bytes
            packet = compile_packet(snap, Request(STORY, "writer", 5, budget=expected["budget"]), s.packets.tokens,
                                    compiler=1)
        assert packet.hash == expected["hash"] and packet.to_json() == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
        report = s.auditor.audit(expected["packet_id"])  # its PacketIssued is in the fixture
        assert report.ok
        # Lineage for v1 receipts falls back to the receipt that closed the same save.
        assert all(src.command_id for _, lineage in report.items for src in lineage)
        # New commands write v2 receipts beside the old ones.
        s.ledger.apply([parse_line(json.dumps({"type": "record_chapter_summary", "command_id": "v2-cmd",
                                               "story_id": STORY, "chapter": 5, "text": "new"}))])
        newest = [e for e in s.ledger.event_log.history() if e.type == "CommandReceipt.Recorded"][-1]
        assert newest.data["command_id"] == "v2-cmd" and len(newest.data["events"]) == 1
    finally:
        s.close()


@pytest.mark.slow
def test_rebuild_killed_mid_way_resumes_to_the_same_result(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    clean_url = f"sqlite:///{tmp_path / 'clean.db'}"
    for u in (url, clean_url):
        s = bootstrap(u)
        apply_demo(s)
        issued = _issue_all(s)
        s.close()
    # a process of its own: it is killed mid-way (the resume below runs in this process)
    proc = subprocess.Popen([*CANON, "--db", url, "rebuild", "--projection", "canon", "--page-size", "5", "--pause",
                             "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    s = bootstrap(url)
    try:
        deadline = time.time() + 60
        building = None
        while time.time() < deadline:
            building = s.canon.building()
            if building is not None and s.canon.runner(building).position() > 10:
                break
            time.sleep(0.05)
        assert building is not None, "the rebuild never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stopped_at = s.canon.runner(building).position()
        assert 0 < stopped_at < s.ledger.event_log.position(), stopped_at
        assert s.canon.active() != building  # the old build still serves
        result = canon("--db", url, "rebuild", "--projection", "canon", "--format", "json")
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["resumed"] is True and report["new"] == building.tag
    finally:
        s.close()
    crashed, clean = bootstrap(url), bootstrap(clean_url)
    try:
        clean.canon.rebuild()
        assert _checksum(crashed) == _checksum(clean)
        for packet in issued:
            assert crashed.auditor.audit(packet.packet_id).ok
        with crashed.canon.read_engine.begin() as conn:
            assert tracked(conn, f"canon:{building.tag}") == crashed.ledger.event_log.position()
        assert _indexes_complete(crashed)
    finally:
        crashed.close()
        clean.close()


def test_read_model_commits_do_not_wait_for_the_disk_and_event_commits_do(services) -> None:
    """Read models and caches are derived from the log: their commits skip the fsync, which was
    most of a read-your-writes catch-up. The event store keeps full durability."""
    engine = services.canon.write_engine
    ds = services.ledger.recorder.datastore
    with engine.connect() as conn, ds.transaction(commit=False) as events:
        if conn.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            events.execute("PRAGMA synchronous")
            assert events.fetchone()[0] == 2  # FULL
        else:
            assert conn.exec_driver_sql("SHOW synchronous_commit").scalar() == "off"
            events.execute("SHOW synchronous_commit")
            assert events.fetchone()["synchronous_commit"] == "on"
