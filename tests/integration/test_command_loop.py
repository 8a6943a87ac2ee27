"""The ledger's one command loop (``CanonLedger._apply_batch``) when a save loses a race.

A save that raises IntegrityError is answered from the receipts first: a command that turns
out to have been applied meanwhile (by a retry of itself elsewhere) is a duplicate at once,
with no back-off and even on the last attempt, whether applied alone or in an atomic batch.
"""

from __future__ import annotations

import pytest
from eventsourcing.persistence import IntegrityError

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command


def _start(command_id: str, story: str) -> object:
    return parse_command({"type": "start_story", "command_id": command_id, "story_id": story, "title": "T",
                          "style_guardrails": ["g"], "output_contract": "md"})


def _lose_to_itself(ledger: CanonLedger, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The next save is written, then reported lost (as if a retry elsewhere had won); back-offs are counted."""
    real = ledger.save
    state = {"lost": False}

    def save(*objs, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if state["lost"]:
            return real(*objs, **kwargs)
        state["lost"] = True
        real(*objs, **kwargs)
        raise IntegrityError("lost the race to an earlier copy of the same command")

    backed_off: list[int] = []
    monkeypatch.setattr(ledger, "save", save)
    monkeypatch.setattr(ledger, "_back_off", backed_off.append)
    monkeypatch.setattr(ledger, "max_attempts", 1)
    return backed_off


@pytest.mark.parametrize("atomic", [False, True])
def test_a_save_lost_to_its_own_earlier_copy_is_a_duplicate_at_once(ledger: CanonLedger, monkeypatch, atomic) -> None:
    backed_off = _lose_to_itself(ledger, monkeypatch)
    results = ledger.apply([_start("c-a", "a"), _start("c-b", "b")], atomic=atomic)
    if atomic:  # one save for both: both were written by it
        assert [r.status for r in results] == ["duplicate", "duplicate"]
    else:  # the first save lost to itself; the second command saved normally
        assert [r.status for r in results] == ["duplicate", "applied"]
    assert backed_off == []
    assert ledger.apply([_start("c-a", "a")])[0].status == "duplicate"


def test_a_lost_save_with_commands_left_to_decide_backs_off_and_decides_them_again(ledger: CanonLedger,
                                                                                  monkeypatch) -> None:
    real = ledger.save
    state = {"calls": 0}

    def save(*objs, **kwargs):  # noqa: ANN002, ANN003, ANN202
        state["calls"] += 1
        if state["calls"] == 1:
            raise IntegrityError("another writer changed the same aggregates")
        return real(*objs, **kwargs)

    backed_off: list[int] = []
    monkeypatch.setattr(ledger, "save", save)
    monkeypatch.setattr(ledger, "_back_off", backed_off.append)
    results = ledger.apply([_start("c-a", "a"), _start("c-a", "a")], atomic=True)
    assert [r.status for r in results] == ["applied", "duplicate"] and results[0].position is not None
    assert backed_off == [0] and state["calls"] == 2
