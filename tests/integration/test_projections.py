"""Projection specs: the same events twice change nothing; the compiler cannot see drafts."""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy import event

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.projections.canon_tables import canon_tables
from canon_ledger.projections.canon import CanonProjection
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.runner import page_ops
from canon_ledger.projections.sql_ops import execute
from tests.helpers import apply_demo, demo_commands

ROOT = Path(__file__).resolve().parents[2]


def test_delivering_the_same_events_twice_leaves_the_tables_unchanged(services) -> None:
    apply_demo(services)
    services.canon.catch_up_serving()
    projection = services.canon.runner(services.canon.active()).projection
    tables = projection.tables
    events = services.ledger.event_log.read(1, 100_000, None, projection.topics)
    with services.canon.write_engine.begin() as conn:
        caught_up = table_checksum(conn, tables)
    with services.canon.write_engine.begin() as conn:
        execute(conn, page_ops(conn, projection, events))
    with services.canon.write_engine.begin() as conn:
        once_more = table_checksum(conn, tables)
    with services.canon.write_engine.begin() as conn:
        for position_event in events:  # and each event delivered twice in a row
            execute(conn, page_ops(conn, projection, [position_event]))
            execute(conn, page_ops(conn, projection, [position_event]))
    with services.canon.write_engine.begin() as conn:
        doubled = table_checksum(conn, tables)
    assert caught_up == once_more == doubled


def test_the_checksum_sees_a_changed_row(services) -> None:
    apply_demo(services)
    services.canon.catch_up_serving()
    tables = services.canon.tables(services.canon.active())
    with services.canon.write_engine.begin() as conn:
        before = table_checksum(conn, tables)
        conn.execute(tables.canon.update().where(tables.canon.c.key == "ilse").values(text="tampered"))
        assert table_checksum(conn, tables) != before


def test_catch_up_is_exactly_once_and_resumes(services) -> None:
    commands = demo_commands()
    services.ledger.apply(commands[:20])
    first = services.canon.catch_up_serving()
    assert first == services.ledger.event_log.position()
    assert services.canon.catch_up_serving() == first  # nothing new: nothing done
    services.ledger.apply(commands[20:])
    services.canon.catch_up_serving()
    with services.canon.write_engine.begin() as conn:
        incremental = table_checksum(conn, services.canon.tables(services.canon.active()))
    # A fresh set of tables built in one go from the whole log matches the incremental build.
    fresh = canon_tables("scratch")
    fresh.metadata.create_all(services.canon.write_engine)
    projection = CanonProjection(fresh, services.packets.tokens)
    with services.canon.write_engine.begin() as conn:
        execute(conn, page_ops(conn, projection, services.ledger.event_log.read(1, 100_000, None, projection.topics)))
        assert table_checksum(conn, fresh) == incremental


def test_a_page_read_before_another_catcher_moved_the_row_is_not_applied_again(services, store_url) -> None:
    """A catch-up reads its first page before its write transaction. If another catcher (here
    another process) moves the tracking row in between, the page must not be applied on top:
    here it would put back a summary that a later event replaced. The row is claimed only
    where the page was read from; on PostgreSQL the claim goes out with the page's writes
    (one pipeline) and a failed claim rolls them back."""
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.projections.runner import Unclaimed

    def summary(n: int) -> int:
        [result] = services.ledger.apply([parse_command({
            "type": "record_chapter_summary", "command_id": f"stale-{n}", "story_id": STORY, "chapter": 4,
            "text": f"SUMMARY-{n}"})])
        return result.position

    apply_demo(services)
    services.canon.catch_up_serving()
    runner = services.canon.runner(services.canon.active())
    start = runner.position()
    first = summary(1)
    stale_page = services.ledger.event_log.read(start + 1, runner.page_size, first, runner.projection.topics)
    assert len(stale_page) == 1  # the summary (the command receipt is not the projection's)
    latest = summary(2)
    other = bootstrap(store_url)
    try:
        assert other.canon.catch_up_serving() == latest
    finally:
        other.close()
    try:
        with services.canon.write_engine.begin() as conn:
            assert runner.step(conn, first, (start, stale_page)) == latest
    except Unclaimed:
        assert services.canon.write_engine.dialect.name == "postgresql"
    chapters = runner.projection.tables.chapters
    with services.canon.write_engine.begin() as conn:
        text = conn.execute(chapters.select().where(chapters.c.story_id == STORY, chapters.c.chapter == 4)).one()
    assert text.summary_text.endswith("SUMMARY-2") and runner.position() == latest


PACKET_PATH = ["canon_ledger/application/packets", "canon_ledger/projections/canon_view.py", "canon_ledger/projections/canon_tables.py"]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_packet_path_cannot_reach_drafts_or_proposals_by_import() -> None:
    files = [p for entry in PACKET_PATH for p in ((ROOT / entry).rglob("*.py") if (ROOT / entry).is_dir() else [ROOT / entry])]
    assert files
    for path in files:
        imported = _imports(path)
        assert "canon_ledger.projections.authoring" not in imported, path
        assert not any(m in imported for m in ("canon_ledger.domain.draft", "eventsourcing.application")), path
        text = path.read_text()
        assert "authoring_" not in text and "stored_events" not in text, path


def test_compiling_a_packet_reads_only_canon_tables(services, monkeypatch) -> None:
    import psycopg

    apply_demo(services)
    services.canon.catch_up_serving()
    services.authoring.catch_up_serving()
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        seen.append(statement)

    real = psycopg.Cursor.execute  # PostgreSQL: the reader runs the driver's SQL itself

    def driver_execute(cursor, query, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(query if isinstance(query, str) else query.as_string(cursor))
        return real(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", driver_execute)
    engine = services.packets.reader.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        with services.packets.reader.snapshot() as snap:
            from canon_ledger.application.packets.compiler import compile_packet

            for role, chapter in [("writer", 5), ("planner", 5), ("qa", 3), ("summarizer", 4), ("chat", 5)]:
                compile_packet(snap, Request(STORY, role, chapter, budget=100_000), services.packets.tokens)
    finally:
        event.remove(engine, "before_cursor_execute", record)
        monkeypatch.undo()
    assert seen
    canon_names = {t.name for t in services.canon.tables(services.canon.active()).all()}
    for statement in (s for s in seen if s.strip().upper() != "BEGIN"):
        lowered = statement.lower()
        assert "authoring_" not in lowered and "stored_events" not in lowered and "canonledger_events" not in lowered
        # Canon tables, or the registry / tracking row saying which build to read.
        assert any(name in statement for name in (*canon_names, "rm_projections", "rm_tracking")), statement
    # The authoring model does hold the draft text: the boundary, not absence, keeps it out.
    from sqlalchemy import select

    drafts = services.authoring.tables(services.authoring.active()).drafts
    services.authoring.catch_up_serving()
    with services.authoring.read_engine.begin() as conn:
        texts = [r.text for r in conn.execute(select(drafts.c.text))]
    assert any("DRAFT-REJECTED-MARKER" in t for t in texts)


def test_bulk_ops_keep_the_meaning_of_ops_applied_one_by_one(services) -> None:
    """sql_ops merges ops per row and runs each shape as one statement: the result must be what
    applying the ops in order gives (an update of a missing row does nothing; ``keep`` columns
    are written on insert only; a later op of a row wins)."""
    from sqlalchemy import JSON, Boolean, Column, Integer, MetaData, String, Table, select

    from canon_ledger.projections.sql_ops import Delete, Update, Upsert, _plan

    md = MetaData()

    def table(name: str) -> Table:
        return Table(name, md, Column("a", String(20), primary_key=True), Column("b", Integer, primary_key=True),
                     Column("x", String(20)), Column("n", Integer), Column("flag", Boolean), Column("doc", JSON))

    merged, ordered = table("rm_ops_merged"), table("rm_ops_ordered")
    md.create_all(services.canon.write_engine)
    ops = [
        Upsert(merged, {"a": "m", "b": 1, "x": "first", "n": 1, "doc": {"k": [1, 2]}}),
        Update(merged, {"a": "m", "b": 1}, {"n": 2, "flag": False}),
        Upsert(merged, {"a": "m", "b": 1, "x": "second"}),
        Upsert(merged, {"a": "k", "b": 1, "x": "kept", "n": 7}, ("n",)),
        Upsert(merged, {"a": "j", "b": 1, "x": "json null", "doc": None}),
        Update(ordered, {"a": "u", "b": 1}, {"x": "lost"}),  # no row yet: nothing
        Upsert(ordered, {"a": "u", "b": 1, "x": "ins", "n": 1, "flag": True}),
        Upsert(ordered, {"a": "d", "b": 1, "x": "gone"}),
        Delete(ordered, {"a": "d"}),
    ]
    plan = _plan(ops)
    assert all(distinct for shape, _, distinct in plan if shape[1] == merged.name)
    assert not any(distinct for shape, _, distinct in plan if shape[1] == ordered.name)
    with services.canon.write_engine.begin() as conn:
        execute(conn, ops)
        execute(conn, [Upsert(merged, {"a": "k", "b": 1, "x": "again", "n": 99}, ("n",))])  # n is kept
    with services.canon.write_engine.begin() as conn:
        rows = {r.a: (r.x, r.n, r.flag, r.doc) for r in conn.execute(select(merged))}
        rest = {r.a: (r.x, r.n, r.flag) for r in conn.execute(select(ordered))}
    assert rows == {"m": ("second", 2, False, {"k": [1, 2]}), "k": ("again", 7, None, None), "j": ("json null", None, None, None)}
    assert rest == {"u": ("ins", 1, True)}


def test_a_build_dropped_between_the_registry_read_and_the_catch_up_is_looked_up_again(services, monkeypatch) -> None:
    from canon_ledger.projections.runner import BuildGone, ProjectionRunner

    apply_demo(services)
    real = ProjectionRunner.catch_up
    raised = []

    def once_gone(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if not raised:
            raised.append(self.tracking_name)
            raise BuildGone(self.tracking_name)
        return real(self, *a, **k)

    monkeypatch.setattr(ProjectionRunner, "catch_up", once_gone)
    assert services.canon.catch_up_serving() == services.ledger.event_log.position() and raised
