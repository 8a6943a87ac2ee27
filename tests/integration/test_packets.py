"""Packets on both stores: seed acceptance, confirmed canon only, progressions, budgets.

A test that only reads the demo story (recording at most packets, which change no packet) takes
``shared_demo``, one store per kind for the module; one that writes canon, counts events or
spies on the read model catching up takes ``demo``, a fresh store."""

from __future__ import annotations

import json

import pytest

from canon_ledger.application.packets.compiler import PacketError
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import CanonError, NotFound
from canon_ledger.infrastructure.demo import STORY

# On one xdist worker (--dist loadgroup): the shared demo is made once per store.
pytestmark = pytest.mark.xdist_group("test_packets")

MARKERS = ("DRAFT-REJECTED-MARKER", "REJECTED-PROPOSAL-MARKER", "UNCONFIRMED-PROPOSAL-MARKER", "DRAFT-PENDING-MARKER")
ROLES = ("planner", "writer", "qa", "summarizer", "chat")


def _apply(services, *commands):
    results = services.ledger.apply([parse_command({"story_id": STORY, **c}) for c in commands])
    assert all(r.status == "applied" for r in results), [r.as_dict() for r in results]
    return results


def _summary(services, command_id, marker):
    """Record a chapter-4 summary holding ``marker``; its result (with its position)."""
    [result] = _apply(services, {"type": "record_chapter_summary", "command_id": command_id, "chapter": 4,
                                 "text": f"{marker} summary"})
    return result


def _spy(monkeypatch, owner, name, calls):  # noqa: ANN001
    """Append ``name`` to ``calls`` whenever ``owner.name`` is called (it still runs)."""
    real = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, **k: calls.append(name) or real(*a, **k))


def _included(packet):
    return [i for i in packet.items if i.status != "dropped"]


def test_chapter_5_writer_packet_cites_canon_confirmed_in_chapter_1(shared_demo):
    demo = shared_demo
    confirmed_in_ch1 = {
        (e.data["kind"], e.data["key"]): e.position
        for e in demo.ledger.event_log.history(story_id=STORY)
        if e.type == "CanonEntry.Established" and e.data["version"]["proposal_id"] in
        ("p-rule-lamps", "p-rule-curfew", "p-osk", "p-quay", "p-ledger", "p-theft")
    }
    assert len(confirmed_in_ch1) == 6
    packet = demo.packets.packet(Request(STORY, "writer", 5))
    cited = {(i.kind, i.key): set(i.sources) for i in _included(packet)}
    for (kind, key), position in confirmed_in_ch1.items():
        assert position in cited.get((kind, key), set()), f"{kind} {key} (event {position}) not cited"
    # Ilse is seen as of chapter 5: the chapter-4 revision, with her chapter-1 self as history.
    ilse = next(i for i in _included(packet) if i.kind == "character" and i.key == "ilse")
    assert "Licensed lamplighter" in ilse.text
    assert any(i.kind == "history" and "Apprentice" in i.text for i in _included(packet))
    assert {"P0", "P1", "P2", "P3"} <= {i.tier for i in _included(packet)}


def test_no_draft_or_unconfirmed_text_in_any_packet(shared_demo):
    demo = shared_demo
    for role in ROLES:
        for chapter in range(1, 6):
            try:
                packet = demo.packets.packet(Request(STORY, role, chapter, budget=100_000))
            except NotFound:
                assert role == "summarizer" and chapter == 5  # chapter 5 has no accepted text
                continue
            body = packet.to_json()
            assert not any(m in body for m in MARKERS), (role, chapter)


def test_a_revision_applies_from_its_valid_from_chapter(demo):
    _apply(demo,
           {"type": "plan_chapter", "command_id": "r1", "chapter": 8, "volume": 1, "goals": ["g"]},
           {"type": "add_scene_card", "command_id": "r2", "chapter": 8, "scene_id": "8a", "summary": "s",
            "characters": ["oskar"], "locations": [], "threads": [], "callbacks": [], "items": []},
           {"type": "propose_canon", "command_id": "r3", "proposal_id": "p-osk-dead", "kind": "character",
            "key": "oskar", "name": "Oskar Venn", "aliases": [], "text": "Drowned at the flood gate.",
            "fields": {"status": "dead"}, "valid_from": 7},
           {"type": "confirm_canon", "command_id": "r4", "proposal_id": "p-osk-dead"})
    at5 = demo.packets.packet(Request(STORY, "writer", 5))
    at8 = demo.packets.packet(Request(STORY, "writer", 8))
    oskar5 = next(i for i in _included(at5) if i.key == "oskar" and i.kind == "character")
    oskar8 = next(i for i in _included(at8) if i.key == "oskar" and i.kind == "character")
    assert "half-blind" in oskar5.text and "Drowned" not in oskar5.text
    assert "Drowned" in oskar8.text


def test_same_position_same_bytes_and_one_packet_issued_event(demo):
    first = demo.packets.packet(Request(STORY, "writer", 5))
    position = demo.ledger.event_log.position()
    again = demo.packets.packet(Request(STORY, "writer", 5))
    assert again.to_json() == first.to_json() and again.packet_id == first.packet_id
    assert demo.ledger.event_log.position() == position  # the same packet is recorded once
    record = demo.ledger.packet_records.get(first.packet_id)
    assert record is not None and record.hash == first.hash and record.position == first.position
    # A draft is not canon: submitting one changes no packet byte.
    _apply(demo, {"type": "submit_draft", "command_id": "dd", "chapter": 5, "draft_id": "d5-b", "text": "new draft"})
    assert demo.packets.packet(Request(STORY, "writer", 5)).to_json() == first.to_json()


def test_read_your_writes_without_waiting(demo):
    [result] = _apply(demo, {"type": "record_chapter_summary", "command_id": "s5", "chapter": 5, "text": "FRESH-SUMMARY"})
    before = demo.ledger.event_log.position() - 2  # the summary event and its receipt
    packet = demo.packets.packet(Request(STORY, "chat", 5), after=result.position)
    summary = next(i for i in _included(packet) if "FRESH-SUMMARY" in i.text)
    assert before < summary.sources[0] <= packet.position <= result.position


def test_hidden_chain_nodes_never_leak_before_their_chapter(demo):
    _apply(demo,
           {"type": "propose_canon", "command_id": "c1", "proposal_id": "p-chain", "kind": "development_chain",
            "key": "who-took-it", "name": "Who took lamp 33", "aliases": [], "text": "Foreshadow to payoff.",
            "fields": {"nodes": [{"id": "silt", "kind": "foreshadow", "text": "Silt on the boots."},
                                 {"id": "hobb", "kind": "payoff", "text": "SECRET-HOBB-REVEAL", "hidden_until": 9}]},
            "valid_from": 1},
           {"type": "confirm_canon", "command_id": "c2", "proposal_id": "p-chain"},
           {"type": "plan_chapter", "command_id": "c3", "chapter": 9, "volume": 1, "goals": ["reveal"]})
    early = demo.packets.packet(Request(STORY, "writer", 5, budget=100_000))
    assert "SECRET-HOBB-REVEAL" not in early.to_json()
    hidden = next(i for i in early.items if i.key == "who-took-it/hobb")
    assert hidden.status == "dropped" and "hidden until chapter 9" in hidden.reason
    assert any(i.key == "who-took-it/silt" and i.status == "included" for i in early.items)
    late = demo.packets.packet(Request(STORY, "writer", 9, budget=100_000))
    assert any(i.key == "who-took-it/hobb" and i.status == "included" for i in late.items)


def test_an_earlier_state_hidden_until_later_never_leaks_as_history(demo):
    """Compiler 4 drops a superseded character state that is hidden at the chapter without its
    text; compiler 3 listed it whole, and still replays so (its packets audit as issued)."""
    from canon_ledger.application.packets.replay import compile_packet

    _apply(demo,
           {"type": "propose_canon", "command_id": "h1", "proposal_id": "p-wren-1", "kind": "character", "key": "wren",
            "name": "Wren", "aliases": [], "text": "SECRET-WREN-PAST: the Guild's informer.",
            "fields": {"hidden_until": 9}, "valid_from": 1},
           {"type": "confirm_canon", "command_id": "h2", "proposal_id": "p-wren-1"},
           {"type": "propose_canon", "command_id": "h3", "proposal_id": "p-wren-3", "kind": "character", "key": "wren",
            "name": "Wren", "aliases": [], "text": "Wren, a courier on the Quay.", "fields": {}, "valid_from": 3},
           {"type": "confirm_canon", "command_id": "h4", "proposal_id": "p-wren-3"},
           {"type": "add_scene_card", "command_id": "h5", "chapter": 5, "scene_id": "5w", "summary": "Wren runs.",
            "characters": ["wren"], "locations": [], "threads": [], "callbacks": [], "items": []})
    packet = demo.packets.packet(Request(STORY, "writer", 5, budget=100_000))
    assert "SECRET-WREN-PAST" not in packet.to_json()
    history = next(i for i in packet.items if i.kind == "history" and i.key == "wren@1")
    assert history.status == "dropped" and "hidden until chapter 9" in history.reason
    assert any(i.key == "wren" and i.status == "included" for i in packet.items)
    with demo.packets.reader.snapshot() as snap:
        old = compile_packet(snap, Request(STORY, "writer", 5, budget=100_000), demo.packets.tokens, None, compiler=3)
    assert "SECRET-WREN-PAST" in old.to_json()  # what compiler 3 issued, replayed as it was


def test_budget_edge_cases(shared_demo):
    demo = shared_demo
    with pytest.raises(PacketError) as zero:
        demo.packets.packet(Request(STORY, "writer", 5, budget=0))
    assert zero.value.code == "p0_exceeds_budget" and "budget is 0" in zero.value.message
    full = demo.packets.packet(Request(STORY, "writer", 5, budget=100_000))
    p0 = sum(i.tokens for i in full.items if i.tier == "P0")
    with pytest.raises(PacketError) as small:
        demo.packets.packet(Request(STORY, "writer", 5, budget=p0 - 1))
    assert f"need {p0} tokens" in small.value.message
    exact = demo.packets.packet(Request(STORY, "writer", 5, budget=p0))
    assert exact.used_tokens == p0 and all(i.status == "dropped" for i in exact.items if i.tier != "P0")
    # An item larger than the room left is trimmed, never overflowing the budget.
    ilse = next(i for i in full.items if i.key == "ilse" and i.kind == "character")
    tight = demo.packets.packet(Request(STORY, "writer", 5, budget=p0 + ilse.tokens - 10))
    trimmed = next(i for i in tight.items if i.key == "ilse" and i.kind == "character")
    assert trimmed.status == "trimmed" and trimmed.tokens <= ilse.tokens - 10 and trimmed.text.endswith("…")
    assert tight.used_tokens <= tight.budget
    for packet in (full, exact, tight):
        assert packet.used_tokens == sum(i.tokens for i in packet.items if i.status != "dropped") <= packet.budget
        assert all(i.reason and i.status in ("included", "trimmed", "dropped") for i in packet.items)


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (Request("ghost", "writer", 5), "unknown_story"),
        (Request(STORY, "editor", 5), "unknown_role"),
        (Request(STORY, "writer", 42), "unknown_chapter"),
        (Request(STORY, "writer", 5, scene="zz"), "unknown_scene"),
        (Request(STORY, "writer", 0), "chapter_must_be_positive"),
        (Request(STORY, "writer", 5, budget=-1), "budget_must_not_be_negative"),
        (Request(STORY, "summarizer", 5), "chapter_has_no_accepted_text"),
    ],
)
def test_bad_packet_requests_are_structured_errors_and_record_nothing(shared_demo, request_, code):
    demo = shared_demo
    demo.packets.packet(Request(STORY, "writer", 1))  # catch up first: the position must not move below
    position = demo.ledger.event_log.position()
    with pytest.raises(CanonError) as e:
        demo.packets.packet(request_)
    assert e.value.code == code and e.value.message
    assert demo.ledger.event_log.position() == position


def test_packet_json_has_the_contract_fields(shared_demo):
    demo = shared_demo
    packet = json.loads(demo.packets.packet(Request(STORY, "qa", 3)).to_json())
    assert {"packet_id", "story_id", "role", "chapter", "position", "budget", "used_tokens", "hash", "items",
            "stages"} <= set(packet)
    for item in packet["items"]:
        assert {"tier", "kind", "key", "text", "tokens", "status", "reason", "sources"} <= set(item)
    assert [s["step"] for s in packet["stages"]] == ["scene-keys", "l0-recall", "step-back", "embed", "keyword", "vector",
                                                     "fuse", "rerank", "overview", "select", "wiki", "merge", "truncate"]
    assert all(s["status"] in ("active", "done", "skipped", "error") and s["detail"] for s in packet["stages"])


def test_others_events_do_not_make_packets_write(demo):
    """PacketIssued is no canon event: the next request finds nothing to project and writes
    no tracking row, yet still reads its writes once a canon event arrives."""
    first = demo.packets.packet(Request(STORY, "writer", 5))  # records PacketIssued
    tracked = demo.canon.position()
    assert tracked < demo.ledger.event_log.position()
    again = demo.packets.packet(Request(STORY, "writer", 5, budget=first.budget - 1))  # another PacketIssued
    assert demo.canon.position() == tracked and again.position == first.position
    result = _summary(demo, "quiet-1", "QUIET-MARKER")
    latest = demo.packets.packet(Request(STORY, "writer", 5), after=result.position)
    assert demo.canon.position() >= result.position and "QUIET-MARKER" in latest.to_json()


def test_a_request_after_a_recorded_packet_reads_one_snapshot_and_no_log(demo, monkeypatch):
    """The PacketIssued this process just appended is no canon event, and the process knows
    it: the next request neither reads the log nor catches up, it only reads its snapshot."""
    first = demo.packets.packet(Request(STORY, "writer", 5))
    calls = []
    _spy(monkeypatch, demo.ledger.event_log, "read", calls)
    _spy(monkeypatch, demo.canon, "catch_up_serving", calls)
    _spy(monkeypatch, demo.packets.reader, "snapshot", calls)
    again = demo.packets.packet(Request(STORY, "writer", 5, budget=first.budget - 1))  # records another
    latest = demo.packets.packet(Request(STORY, "writer", 5))
    assert calls == ["snapshot", "snapshot"]
    assert again.position == first.position and latest.packet_id == first.packet_id


def test_canon_written_by_another_process_reaches_the_next_packet(demo, store_url):
    """What this process knows about the log never hides another process's write."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    demo.packets.packet(Request(STORY, "writer", 5))  # this process now knows the tail is quiet
    other = bootstrap(store_url)
    try:
        [result] = other.ledger.apply([parse_command({"story_id": STORY, "type": "record_chapter_summary",
                                                      "command_id": "other-process-1", "chapter": 4,
                                                      "text": "OTHER-PROCESS-MARKER summary"})])
        assert result.status == "applied"
        other.packets.packet(Request(STORY, "writer", 5))  # and records a packet of its own after it
    finally:
        other.close()
    latest = demo.packets.packet(Request(STORY, "writer", 5))
    assert "OTHER-PROCESS-MARKER" in latest.to_json()


def test_p3_and_p4_are_read_only_while_the_budget_has_room(demo, monkeypatch):
    """Compiler 3: seed 000's P3 "as needed" and P4 "if budget remains". P0-P2 are always read;
    each later read (world rules, earlier character states, development chains, then L1) only
    while MIN_TRIM_TOKENS or more are left. The stages name what was not read, and the audit
    agrees. Where everything is read, compiler 3 gives compiler 2's bytes."""
    from canon_ledger.application.packets.compiler import MIN_TRIM_TOKENS
    from canon_ledger.application.packets.replay import compile_packet
    from canon_ledger.projections.canon_view import SqlCanonSnapshot

    full = demo.packets.packet(Request(STORY, "writer", 5, budget=100_000))
    assert any(i.tier == "P4" for i in full.items) and any(i.kind == "history" for i in full.items)
    p0 = sum(i.tokens for i in full.items if i.tier == "P0")
    reads = []
    for name in ("superseded_steps", "chain_nodes"):
        real = getattr(SqlCanonSnapshot, name)
        monkeypatch.setattr(SqlCanonSnapshot, name, lambda self, *a, _n=name, _r=real, **k: reads.append(_n) or _r(self, *a, **k))
    recall = demo.packets.retriever.recall
    monkeypatch.setattr(demo.packets.retriever, "recall", lambda *a: reads.append("l1") or recall(*a))

    for budget in (p0, p0 + MIN_TRIM_TOKENS - 1):
        spent = demo.packets.packet(Request(STORY, "writer", 5, budget=budget))
        assert reads == [] and not [i for i in spent.items if i.tier in ("P3", "P4")]
        assert [i for i in spent.items if i.tier == "P1"], "P0-P2 are always read"
        left = budget - spent.used_tokens
        assert left < MIN_TRIM_TOKENS
        stages = {s.step: s for s in spent.stages}
        assert stages["l0-recall"].detail.endswith(
            f"not read (the budget left {left} tokens, under the {MIN_TRIM_TOKENS} an item needs): "
            "world rules, earlier character states, development chains")
        assert stages["l1-retrieval"].status == "skipped" and f"left {left} tokens" in stages["l1-retrieval"].detail
        assert demo.auditor.audit(spent.packet_id).ok

    p3_end = sum(i.tokens for i in full.items if i.tier != "P4" and i.status != "dropped")
    roomy = demo.packets.packet(Request(STORY, "writer", 5, budget=p3_end + MIN_TRIM_TOKENS))
    assert reads == ["superseded_steps", "chain_nodes", "l1"] and any(i.tier == "P4" for i in roomy.items)
    with demo.packets.reader.snapshot() as snap:
        for budget in (p3_end + MIN_TRIM_TOKENS, 100_000):
            request = Request(STORY, "writer", 5, budget=budget)
            two, three = (compile_packet(snap, request, demo.packets.tokens, demo.packets.retriever, compiler=c)
                          for c in (2, 3))
            assert two.to_json() == three.to_json()
        for role, chapter in (("chat", 5), ("summarizer", 4), ("planner", 5), ("qa", 3)):
            request = Request(STORY, role, chapter, budget=100_000)
            two, three = (compile_packet(snap, request, demo.packets.tokens, demo.packets.retriever, compiler=c)
                          for c in (2, 3))
            assert two.to_json() == three.to_json(), role


def test_a_process_that_finds_the_model_caught_up_stops_checking(demo, store_url, monkeypatch):
    """A new process (a server restart) whose read model is already at the log's end learns it
    from its first request; later requests read only their snapshot."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    demo.packets.packet(Request(STORY, "writer", 5), record=False)  # the model is at the log's end
    other = bootstrap(store_url)
    try:
        first = other.packets.packet(Request(STORY, "writer", 5), record=False)
        calls = []
        real = other.canon.catch_up_serving
        monkeypatch.setattr(other.canon, "catch_up_serving",
                            lambda *a, **k: calls.append("catch_up") or real(*a, **k))
        again = other.packets.packet(Request(STORY, "writer", 5), record=False)
        assert calls == [] and again.packet_id == first.packet_id
    finally:
        other.close()


def test_a_packet_after_this_processs_own_write_projects_it_without_reading_the_log(demo, monkeypatch):
    """Read-your-writes after a command of this process: the event it just committed is
    projected from what the ledger handed over, not read back from the log."""
    demo.packets.packet(Request(STORY, "writer", 5))
    result = _summary(demo, "tail-1", "TAIL-MARKER")
    reads = []
    _spy(monkeypatch, demo.ledger.event_log, "read", reads)
    latest = demo.packets.packet(Request(STORY, "writer", 5), after=result.position)
    assert "TAIL-MARKER" in latest.to_json() and reads == []
    assert demo.canon.position() >= result.position


def test_active_threads_are_read_from_the_partial_index(demo):
    """"Active as of K" (neither retired nor resolved) is one range of a partial
    index. Both stores take a partial index only when the query states its condition in the
    same words, so a bind parameter in the reader's condition would silently lose it."""
    from canon_ledger.projections import canon_view

    demo.packets.packet(Request(STORY, "writer", 5), record=False)
    with demo.packets.reader.snapshot() as snap:
        stmt = snap.statements[canon_view.ACTIVE_ENTRIES_OF_KIND]
        params = {"story": STORY, "chapter": 5, "kind": "thread"}
        if snap.conn.dialect.name == "sqlite":  # the SQL text sqlite3 runs
            sql = str(stmt)
            plan = snap.conn.connection.driver_connection.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
        else:
            compiled = stmt.compile(dialect=snap.conn.dialect)
            sql = str(compiled)
            plan = snap.conn.exec_driver_sql("EXPLAIN " + sql, compiled.construct_params(params)).all()
    assert any("_active" in str(row) for row in plan), plan
    # A server-side prepared statement (psycopg prepares repeated queries) is planned without
    # its parameters' values: the condition must be literal in the SQL itself.
    assert "'resolved'" in sql and "''" in sql


def test_the_story_views_open_threads_are_the_packets_active_threads(demo):
    """The story view's ``active`` threads (MCP's open_threads) state ``canon_rules.ACTIVE`` as
    the packet's reader does: a thread resolved in any case is neither's."""
    from canon_ledger.domain.canon_rules import active

    _apply(demo,
           {"type": "propose_canon", "command_id": "r1", "proposal_id": "p-bell", "kind": "thread", "key": "bell",
            "name": "The bell", "aliases": [], "text": "Who rang the bell?", "fields": {"state": "Resolved"},
            "valid_from": 2, "tags": []},
           {"type": "confirm_canon", "command_id": "r2", "proposal_id": "p-bell"})
    packet = demo.packets.packet(Request(STORY, "writer", 5, budget=100_000), record=False)
    threads = {i.key for i in packet.items if "active thread" in i.reason}  # a tagged one: a duplicate
    views = demo.views()
    every = views.canon_as_of(STORY, 5, "thread")
    assert "bell" in {e["key"] for e in every} and "bell" not in threads and threads
    assert {e["key"] for e in views.canon_as_of(STORY, 5, "thread", active=True)} == threads
    assert {e["key"] for e in every if active(False, e["state"])} == threads
    assert {e["kind"] for e in views.canon_as_of(STORY, 5, active=True)} > {"thread"}  # any kind, if not asked


def test_a_build_switched_and_dropped_by_another_process_is_found_again(demo, store_url, monkeypatch):
    """This process catches up the build it last saw serving without reading the registry
    first. When another process has rebuilt and dropped that build meanwhile, the catch-up
    finds its tracking row gone and looks the serving build up."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    demo.packets.packet(Request(STORY, "writer", 5))
    other = bootstrap(store_url)
    try:
        report = other.canon.rebuild()
        assert report.new != report.old
    finally:
        other.close()
    result = _summary(demo, "after-switch-1", "AFTER-SWITCH-MARKER")
    looked_up = []
    _spy(monkeypatch, demo.canon, "catch_up_serving", looked_up)
    latest = demo.packets.packet(Request(STORY, "writer", 5), after=result.position)
    assert "AFTER-SWITCH-MARKER" in latest.to_json()
    assert looked_up  # the dropped build sent it to the registry


@pytest.mark.parametrize("role", ROLES)
def test_the_reads_a_recipe_prefetches_are_the_reads_it_makes(shared_demo, role):
    """``FIRST_READS`` lists a recipe's reads through the recipe's own helpers: each prefetched
    result is asked for again with the same arguments, and the packet is the same bytes as
    one compiled read by read."""
    demo = shared_demo
    from canon_ledger.application.packets.compiler import compile_packet

    tokens, req = demo.packets.tokens, Request(STORY, role, 4 if role == "summarizer" else 5)
    demo.packets.packet(req, record=False)  # the read models caught up
    with demo.packets.reader.snapshot() as snap:
        snap.prefetch = lambda reads: None  # read by read
        plain = compile_packet(snap, req, tokens)
    with demo.packets.reader.snapshot() as snap:
        prefetched = compile_packet(snap, req, tokens)
        assert snap.unused_prefetch == 0
    assert prefetched.hash == plain.hash


def test_a_writer_packet_reaches_postgresql_in_few_round_trips(demo, monkeypatch):
    """PostgreSQL: the writer's first reads (eleven statements: the tenth the version of the
    story's mention matcher, the eleventh the previous chapter) go in one pipeline; what is
    left one by one is what depends on them: tagged entries, the next reads while the budget
    has room, the texts of packed earlier steps and chain nodes (entries in force come with
    their texts). SQLite answers in-process: nothing to batch."""
    import psycopg

    from canon_ledger.application.packets.compiler import compile_packet

    demo.packets.packet(Request(STORY, "writer", 5), record=False)
    alone, batched = [], []
    real = psycopg.Cursor.execute

    def execute(cursor, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        (batched if cursor.connection._pipeline is not None else alone).append(args[0])
        return real(cursor, *args, **kwargs)

    with demo.packets.reader.snapshot() as snap:
        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        compile_packet(snap, Request(STORY, "writer", 5), demo.packets.tokens)
        monkeypatch.undo()
        postgres = snap.conn.dialect.name == "postgresql"
    if postgres:
        assert len(batched) == 11 and len(alone) <= 4, (len(batched), alone)
    else:
        assert batched == alone == []
