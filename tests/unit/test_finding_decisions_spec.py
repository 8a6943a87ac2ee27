"""Issue 42, the write side of the continuity check: a person dismisses a finding of a submitted
draft as intentional (``dismiss_finding`` -> ``Draft.FindingDismissed``), and an accept may say
why it overrode the check's findings (``accept_draft.override_reason`` ->
``Draft.FindingsOverridden`` just before ``Draft.Accepted``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from canon_ledger.domain import bounds as b
from canon_ledger.domain.commands import AcceptDraft, parse_command
from canon_ledger.domain.errors import InvalidCommand
from tests.unit.spec import (
    FINDING,
    accept,
    dismiss,
    given,
    plan,
    reject_draft,
    start,
    submit,
)

OTHER = "fnd_fedcba9876543210"


def test_dismissing_a_finding_of_a_submitted_draft() -> None:
    given(start(), plan(1), submit(1, "d")).when(dismiss("d", FINDING, "the twin, on purpose")).then(
        ("Draft.FindingDismissed", {"story_id": "s", "draft_id": "d", "chapter": 1, "finding_id": FINDING,
                                    "reason": "the twin, on purpose"}))


def test_each_finding_is_dismissed_on_its_own() -> None:
    given(start(), plan(1), submit(1, "d"), dismiss("d", FINDING)).when(dismiss("d", OTHER, "also meant")).then(
        ("Draft.FindingDismissed", {"finding_id": OTHER, "reason": "also meant"}))
    # The same finding id on another draft is another finding.
    given(start(), plan(1), submit(1, "d"), submit(1, "e", "other text"), dismiss("d")).when(dismiss("e")).then(
        ("Draft.FindingDismissed", {"draft_id": "e", "finding_id": FINDING}))


def test_the_same_dismissal_again_changes_nothing() -> None:
    given(start(), plan(1), submit(1, "d"), dismiss("d", reason="why")).when(dismiss("d", reason="why")).then()


def test_a_dismissed_finding_keeps_its_reason() -> None:
    given(start(), plan(1), submit(1, "d"), dismiss("d", reason="why")).when(dismiss("d", reason="other")).then_error(
        "finding_already_dismissed", "finding_id")


def test_only_a_submitted_draft_s_findings_can_be_dismissed() -> None:
    given(start(), plan(1), submit(1, "d"), accept("d")).when(dismiss("d")).then_error(
        "accepted_draft_findings_cannot_be_dismissed", "draft_id")
    given(start(), plan(1), submit(1, "d"), reject_draft("d")).when(dismiss("d")).then_error(
        "rejected_draft_findings_cannot_be_dismissed", "draft_id")
    # What was dismissed before the decision stays dismissed; asking for it again changes nothing.
    given(start(), plan(1), submit(1, "d"), dismiss("d", reason="why"), reject_draft("d")).when(
        dismiss("d", reason="why")).then()


def test_dismissing_needs_a_known_draft_and_story() -> None:
    given(start()).when(dismiss("nope")).then_error("unknown_draft", "draft_id")
    given().when(dismiss("d")).then_error("unknown_story", "story_id")


def test_accepting_with_an_override_reason_records_it_just_before_the_acceptance() -> None:
    events = given(start(), plan(1), submit(1, "d", "the text")).when(accept("d", "the ghost is meant")).then(
        ("Draft.FindingsOverridden", {"story_id": "s", "draft_id": "d", "chapter": 1, "reason": "the ghost is meant"}),
        "Draft.Accepted", ("Chapter.TextAccepted", {"draft_id": "d", "text": "the text"}))
    assert [type(e).__qualname__ for e in events[:2]] == ["Draft.FindingsOverridden", "Draft.Accepted"]
    assert events[1].originator_version == events[0].originator_version + 1


def test_accepting_without_an_override_reason_is_as_before() -> None:
    given(start(), plan(1), submit(1, "d")).when(accept("d")).then("Draft.Accepted", "Chapter.TextAccepted")


def test_an_override_reason_does_not_reopen_a_decided_draft() -> None:
    given(start(), plan(1), submit(1, "d"), reject_draft("d")).when(accept("d", "meant")).then_error(
        "rejected_draft_cannot_be_accepted", "draft_id")
    given(start(), plan(1), submit(1, "d"), accept("d")).when(accept("d", "meant")).then_error(
        "draft_already_accepted", "draft_id")
    given(start(), plan(1), submit(1, "d", "one"), accept("d", "meant"), submit(1, "e", "two"), accept("e")).when(
        accept("d", "meant")).then_error("draft_already_accepted", "draft_id")
    given(start(), plan(1), submit(1, "d"), accept("d", "meant")).when(accept("d", "meant")).then()


def _command(kind: str, **fields: object) -> dict[str, object]:
    base = {"accept_draft": accept("d"), "dismiss_finding": dismiss("d")}[kind]
    return {"command_id": "c", **base, **fields}


@pytest.mark.parametrize(("kind", "field", "value"), [
    ("dismiss_finding", "finding_id", "fnd_0123456789ABCDEF"),  # uppercase
    ("dismiss_finding", "finding_id", "fnd_0123456789abcde"),  # 15 digits
    ("dismiss_finding", "finding_id", "fnd_0123456789abcdef0"),  # 17
    ("dismiss_finding", "finding_id", "fnd_0123456789abcdeg"),
    ("dismiss_finding", "finding_id", "xyz_0123456789abcdef"),
    ("dismiss_finding", "finding_id", " fnd_0123456789abcdef"),
    ("dismiss_finding", "finding_id", "fnd_0123456789abcdef\n"),
    ("dismiss_finding", "finding_id", 7),
    ("dismiss_finding", "reason", ""),
    ("dismiss_finding", "reason", "   "),
    ("dismiss_finding", "reason", "x" * (b.MAX_LINE_TEXT + 1)),
    ("dismiss_finding", "reason", "a\x00b"),
    ("dismiss_finding", "reason", None),
    ("accept_draft", "override_reason", ""),
    ("accept_draft", "override_reason", " "),
    ("accept_draft", "override_reason", "x" * (b.MAX_LINE_TEXT + 1)),
    ("accept_draft", "override_reason", "\ud800"),
    ("accept_draft", "override_reason", 3),
])
def test_values_out_of_bounds_are_invalid_fields(kind: str, field: str, value: object) -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_command(_command(kind, **{field: value}))
    assert (refused.value.code, refused.value.field) == ("invalid_field", field), refused.value.as_dict()


def test_the_bounds_themselves_are_accepted() -> None:
    assert parse_command(_command("dismiss_finding", reason="x" * b.MAX_LINE_TEXT))
    assert parse_command(_command("accept_draft", override_reason="x" * b.MAX_LINE_TEXT, story_id="s"))
    assert parse_command(_command("accept_draft", override_reason=None)) == parse_command(_command("accept_draft"))
    for missing in ("finding_id", "reason", "draft_id"):
        data = _command("dismiss_finding")
        del data[missing]
        with pytest.raises(InvalidCommand) as refused:
            parse_command(data)
        assert (refused.value.code, refused.value.field) == ("missing_field", missing)


def test_an_accept_without_an_override_keeps_the_digest_it_had() -> None:
    """Receipts store a command's digest: an accept_draft stored before ``override_reason``
    existed, retried now, must still be a duplicate, not ``command_id_must_identify_one_command``."""
    before = {"command_id": "c", "story_id": "s", "type": "accept_draft", "draft_id": "d"}
    old = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    command = parse_command(before)
    assert isinstance(command, AcceptDraft) and command.digest() == old
    assert parse_command({**before, "override_reason": "meant"}).digest() != old
