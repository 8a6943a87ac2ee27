"""Command ids are scoped per story (a knowledge command's: per collection), both stores.

Given two stories, when each sends a command under the same id, then both apply; a reused id
is refused naming only the story's own command; receipts written before ids were scoped still
answer their own story's retries (never another story's); and a command that changed nothing
keeps its id, so the id cannot later name a different command."""

from __future__ import annotations

from typing import Any

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.demo import STORY
from tests.fixture_log import load_fixture
from tests.helpers import demo_commands, demo_json


def _start(story: str, command_id: str, title: str = "T") -> dict[str, Any]:
    return {"type": "start_story", "command_id": command_id, "story_id": story, "title": title,
            "style_guardrails": ["g"], "output_contract": "md"}


def _plan(story: str, command_id: str, chapter: int, goal: str = "g") -> dict[str, Any]:
    return {"type": "plan_chapter", "command_id": command_id, "story_id": story, "chapter": chapter, "volume": 1,
            "goals": [goal]}


def _apply(ledger: CanonLedger, *commands: dict[str, Any], atomic: bool = False) -> list[Any]:
    return ledger.apply([parse_command(c) for c in commands], atomic=atomic)


def test_two_stories_use_the_same_command_id_and_neither_learns_of_the_other(ledger: CanonLedger) -> None:
    assert [r.status for r in _apply(ledger, _start("a", "c-1"), _start("b", "c-1"))] == ["applied", "applied"]
    # The same id, a different command of story a: refused naming a's own command, not b's.
    [reused] = _apply(ledger, _plan("a", "c-1", 1))
    assert reused.status == "rejected" and reused.error is not None
    assert reused.error.code == "command_id_must_identify_one_command"
    assert "start_story" in reused.error.message and "'b'" not in reused.error.message
    # An id b claims first never blocks a's later command under it.
    assert _apply(ledger, _plan("b", "c-2", 1))[0].status == "applied"
    assert _apply(ledger, _plan("a", "c-2", 1))[0].status == "applied"
    # Retries stay duplicates, each in its own story, alone or in one batch.
    assert [r.status for r in _apply(ledger, _plan("a", "c-2", 1), _plan("b", "c-2", 1), atomic=True)] == [
        "duplicate", "duplicate"]
    # In one batch, one id in two stories is two commands, not a copy of one.
    results = _apply(ledger, _plan("a", "c-3", 2), _plan("b", "c-3", 2), atomic=True)
    assert [r.status for r in results] == ["applied", "applied"]


def test_a_command_that_changed_nothing_keeps_its_id(ledger: CanonLedger) -> None:
    _apply(ledger, _start("a", "c-1"), _plan("a", "c-2", 1))
    end = ledger.event_log.position()
    [same] = _apply(ledger, _plan("a", "c-3", 1))
    assert same.status == "unchanged"
    assert [e.type for e in ledger.event_log.history(start=end + 1)] == ["CommandReceipt.Recorded"]
    end = ledger.event_log.position()
    assert _apply(ledger, _plan("a", "c-3", 1))[0].status == "duplicate"
    assert ledger.event_log.position() == end
    [other] = _apply(ledger, _plan("a", "c-3", 2))
    assert other.status == "rejected" and other.error is not None
    assert other.error.code == "command_id_must_identify_one_command"
    assert ledger.event_log.position() == end


def test_receipts_from_before_ids_were_scoped_answer_only_their_own_story(ledger: CanonLedger) -> None:
    load_fixture(ledger, "v1-events.jsonl")  # the demo as the first release wrote it: unscoped receipts
    end = ledger.event_log.position()
    # Every demo command sent again is a duplicate: its old receipt is read, not only the state
    # (some of them, like a chapter summary, would otherwise answer "unchanged").
    again = ledger.apply(demo_commands())
    assert again and {r.status for r in again} == {"duplicate"}, {r.status for r in again}
    assert ledger.event_log.position() == end
    # A different command of the demo's story under a demo id is refused, as before.
    first = demo_json()[1]
    [reused] = _apply(ledger, _plan(STORY, first["command_id"], 99))
    assert reused.error is not None and reused.error.code == "command_id_must_identify_one_command"
    # Another story may use the demo's ids: the old receipts are the demo story's, not its.
    assert _apply(ledger, _start("other", first["command_id"]))[0].status == "applied"
    assert _apply(ledger, _start("other", first["command_id"]))[0].status == "duplicate"
