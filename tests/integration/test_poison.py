"""Poison events: what the log holds but a read model cannot store is quarantined, and
everything else keeps serving (issue 16). Both stores."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.runner import tracked
from tests.conftest import create_database, drop_database
from tests.fixture_log import fixture_rows, insert_rows

LONG_STORY = "saga-" + "x" * 140


@pytest.fixture
def poisoned(store_url):
    s = bootstrap(store_url, embedder="hashing")
    try:
        insert_rows(s.ledger, fixture_rows("poison-events.jsonl"))
        yield s
    finally:
        s.close()


def test_a_store_holding_poison_events_keeps_serving_every_other_story(poisoned, store_url, tmp_path) -> None:
    rows = fixture_rows("poison-events.jsonl")
    demo_end = next(e.position for e in poisoned.ledger.event_log.history() if e.story_id == "poisoned") - 1
    # The same store kind with only the demo's events.
    clean_url, admin = (create_database(initialised=True) if store_url.startswith("postgresql")
                        else (f"sqlite:///{tmp_path / 'c.db'}", None))
    clean = bootstrap(clean_url, embedder="hashing")
    try:
        insert_rows(clean.ledger, [r for r in rows if r["position"] <= demo_end])
        expected = clean.packets.packet(Request("lamplight", "writer", 5), record=False)
    finally:
        clean.close()
        if admin is not None:
            drop_database(clean_url, admin)
    # The old behaviour: the first packet request of any story ended in a traceback.
    packet = poisoned.packets.packet(Request("lamplight", "writer", 5))
    assert packet.to_json() == expected.to_json()
    assert "quarantined" not in [s.step for s in packet.stages]
    assert poisoned.auditor.audit(packet.packet_id).ok


def test_the_poisoned_story_serves_what_it_can_and_says_what_it_skipped(poisoned) -> None:
    packet = poisoned.packets.packet(Request("poisoned", "writer", 1))
    [stage] = [s for s in packet.stages if s.step == "quarantined"]
    assert stage.status == "error" and "3 events at positions" in stage.detail
    assert packet.stages[0].step == "quarantined"  # said first
    goals = [i for i in packet.items if i.kind == "chapter_goals"]
    assert goals and "a fine first chapter" in goals[0].text  # chapter 1 (a good event) is there
    assert not any("\x00" in i.text or "NUL" in i.text for i in packet.items)
    assert poisoned.auditor.audit(packet.packet_id).ok  # the replay quarantines the same events
    quarantined = poisoned.quarantined()
    canon = [(q["position"], q["event_type"]) for q in quarantined if q["projection"].startswith("canon:")]
    assert [t for _, t in canon] == ["Chapter.Planned", "Chapter.Planned", "CanonEntry.Established"]
    assert all(q["scope"] == "poisoned" for q in quarantined if q["projection"].startswith("canon:"))
    assert all(q["error"].startswith("Unstorable: ") for q in quarantined)


def test_a_long_story_id_from_before_the_bounds_serves_packets_and_search(poisoned) -> None:
    packet = poisoned.packets.packet(Request(LONG_STORY, "planner", 2))
    assert not [s for s in packet.stages if s.status == "error" and "SQL" in s.detail]
    poisoned.catch_up_retrieval()
    result = poisoned.search_service().search(["story:lamplight"], "lamps at dusk", 3)
    assert result.hits  # search of the store as a whole still answers
    assert {q["scope"] for q in poisoned.quarantined() if not q["projection"].startswith("canon:")} == {LONG_STORY}


def test_a_rebuild_retries_quarantined_events_into_the_same_result(poisoned) -> None:
    before = poisoned.packets.packet(Request("poisoned", "writer", 1), record=False)
    positions = sorted(q["position"] for q in poisoned.quarantined() if q["projection"].startswith("canon:"))
    report = poisoned.canon.rebuild()
    after = poisoned.packets.packet(Request("poisoned", "writer", 1), record=False)
    assert after.to_json() == before.to_json()
    now = [q for q in poisoned.quarantined() if q["projection"].startswith("canon:")]
    assert {q["projection"] for q in now} == {f"canon:{report.new.tag}"}  # the old build's rows went with it
    assert sorted(q["position"] for q in now) == positions


def test_a_position_beyond_the_log_is_refused_and_never_reaches_a_tracking_row(services) -> None:
    services.ledger.apply([parse_command(c) for c in (
        {"type": "start_story", "command_id": "b-1", "story_id": "s", "title": "T", "style_guardrails": [],
         "output_contract": "md"},
        {"type": "plan_chapter", "command_id": "b-2", "story_id": "s", "chapter": 1, "volume": 1, "goals": ["g"]})])
    end = services.ledger.event_log.position()
    services.packets.packet(Request("s", "writer", 1), record=False)
    with services.canon.write_engine.begin() as conn:
        row_before = tracked(conn, f"canon:{services.canon.active().tag}")
    with pytest.raises(CanonError) as e:
        services.packets.packet(Request("s", "writer", 1), after=end + 100)
    assert e.value.code == "position_beyond_log" and str(end) in e.value.message and e.value.field == "after"
    with services.canon.write_engine.begin() as conn:
        assert tracked(conn, f"canon:{services.canon.active().tag}") == row_before
    # A chapter planned afterwards is projected as usual.
    [r] = services.ledger.apply([parse_command({"type": "plan_chapter", "command_id": "b-3", "story_id": "s",
                                                "chapter": 2, "volume": 1, "goals": ["later"]})])
    packet = services.packets.packet(Request("s", "writer", 2), after=r.position, record=False)
    assert any("later" in i.text for i in packet.items)


def test_a_rebuild_killed_after_its_switch_drops_the_old_build_next_time(services, monkeypatch) -> None:
    services.ledger.apply([parse_command({"type": "start_story", "command_id": "k-1", "story_id": "s", "title": "T",
                                          "style_guardrails": [], "output_contract": "md"})])
    models = services.canon
    old = models.active()
    real_drop = models._drop

    def killed(build):  # noqa: ANN001, ANN202 - the process dies between the switch and the drop
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(models, "_drop", killed)
    with pytest.raises(KeyboardInterrupt):
        models.rebuild()
    monkeypatch.setattr(models, "_drop", real_drop)
    assert models.active() != old
    with models.read_engine.begin() as conn:
        assert inspect(conn).has_table(f"rm_canon_{old.tag}")
        assert tracked(conn, f"canon:{old.tag}") is not None
    report = models.rebuild()
    with models.read_engine.begin() as conn:
        assert not inspect(conn).has_table(f"rm_canon_{old.tag}")
        assert tracked(conn, f"canon:{old.tag}") is None
        assert tracked(conn, f"canon:{report.old.tag}") is None  # this run's own old build went too
