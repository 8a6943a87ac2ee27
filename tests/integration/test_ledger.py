"""The ledger on both real stores: idempotency, atomic batches, bad input changes nothing."""

from __future__ import annotations

import json

import pytest

from application.ledger import CanonLedger
from application.parsing import parse_command, parse_line
from domain.errors import CanonError
from infrastructure.demo import sample_commands


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
    lines = sample_commands()
    first = ledger.apply([parse_line(line) for line in lines])
    assert [r.status for r in first] == ["applied"] * len(lines)
    positions = [r.position for r in first]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    end = ledger.position()
    assert end == positions[-1]

    second = ledger.apply([parse_line(line) for line in lines])
    assert [r.status for r in second] == ["duplicate"] * len(lines)
    assert ledger.position() == end


def test_reusing_a_command_id_for_a_different_command_is_refused(ledger: CanonLedger) -> None:
    _story(ledger)
    before = ledger.position()
    [result] = ledger.apply([_cmd(type="plan_chapter", command_id="s1-ch1", story_id="s1", chapter=2, volume=1, goals=[])])
    assert result.status == "rejected"
    assert result.error is not None and result.error.code == "command_id_must_identify_one_command"
    assert ledger.position() == before


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
    before = list(ledger.history())
    try:
        item = parse_line(line)
    except CanonError as e:
        item = e
    [result] = ledger.apply([item])
    assert result.status == "rejected"
    assert result.error is not None and result.error.code == code
    assert result.error.message
    assert list(ledger.history()) == before


def test_atomic_batch_is_all_or_nothing(ledger: CanonLedger) -> None:
    _story(ledger)
    before = ledger.position()
    batch = [
        _cmd(type="plan_chapter", command_id="a1", story_id="s1", chapter=2, volume=1, goals=[]),
        _cmd(type="plan_chapter", command_id="a2", story_id="s1", chapter=3, volume=1, goals=[]),
        _cmd(type="plan_chapter", command_id="a3", story_id="s1", chapter=2, volume=1, goals=[]),  # duplicate chapter
    ]
    results = ledger.apply(batch, atomic=True)
    assert [r.status for r in results] == ["not_applied", "not_applied", "rejected"]
    assert ledger.position() == before

    good = ledger.apply(batch[:2], atomic=True)
    assert [r.status for r in good] == ["applied", "applied"]
    assert good[0].position == good[1].position == ledger.position()
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
    everything = list(ledger.history())
    assert [e.position for e in everything] == sorted(e.position for e in everything)
    only_b = list(ledger.history(story_id="b"))
    assert only_b and all(e.story_id == "b" for e in only_b)
    assert {e.type for e in only_b} >= {"Story.Started", "Chapter.Planned", "CommandReceipt.Recorded"}
    # Starting mid-log still attributes events whose aggregate was created earlier.
    late = list(ledger.history(story_id="b", start=only_b[-1].position))
    assert late and late[0].story_id == "b"
    json.dumps([e.data for e in everything], default=str)


def test_atomic_batch_with_the_same_command_twice_applies_it_once(ledger: CanonLedger) -> None:
    _story(ledger)
    summary = _cmd(type="record_chapter_summary", command_id="sum-1", story_id="s1", chapter=1, text="once")
    results = ledger.apply([summary, summary], atomic=True)
    assert [r.status for r in results] == ["applied", "duplicate"]
    assert sum(e.type == "Chapter.SummaryRecorded" for e in ledger.history()) == 1
    other = _cmd(type="record_chapter_summary", command_id="sum-2", story_id="s1", chapter=1, text="a")
    clash = _cmd(type="record_chapter_summary", command_id="sum-2", story_id="s1", chapter=1, text="b")
    before = ledger.position()
    assert [r.status for r in ledger.apply([other, clash], atomic=True)] == ["not_applied", "rejected"]
    assert ledger.position() == before


def test_a_re_applied_command_that_its_own_success_would_refuse_is_a_duplicate(ledger: CanonLedger) -> None:
    _story(ledger)
    again = _cmd(type="plan_chapter", command_id="s1-ch1", story_id="s1", chapter=1, volume=1, goals=["x"])
    assert [r.status for r in ledger.apply([again])] == ["duplicate"]
    assert [r.status for r in ledger.apply([again], atomic=True)] == ["duplicate"]
