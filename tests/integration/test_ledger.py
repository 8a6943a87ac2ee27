"""The ledger on both real stores: idempotency, atomic batches, bad input changes nothing."""

from __future__ import annotations

import json

import pytest

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command, parse_line
from canon_ledger.domain.errors import CanonError
from tests.helpers import demo_commands


def _cmd(**fields):
    return parse_command(fields)


def _story(ledger: CanonLedger, story: str = "s1") -> None:
    results = ledger.apply(
        [
            _cmd(type="start_story", command_id=f"{story}-start", story_id=story, title="T",
                 style_guardrails=["g"], output_contract="md"),
            _cmd(type="plan_chapter", command_id=f"{story}-ch1", story_id=story, chapter=1, volume=1, goals=["x"]),
        ]
    )
    assert [r.status for r in results] == ["applied", "applied"]


def test_sample_applied_twice_reports_duplicates_and_appends_nothing(ledger: CanonLedger) -> None:
    commands = demo_commands()
    first = ledger.apply(commands)
    assert [r.status for r in first] == ["applied"] * len(commands)
    positions = [r.position for r in first]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    end = ledger.event_log.position()
    assert end == positions[-1]

    second = ledger.apply(commands)
    assert [r.status for r in second] == ["duplicate"] * len(commands)
    assert ledger.event_log.position() == end


def test_reusing_a_command_id_for_a_different_command_is_refused(ledger: CanonLedger) -> None:
    _story(ledger)
    before = ledger.event_log.position()
    [result] = ledger.apply([_cmd(type="plan_chapter", command_id="s1-ch1", story_id="s1", chapter=2, volume=1, goals=[])])
    assert result.status == "rejected"
    assert result.error is not None and result.error.code == "command_id_must_identify_one_command"
    assert ledger.event_log.position() == before


BAD_INPUT = [
    ("malformed_json", '{"type": "plan_chapter", '),
    ("unknown_command_type", '{"type": "plan_chapters", "command_id": "b1", "story_id": "s1"}'),
    ("missing_field", '{"type": "plan_chapter", "command_id": "b2", "story_id": "s1", "chapter": 2, "volume": 1}'),
    ("invalid_field", '{"type": "plan_chapter", "command_id": "b3", "story_id": "s1", "chapter": "two", "volume": 1, "goals": []}'),
    ("unknown_story", '{"type": "plan_chapter", "command_id": "b4", "story_id": "nope", "chapter": 2, "volume": 1, "goals": []}'),
    ("chapter_number_must_be_unique", '{"type": "plan_chapter", "command_id": "b5", "story_id": "s1", "chapter": 1, "volume": 1, "goals": []}'),
    ("rejected_proposal_cannot_be_confirmed", '{"type": "confirm_canon", "command_id": "b6", "story_id": "s1", "proposal_id": "p-rej"}'),
    ("rejected_draft_cannot_be_accepted", '{"type": "accept_draft", "command_id": "b7", "story_id": "s1", "draft_id": "d-rej"}'),
]


@pytest.mark.parametrize(("code", "line"), BAD_INPUT, ids=[c for c, _ in BAD_INPUT])
def test_bad_input_is_refused_with_a_structured_error_and_changes_nothing(ledger: CanonLedger, code: str, line: str) -> None:
    _story(ledger)
    setup = [
        _cmd(type="propose_canon", command_id="p1", story_id="s1", proposal_id="p-rej", kind="character", key="k",
             name="K", aliases=[], text="t", fields={}, valid_from=1),
        _cmd(type="reject_canon", command_id="p2", story_id="s1", proposal_id="p-rej", reason="no"),
        _cmd(type="submit_draft", command_id="d1", story_id="s1", chapter=1, draft_id="d-rej", text="draft"),
        _cmd(type="reject_draft", command_id="d2", story_id="s1", draft_id="d-rej", reason="no"),
    ]
    assert all(r.status == "applied" for r in ledger.apply(setup))
    before = list(ledger.event_log.history())
    try:
        item = parse_line(line)
    except CanonError as e:
        item = e
    [result] = ledger.apply([item])
    assert result.status == "rejected"
    assert result.error is not None and result.error.code == code
    assert result.error.message
    assert list(ledger.event_log.history()) == before


def test_atomic_batch_is_all_or_nothing(ledger: CanonLedger) -> None:
    _story(ledger)
    before = ledger.event_log.position()
    batch = [
        _cmd(type="plan_chapter", command_id="a1", story_id="s1", chapter=2, volume=1, goals=[]),
        _cmd(type="plan_chapter", command_id="a2", story_id="s1", chapter=3, volume=1, goals=[]),
        # chapter 2 again, planned otherwise (the same plan again would be unchanged)
        _cmd(type="plan_chapter", command_id="a3", story_id="s1", chapter=2, volume=1, goals=["other"]),
    ]
    results = ledger.apply(batch, atomic=True)
    assert [r.status for r in results] == ["not_applied", "not_applied", "rejected"]
    assert ledger.event_log.position() == before

    good = ledger.apply(batch[:2], atomic=True)
    assert [r.status for r in good] == ["applied", "applied"]
    assert good[0].position == good[1].position == ledger.event_log.position()
    assert [r.status for r in ledger.apply(batch[:2], atomic=True)] == ["duplicate", "duplicate"]


def test_atomic_batch_sees_its_own_earlier_commands(ledger: CanonLedger) -> None:
    batch = [
        _cmd(type="start_story", command_id="x1", story_id="s9", title="T", style_guardrails=[], output_contract="md"),
        _cmd(type="plan_chapter", command_id="x2", story_id="s9", chapter=1, volume=1, goals=[]),
        _cmd(type="propose_canon", command_id="x3", story_id="s9", proposal_id="p", kind="location", key="inn",
             name="Inn", aliases=[], text="An inn.", fields={}, valid_from=1),
        _cmd(type="confirm_canon", command_id="x4", story_id="s9", proposal_id="p"),
        _cmd(type="add_scene_card", command_id="x5", story_id="s9", chapter=1, scene_id="a", summary="s",
             characters=[], locations=["inn"], threads=[], callbacks=[], items=[]),
    ]
    assert [r.status for r in ledger.apply(batch, atomic=True)] == ["applied"] * 5


def test_history_filters_by_story_and_reads_in_global_order(ledger: CanonLedger) -> None:
    _story(ledger, "a")
    _story(ledger, "b")
    everything = list(ledger.event_log.history())
    assert [e.position for e in everything] == sorted(e.position for e in everything)
    only_b = list(ledger.event_log.history(story_id="b"))
    assert only_b and all(e.story_id == "b" for e in only_b)
    assert {e.type for e in only_b} >= {"Story.Started", "Chapter.Planned", "CommandReceipt.Recorded"}
    # Starting mid-log still attributes events whose aggregate was created earlier.
    late = list(ledger.event_log.history(story_id="b", start=only_b[-1].position))
    assert late and late[0].story_id == "b"
    json.dumps([e.data for e in everything], default=str)


def test_atomic_batch_with_the_same_command_twice_applies_it_once(ledger: CanonLedger) -> None:
    _story(ledger)
    summary = _cmd(type="record_chapter_summary", command_id="sum-1", story_id="s1", chapter=1, text="once")
    results = ledger.apply([summary, summary], atomic=True)
    assert [r.status for r in results] == ["applied", "duplicate"]
    assert sum(e.type == "Chapter.SummaryRecorded" for e in ledger.event_log.history()) == 1
    other = _cmd(type="record_chapter_summary", command_id="sum-2", story_id="s1", chapter=1, text="a")
    clash = _cmd(type="record_chapter_summary", command_id="sum-2", story_id="s1", chapter=1, text="b")
    before = ledger.event_log.position()
    assert [r.status for r in ledger.apply([other, clash], atomic=True)] == ["not_applied", "rejected"]
    assert ledger.event_log.position() == before


def test_a_re_applied_command_that_its_own_success_would_refuse_is_a_duplicate(ledger: CanonLedger) -> None:
    _story(ledger)
    again = _cmd(type="plan_chapter", command_id="s1-ch1", story_id="s1", chapter=1, volume=1, goals=["x"])
    assert [r.status for r in ledger.apply([again])] == ["duplicate"]
    assert [r.status for r in ledger.apply([again], atomic=True)] == ["duplicate"]


def _loaded_without_snapshots(store_url: str, aggregate_id):  # noqa: ANN001, ANN202
    """The aggregate replayed from all of its events, as a ledger without snapshots sees it."""
    from canon_ledger.infrastructure.stores import resolve_url, store_config

    plain = CanonLedger(env={**store_config(resolve_url(store_url)).env, "IS_SNAPSHOTTING_ENABLED": "n"})
    try:
        assert plain.snapshots is None
        return plain.repository.get(aggregate_id)
    finally:
        plain.close()


def test_a_long_lived_aggregate_loads_from_its_snapshot_with_the_same_state(ledger: CanonLedger, store_url) -> None:
    from canon_ledger.application.ledger import SNAPSHOT_EVERY
    from canon_ledger.domain import ids

    _story(ledger)
    chapter = ids.chapter_id("s1", 1)
    summaries = [_cmd(type="record_chapter_summary", story_id="s1", command_id=f"sum-{i}", chapter=1, text=f"summary {i}")
                 for i in range(SNAPSHOT_EVERY + 5)]
    assert all(r.status == "applied" for r in ledger.apply(summaries))
    [snapshot] = list(ledger.snapshots.get(chapter, desc=True, limit=1))
    assert snapshot.originator_version == SNAPSHOT_EVERY
    loaded = ledger.repository.get(chapter)
    replayed = _loaded_without_snapshots(store_url, chapter)
    assert loaded.version == replayed.version > SNAPSHOT_EVERY
    assert vars(loaded) == vars(replayed) and loaded.summary == f"summary {SNAPSHOT_EVERY + 4}"


def test_a_snapshot_that_cannot_be_written_does_not_fail_the_saved_command(ledger: CanonLedger, monkeypatch) -> None:
    from canon_ledger.application.ledger import SNAPSHOT_EVERY
    from canon_ledger.domain import ids

    _story(ledger)

    def broken(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("snapshot store unavailable")

    monkeypatch.setattr(ledger.snapshots, "put", broken)
    results = ledger.apply([_cmd(type="record_chapter_summary", story_id="s1", command_id=f"sum-{i}", chapter=1, text=f"s {i}")
                            for i in range(SNAPSHOT_EVERY + 2)])
    assert all(r.status == "applied" for r in results)
    assert not list(ledger.snapshots.get(ids.chapter_id("s1", 1)))
    assert ledger.repository.get(ids.chapter_id("s1", 1)).summary == f"s {SNAPSHOT_EVERY + 1}"


def test_short_aggregates_load_without_asking_for_a_snapshot(ledger: CanonLedger, monkeypatch) -> None:
    """Most aggregates are shorter than a snapshot interval: they load with one query."""
    from canon_ledger.application.ledger import SNAPSHOT_EVERY
    from canon_ledger.domain import ids

    _story(ledger)
    asked = []
    real = ledger.snapshots.recorder.select_events
    monkeypatch.setattr(ledger.snapshots.recorder, "select_events", lambda *a, **k: asked.append(a) or real(*a, **k))
    assert ledger.repository.get(ids.chapter_id("s1", 1)).number == 1
    assert asked == []
    ledger.apply([_cmd(type="record_chapter_summary", story_id="s1", command_id=f"sum-{i}", chapter=1, text=f"s {i}")
                  for i in range(SNAPSHOT_EVERY)])
    assert ledger.repository.get(ids.chapter_id("s1", 1)).summary == f"s {SNAPSHOT_EVERY - 1}"
    assert asked  # a long one starts from its snapshot


def test_a_long_aggregate_loads_next_time_with_one_query_and_sees_other_writers(ledger: CanonLedger, store_url,
                                                                                 monkeypatch) -> None:
    """Its snapshot is remembered: the next load reads only the events after it, including
    those another process appended meanwhile."""
    from canon_ledger.application.ledger import SNAPSHOT_EVERY
    from canon_ledger.domain import ids
    from canon_ledger.infrastructure.stores import open_ledger

    _story(ledger)
    chapter = ids.chapter_id("s1", 1)
    ledger.apply([_cmd(type="record_chapter_summary", story_id="s1", command_id=f"sum-{i}", chapter=1, text=f"s {i}")
                  for i in range(SNAPSHOT_EVERY + 3)])
    ledger.repository.get(chapter)  # reads head, snapshot and tail; remembers the snapshot
    other = open_ledger(store_url)
    try:
        assert other.apply([_cmd(type="record_chapter_summary", story_id="s1", command_id="sum-other", chapter=1,
                                 text="from another process")])[0].status == "applied"
    finally:
        other.close()
    reads = []
    for store in (ledger.events.recorder, ledger.snapshots.recorder):
        real = store.select_events
        monkeypatch.setattr(store, "select_events", lambda *a, _real=real, **k: reads.append(k) or _real(*a, **k))
    loaded = ledger.repository.get(chapter)
    assert len(reads) == 1 and reads[0]["gt"] == SNAPSHOT_EVERY
    monkeypatch.undo()
    replayed = _loaded_without_snapshots(store_url, chapter)
    assert loaded.summary == "from another process" and vars(loaded) == vars(replayed)
    loaded.record_summary("changed in memory only")  # two loads share no state
    assert ledger.repository.get(chapter).summary == "from another process"




def _counting_reads(ledger: CanonLedger, monkeypatch) -> list:  # noqa: ANN001
    """The library's one-aggregate reads of events and snapshots, as they happen."""
    reads: list = []
    for store in (ledger.events.recorder, ledger.snapshots.recorder):
        real = store.select_events
        monkeypatch.setattr(store, "select_events", lambda *a, _real=real, **k: reads.append((a, k)) or _real(*a, **k))
    return reads


def test_get_many_loads_each_aggregate_as_get_does(ledger: CanonLedger) -> None:
    """Short, long (from its snapshot, remembered or not) and absent aggregates alike."""
    from canon_ledger.application.ledger import SNAPSHOT_EVERY
    from canon_ledger.domain import ids

    _story(ledger)
    ledger.apply([_cmd(type="plan_chapter", command_id="s1-ch2", story_id="s1", chapter=2, volume=1, goals=[])])
    for chapter, count in ((1, SNAPSHOT_EVERY + 3), (2, SNAPSHOT_EVERY - 1)):
        ledger.apply([_cmd(type="record_chapter_summary", story_id="s1", command_id=f"sum-{chapter}-{i}",
                           chapter=chapter, text=f"s {i}") for i in range(count)], atomic=True)
    wanted = [ids.story_id("s1"), ids.chapter_id("s1", 1), ids.chapter_id("s1", 2), ids.chapter_id("s1", 3)]
    for _ in range(2):  # the second time, chapter 1's snapshot is remembered
        many = ledger.repository.get_many([*wanted, wanted[0]])
        assert list(many) == wanted and many[wanted[3]] is None
        for aggregate_id in wanted[:3]:
            assert vars(many[aggregate_id]) == vars(ledger.repository.get(aggregate_id))
    assert many[wanted[1]].version == SNAPSHOT_EVERY + 4 and many[wanted[2]].version == SNAPSHOT_EVERY


def test_an_atomic_batch_reads_the_aggregates_its_commands_name_together(ledger: CanonLedger, monkeypatch) -> None:
    """Not one by one: those that do not exist yet included (a new chapter, proposal, entry)."""
    _story(ledger)
    reads = _counting_reads(ledger, monkeypatch)
    batch = [
        _cmd(type="plan_chapter", command_id="b1", story_id="s1", chapter=2, volume=1, goals=[]),
        _cmd(type="propose_canon", command_id="b2", story_id="s1", proposal_id="p", kind="location", key="inn",
             name="Inn", aliases=[], text="An inn.", fields={}, valid_from=1),
        _cmd(type="confirm_canon", command_id="b3", story_id="s1", proposal_id="p"),
        _cmd(type="add_scene_card", command_id="b4", story_id="s1", chapter=2, scene_id="a", summary="s",
             characters=[], locations=["inn"], threads=[], callbacks=["inn"], items=[]),
        _cmd(type="record_chapter_summary", command_id="b5", story_id="s1", chapter=1, text="one"),
    ]
    assert [r.status for r in ledger.apply(batch, atomic=True)] == ["applied"] * 5
    assert reads == []
    # Applied again, every command is a duplicate: their receipts are read together too.
    assert [r.status for r in ledger.apply(batch, atomic=True)] == ["duplicate"] * 5
    assert reads == []
