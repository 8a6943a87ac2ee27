"""Draft lifecycle: submitted -> accepted | rejected."""

from tests.unit.spec import accept, given, plan, reject_draft, start, submit


def test_submitting_a_draft():
    given(start(), plan(1)).when(submit(1, "d")).then(("Draft.Submitted", {"draft_id": "d", "chapter": 1}))


def test_a_draft_needs_a_planned_chapter():
    given(start()).when(submit(1, "d")).then_error("unknown_chapter", "chapter")


def test_draft_ids_are_unique():
    given(start(), plan(1), submit(1, "d")).when(submit(1, "d", "other text")).then_error(
        "draft_id_must_be_unique", "draft_id")


def test_a_rejected_draft_cannot_be_accepted():
    given(start(), plan(1), submit(1, "d"), reject_draft("d")).when(accept("d")).then_error(
        "rejected_draft_cannot_be_accepted", "draft_id"
    )


def test_a_draft_is_accepted_once():
    given(start(), plan(1), submit(1, "d"), accept("d")).when(accept("d")).then()  # again: nothing changes
    # Once a later draft's text replaced it, accepting it again is refused (it would change the text).
    given(start(), plan(1), submit(1, "d1", "one"), accept("d1"), submit(1, "d2", "two"), accept("d2")).when(
        accept("d1")).then_error("draft_already_accepted", "draft_id")


def test_an_accepted_draft_cannot_be_rejected():
    given(start(), plan(1), submit(1, "d"), accept("d")).when(reject_draft("d")).then_error(
        "accepted_draft_cannot_be_rejected", "draft_id"
    )


def test_rejecting_a_submitted_draft():
    given(start(), plan(1), submit(1, "d")).when(reject_draft("d", "off voice")).then(
        ("Draft.Rejected", {"reason": "off voice"})
    )


def test_unknown_drafts_are_refused():
    given(start()).when(accept("nope")).then_error("unknown_draft", "draft_id")
    given(start()).when(reject_draft("nope")).then_error("unknown_draft", "draft_id")


def test_a_later_draft_replaces_the_accepted_text():
    given(start(), plan(1), submit(1, "d1", "one"), accept("d1"), submit(1, "d2", "two")).when(accept("d2")).then(
        "Draft.Accepted", ("Chapter.TextAccepted", {"draft_id": "d2", "text": "two"})
    )
