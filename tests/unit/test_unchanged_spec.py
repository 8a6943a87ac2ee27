"""A command that changes nothing decides no events, for every command type (issue 21).

Given the state a command produces, the same command again (under a new ``command_id``)
decides no events, so the ledger answers it ``unchanged`` and records nothing. A repeat that
differs from that state is still refused by the rule it breaks, with the same code as before;
where a differing repeat is a real change (a new summary, an edited chunk) it is applied.
"""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.domain.commands import json_schema
from tests.unit.spec import (
    accept, chapter_summary, confirm, dismiss, edit, given, ingest, know, plan, propose, reject, reject_draft, retire,
    scene, start, lore_cap, submit, volume_summary,
)

GUIDE = "# Lamps\nLamps keep memory.\n\n## Oil\nWhale oil only.\n"
OIL = "kb/guide.md#lamps/oil/0"
ANN = (propose("p-ann", key="ann"), confirm("p-ann"))  # a confirmed character to tag

# type -> (the history before it, the command). After that history the command makes a
# change; applied once more, it must change nothing.
SAME: dict[str, tuple[tuple[dict[str, Any], ...], dict[str, Any]]] = {
    "start_story": ((), start(budgets={"writer": 900})),
    "plan_chapter": ((start(),), plan(1, volume=2, goals=["open the thread", "close the door"])),
    "add_scene_card": ((start(), plan(1), *ANN), scene(1, "a", characters=["ann"])),
    "propose_canon": ((start(),), propose("p", aliases=["Annie"], fields={"state": "open"}, tags=["t"])),
    "confirm_canon": ((start(), propose("p")), confirm("p")),
    "reject_canon": ((start(), propose("p")), reject("p", "off canon")),
    "retire_canon": ((start(), *ANN), retire("character", "ann", 5, "died")),
    "submit_draft": ((start(), plan(1)), submit(1, "d", "the text")),
    "accept_draft": ((start(), plan(1), submit(1, "d")), accept("d")),
    "reject_draft": ((start(), plan(1), submit(1, "d")), reject_draft("d", "off voice")),
    "dismiss_finding": ((start(), plan(1), submit(1, "d")), dismiss("d", reason="the twin, on purpose")),
    "record_knowledge": ((start(), *ANN, propose("p-bob", key="bob"), confirm("p-bob")),
                         know("ann", "bob", 4, "told by Harl")),
    "record_chapter_summary": ((start(), plan(1)), chapter_summary(1, "it rained")),
    "record_volume_summary": ((start(),), volume_summary(1, "the first volume")),
    "set_lore_cap": ((start(),), lore_cap(25)),
    "ingest_document": ((), ingest("guide.md", GUIDE)),
    "edit_chunk": ((ingest("guide.md", GUIDE),), edit(OIL, "Colza oil only.")),
    "start_series": ((), {"type": "start_series", "story_id": "saga", "title": "The Saga"}),
    "add_book": (({"type": "start_series", "story_id": "saga", "title": "The Saga"}, start()),
                 {"type": "add_book", "story_id": "s", "series_id": "saga"}),
}


def again(command: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The command once more under a new command id (a retry of the same id is a duplicate)."""
    return {**command, "command_id": f"again-{command['type']}", **changes}


def test_every_command_type_is_covered() -> None:
    assert set(SAME) == set(json_schema()["discriminator"]["mapping"])


@pytest.mark.parametrize("kind", list(SAME))
def test_the_same_command_again_changes_nothing(kind: str) -> None:
    before, command = SAME[kind]
    assert given(*before).history.run(command), f"{kind} changed nothing the first time"
    given(*before, command).when(again(command)).then()


# The state a command would make, reached another way: still nothing to change.
EQUIVALENT = {
    "budgets spelled out as the defaults": ((start(),), start(budgets={"writer": 12000, "chat": 4000})),
    "a proposal proposed again once confirmed": ((start(), *ANN), propose("p-ann", key="ann")),
    "a proposal proposed again once rejected": ((start(), propose("p"), reject("p")), propose("p")),
    "a draft submitted again once accepted": ((start(), plan(1), submit(1, "d"), accept("d")), submit(1, "d")),
    "a draft submitted again once rejected": ((start(), plan(1), submit(1, "d"), reject_draft("d")), submit(1, "d")),
    "a confirmation again after a later revision of the entry": (
        (start(), *ANN, propose("p2", key="ann", valid_from=7), confirm("p2")), confirm("p-ann")),
    "accepting again the draft whose text the chapter has, after another was rejected": (
        (start(), plan(1), submit(1, "d1"), accept("d1"), submit(1, "d2"), reject_draft("d2")), accept("d1")),
    "an edit back to the ingested text": ((ingest("guide.md", GUIDE),), edit(OIL, "Whale oil only.")),
    "an edit whose body normalises to the chunk's": ((ingest("guide.md", GUIDE),), edit(OIL, "Whale oil only.\n")),
    "a volume summary recorded again": ((start(), volume_summary(1, "v")), volume_summary(1, "v")),
    "a dismissal again once the draft is accepted": (
        (start(), plan(1), submit(1, "d"), dismiss("d", reason="why"), accept("d")), dismiss("d", reason="why")),
    "accepting again with the override reason recorded": (
        (start(), plan(1), submit(1, "d"), accept("d", "meant")), accept("d", "meant")),
    "accepting again with no override reason, once accepted with one": (
        (start(), plan(1), submit(1, "d"), accept("d", "meant")), accept("d")),
    "a scene card with its pov again": ((start(), plan(1), *ANN, scene(1, "a", pov="ann")), scene(1, "a", pov="ann")),
    "knowledge corrected back to what was recorded": (
        (start(), *ANN, know("ann", "ann", 4, "deduced"), know("ann", "ann", 2, "told"),
         know("ann", "ann", 4, "deduced")),
        know("ann", "ann", 4, "deduced")),
}


@pytest.mark.parametrize("case", list(EQUIVALENT))
def test_a_command_whose_outcome_is_the_state_already_changes_nothing(case: str) -> None:
    before, command = EQUIVALENT[case]
    given(*before).when(again(command)).then()


def _differs(kind: str, why: str, code: str, field: str, **changes: Any) -> tuple[str, str, dict[str, Any], str, str]:
    return kind, why, again(SAME[kind][1], **changes), code, field


# A repeat of SAME's command with one thing changed, and the code that refuses it (as before).
REFUSED = [
    _differs("start_story", "another title", "story_id_must_be_unique", "story_id", title="Other"),
    _differs("start_story", "other guardrails", "story_id_must_be_unique", "story_id", style_guardrails=[]),
    _differs("start_story", "another contract", "story_id_must_be_unique", "story_id", output_contract="txt"),
    _differs("start_story", "other budgets", "story_id_must_be_unique", "story_id", budgets={}),
    _differs("plan_chapter", "another volume", "chapter_number_must_be_unique", "chapter", volume=1),
    _differs("plan_chapter", "other goals", "chapter_number_must_be_unique", "chapter", goals=["open the thread"]),
    _differs("plan_chapter", "goals reordered", "chapter_number_must_be_unique", "chapter",
             goals=["close the door", "open the thread"]),
    _differs("add_scene_card", "another summary", "scene_id_must_be_unique_in_chapter", "scene_id", summary="other"),
    _differs("add_scene_card", "other tags", "scene_id_must_be_unique_in_chapter", "scene_id", characters=[]),
    _differs("add_scene_card", "a pov", "scene_id_must_be_unique_in_chapter", "scene_id", pov="ann"),
    _differs("propose_canon", "another key", "proposal_id_must_be_unique", "proposal_id", key="bob"),
    _differs("propose_canon", "another name", "proposal_id_must_be_unique", "proposal_id", name="Annie"),
    _differs("propose_canon", "other aliases", "proposal_id_must_be_unique", "proposal_id", aliases=[]),
    _differs("propose_canon", "another text", "proposal_id_must_be_unique", "proposal_id", text="other"),
    _differs("propose_canon", "other fields", "proposal_id_must_be_unique", "proposal_id", fields={}),
    _differs("propose_canon", "other tags", "proposal_id_must_be_unique", "proposal_id", tags=[]),
    _differs("propose_canon", "another valid_from", "proposal_id_must_be_unique", "proposal_id", valid_from=2),
    _differs("reject_canon", "another reason", "rejected_proposal_cannot_be_rejected", "proposal_id", reason="other"),
    _differs("retire_canon", "another reason", "only_confirmed_canon_can_be_retired", "valid_from", reason="left"),
    _differs("retire_canon", "a later chapter", "only_confirmed_canon_can_be_retired", "valid_from", valid_from=9),
    _differs("submit_draft", "another text", "draft_id_must_be_unique", "draft_id", text="other"),
    _differs("reject_draft", "another reason", "rejected_draft_cannot_be_rejected", "draft_id", reason="other"),
    _differs("dismiss_finding", "another reason", "finding_already_dismissed", "finding_id", reason="other"),
]


@pytest.mark.parametrize(("kind", "why", "differing", "code", "field"), REFUSED, ids=[f"{k}: {w}" for k, w, *_ in REFUSED])
def test_a_differing_repeat_is_still_refused_by_its_rule(kind: str, why: str, differing: dict[str, Any], code: str,
                                                         field: str) -> None:
    before, command = SAME[kind]
    given(*before, command).when(differing).then_error(code, field)


# Repeats that the state, not the command, makes differ: refused as before.
REFUSED_BY_STATE = {
    "confirming a rejected proposal": (
        (start(), propose("p"), reject("p")), confirm("p"), "rejected_proposal_cannot_be_confirmed", "proposal_id"),
    "rejecting a confirmed proposal": (
        (start(), propose("p"), confirm("p")), reject("p"), "confirmed_proposal_cannot_be_rejected", "proposal_id"),
    "accepting a rejected draft": (
        (start(), plan(1), submit(1, "d"), reject_draft("d")), accept("d"), "rejected_draft_cannot_be_accepted",
        "draft_id"),
    "accepting again a draft whose text a later one replaced": (
        (start(), plan(1), submit(1, "d1", "one"), accept("d1"), submit(1, "d2", "two"), accept("d2")), accept("d1"),
        "draft_already_accepted", "draft_id"),
    "rejecting an accepted draft": (
        (start(), plan(1), submit(1, "d"), accept("d")), reject_draft("d"), "accepted_draft_cannot_be_rejected",
        "draft_id"),
    "accepting again with an override reason the acceptance did not record": (
        (start(), plan(1), submit(1, "d"), accept("d", "meant")), accept("d", "other"), "draft_already_accepted",
        "draft_id"),
    "accepting again with an override reason, once accepted with none": (
        (start(), plan(1), submit(1, "d"), accept("d")), accept("d", "meant"), "draft_already_accepted", "draft_id"),
    "dismissing a finding of an accepted draft": (
        (start(), plan(1), submit(1, "d"), accept("d")), dismiss("d"), "accepted_draft_findings_cannot_be_dismissed",
        "draft_id"),
    "submitting a draft id again for another chapter": (
        (start(), plan(1), plan(2), submit(1, "d")), submit(2, "d"), "draft_id_must_be_unique", "draft_id"),
}


@pytest.mark.parametrize("case", list(REFUSED_BY_STATE))
def test_a_repeat_the_state_forbids_is_still_refused(case: str) -> None:
    before, command, code, field = REFUSED_BY_STATE[case]
    given(*before).when(again(command)).then_error(code, field)


# Repeats that would change the state are no no-ops: applied, with these events.
CHANGED = {
    "another chapter summary": ((start(), plan(1), chapter_summary(1, "it rained")), chapter_summary(1, "it snowed"),
                                [("Chapter.SummaryRecorded", {"text": "it snowed"})]),
    "another volume summary": ((start(), volume_summary(1, "v")), volume_summary(1, "w"),
                               [("Volume.SummaryRecorded", {"text": "w"})]),
    "a changed document": ((ingest("guide.md", GUIDE),), ingest("guide.md", GUIDE.replace("Whale", "Colza")),
                           [("Document.ChunkEdited", {"chunk_id": OIL})]),
    "another chunk text": ((ingest("guide.md", GUIDE), edit(OIL, "Colza oil only.")), edit(OIL, "Whale oil only."),
                           [("Document.ChunkEdited", {"chunk_id": OIL})]),
    "accepting another draft of an accepted chapter": (
        (start(), plan(1), submit(1, "d1", "one"), accept("d1"), submit(1, "d2", "two")), accept("d2"),
        ["Draft.Accepted", ("Chapter.TextAccepted", {"draft_id": "d2", "text": "two"})]),
    "dismissing another finding of the same draft": (
        (start(), plan(1), submit(1, "d"), dismiss("d")), dismiss("d", "fnd_fedcba9876543210"),
        [("Draft.FindingDismissed", {"finding_id": "fnd_fedcba9876543210"})]),
    "another chapter for what a character knows (a correction)": (
        SAME["record_knowledge"][0] + (SAME["record_knowledge"][1],), know("ann", "bob", 6, "told by Harl"),
        [("CanonEntry.KnowledgeRecorded", {"character": "ann", "key": "bob", "chapter": 6})]),
    "another way a character knows it (a correction)": (
        SAME["record_knowledge"][0] + (SAME["record_knowledge"][1],), know("ann", "bob", 4, "overheard"),
        [("CanonEntry.KnowledgeRecorded", {"chapter": 4, "how": "overheard"})]),
    "retiring again where a later revision brought the entry back": (
        (start(), *ANN, retire("character", "ann", 5, "died"), propose("p2", key="ann", valid_from=5), confirm("p2")),
        retire("character", "ann", 5, "died"), [("CanonEntry.Retired", {"valid_from": 5})]),
}


@pytest.mark.parametrize("case", list(CHANGED))
def test_a_repeat_that_would_change_the_state_is_applied(case: str) -> None:
    before, command, events = CHANGED[case]
    given(*before).when(again(command)).then(*events)
