"""Issue 42, on both stores: what people decide about a draft's continuity findings reaches the
authoring read model (v3). A finding dismissed as intentional (``Draft.FindingDismissed``) is a row
of ``authoring_dismissed`` that ``SqlDrafts.draft`` (the qa packet's and the check's read of a draft)
and ``StoryViews.drafts`` give back with its reason and source position; an accept's override reason
(``Draft.FindingsOverridden``) is the draft row's ``override_reason``. A rebuild gives the same
rows, and a build an earlier authoring schema made is refused until ``canon rebuild``."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.read_store import engines
from canon_ledger.infrastructure.stores import store_config
from canon_ledger.projections import authoring
from canon_ledger.projections.read_models import ProjectionSpec, ReadModels
from tests import cli_runner

STORY = "tide"
A, B, C = "fnd_00000000000000aa", "fnd_00000000000000bb", "fnd_ffffffffffffffff"


def _cmd(command_id: str, **fields: Any) -> Any:
    return parse_command({"command_id": command_id, "story_id": STORY, **fields})


def _apply(s: Any, *commands: Any) -> list[Any]:
    results = s.ledger.apply(list(commands))
    assert all(r.ok for r in results), [r.as_dict() for r in results if not r.ok]
    return results


def _dismiss(command_id: str, draft: str, finding: str, reason: str) -> Any:
    return _cmd(command_id, type="dismiss_finding", draft_id=draft, finding_id=finding, reason=reason)


def _positions(s: Any, name: str) -> dict[tuple[str, ...], int]:
    """Each ``name`` event's position, by (draft_id[, finding_id])."""
    return {(e.draft_id, *((e.finding_id,) if hasattr(e, "finding_id") else ())): p
            for p, e in s.ledger.event_log.read(1, 10_000) if type(e).__qualname__ == name}


@pytest.fixture
def s(rs: Any) -> Any:
    _apply(rs,
           _cmd("start", type="start_story", title="Tide", style_guardrails=[], output_contract=""),
           *(_cmd(f"plan-{n}", type="plan_chapter", chapter=n, volume=1, goals=[]) for n in (1, 2)),
           _cmd("d1", type="submit_draft", chapter=1, draft_id="d1", text="Mara walks in, though she drowned."),
           _cmd("d2", type="submit_draft", chapter=2, draft_id="d2", text="Mara's eyes are green."),
           _cmd("d3", type="submit_draft", chapter=2, draft_id="d3", text="A quiet chapter."),
           _dismiss("x-b", "d1", B, "her ghost, on purpose"),
           _dismiss("x-a", "d1", A, "a dream"),
           _dismiss("x-c", "d2", C, "a lie she tells"),
           _cmd("acc-1", type="accept_draft", draft_id="d1", override_reason="the ghost chapter is meant"),
           _cmd("acc-3", type="accept_draft", draft_id="d3"))
    return rs


def test_dismissals_and_the_override_reason_reach_the_read_model_and_the_draft_port(s: Any,
                                                                                  store_url: str) -> None:
    dismissed = _positions(s, "Draft.FindingDismissed")
    overridden = _positions(s, "Draft.FindingsOverridden")
    assert list(overridden) == [("d1",)]
    accepted = _positions(s, "Draft.Accepted")
    assert accepted[("d1",)] == overridden[("d1",)] + 1  # recorded just before the acceptance

    end = s.ledger.event_log.position()
    d1 = s.packets.drafts.draft(STORY, "d1", end)
    assert d1.status == "accepted"
    assert d1.dismissed == ((A, "a dream", dismissed[("d1", A)]),
                            (B, "her ghost, on purpose", dismissed[("d1", B)]))  # by finding id
    assert s.packets.drafts.draft(STORY, "d2", end).dismissed == ((C, "a lie she tells", dismissed[("d2", C)]),)
    assert s.packets.drafts.draft(STORY, "d3", end).dismissed == ()
    assert s.packets.drafts.draft(STORY, "nope", end) is None

    rows = {r["draft_id"]: r for r in s.views().drafts(STORY)}
    assert rows["d1"]["override_reason"] == "the ghost chapter is meant" and rows["d1"]["status"] == "accepted"
    assert rows["d1"]["dismissed"] == [{"finding_id": A, "reason": "a dream", "source": dismissed[("d1", A)]},
                                       {"finding_id": B, "reason": "her ghost, on purpose",
                                        "source": dismissed[("d1", B)]}]
    assert rows["d2"]["override_reason"] is None and rows["d2"]["status"] == "submitted"
    assert rows["d2"]["dismissed"] == [{"finding_id": C, "reason": "a lie she tells", "source": dismissed[("d2", C)]}]
    assert rows["d3"]["override_reason"] is None and rows["d3"]["dismissed"] == []
    # Filtered by chapter or status, each draft still carries its own dismissals.
    assert [(r["draft_id"], r["dismissed"]) for r in s.views().drafts(STORY, status="submitted")] == [
        ("d2", rows["d2"]["dismissed"])]
    assert [r["draft_id"] for r in s.views().drafts(STORY, chapter=1)] == ["d1"]

    listed = cli_runner.canon("--db", store_url, "drafts", "--story", STORY).stdout  # the CLI's text view
    assert "2 finding(s) dismissed; accepted over findings: the ghost chapter is meant" in listed, listed

    before = (s.views().drafts(STORY), s.packets.drafts.draft(STORY, "d1", end))
    s.authoring.rebuild()
    assert (s.views().drafts(STORY), s.packets.drafts.draft(STORY, "d1", end)) == before


def test_repeats_are_answered_like_every_command_s(s: Any) -> None:
    position = s.ledger.event_log.position()
    [retry] = s.ledger.apply([_dismiss("x-c", "d2", C, "a lie she tells")])  # the same command id
    assert retry.status == "duplicate"
    [same] = s.ledger.apply([_dismiss("x-c-again", "d2", C, "a lie she tells")])
    assert same.status == "unchanged"
    [other] = s.ledger.apply([_dismiss("x-c-other", "d2", C, "another reason")])
    assert other.status == "rejected" and other.error.code == "finding_already_dismissed"
    [late] = s.ledger.apply([_dismiss("x-late", "d1", C, "too late")])
    assert late.status == "rejected" and late.error.code == "accepted_draft_findings_cannot_be_dismissed"
    [reused] = s.ledger.apply([_dismiss("x-c", "d2", C, "another reason")])  # the id names another command
    assert reused.status == "rejected" and reused.error.code == "command_id_must_identify_one_command"
    [again] = s.ledger.apply([_cmd("acc-1b", type="accept_draft", draft_id="d1",
                                   override_reason="the ghost chapter is meant")])
    assert again.status == "unchanged"
    [changed] = s.ledger.apply([_cmd("acc-1c", type="accept_draft", draft_id="d1", override_reason="other")])
    assert changed.status == "rejected" and changed.error.code == "draft_already_accepted"
    [plain] = s.ledger.apply([_cmd("acc-3", type="accept_draft", draft_id="d3")])  # a retry: no override
    assert plain.status == "duplicate"
    # Refusals and repeats write nothing but the receipts of what changed nothing.
    assert [type(e).__qualname__ for _, e in s.ledger.event_log.read(position + 1, 100)] == [
        "CommandReceipt.Recorded"] * 2
    rows = {r["draft_id"]: r for r in s.views().drafts(STORY)}
    assert [d["reason"] for d in rows["d2"]["dismissed"]] == ["a lie she tells"]


def test_a_build_of_the_earlier_authoring_schema_is_refused_until_rebuilt(s: Any, store_url: str) -> None:
    read, write = engines(store_config(store_url))
    try:
        old = ReadModels(ProjectionSpec("authoring", 2, authoring.authoring_tables, authoring.AuthoringProjection),
                         s.ledger.event_log, write, read)
        assert old.rebuild().new.version == 2
        position = s.ledger.event_log.position()
        with pytest.raises(CanonError) as refused:
            s.views().drafts(STORY)
        assert refused.value.code == "read_model_outdated" and "run `canon rebuild`" in refused.value.message
        with pytest.raises(CanonError) as draft:
            s.packets.drafts.draft(STORY, "d2", position)
        assert draft.value.code == "read_model_outdated"
        assert s.ledger.event_log.position() == position
        report = s.authoring.rebuild()
        assert (report.old.version, report.new.version) == (2, authoring.VERSION) == (2, 3)
        assert [len(r["dismissed"]) for r in s.views().drafts(STORY)] == [2, 1, 0]
    finally:
        read.dispose()
        write.dispose()


def test_the_api_takes_the_decisions_from_author_keys_only_and_shows_them(store_url: str) -> None:
    """Dismissing a finding is an author's decision, like accepting a draft: POST /v1/commands
    needs author scope (a worker key is 403), a key limited to another story cannot name this
    one, and the drafts route shows what was decided."""
    from fastapi.testclient import TestClient

    from canon_ledger.infrastructure.http.app import create_app

    setup = [{"type": "start_story", "command_id": "h-start", "story_id": STORY, "title": "Tide",
              "style_guardrails": [], "output_contract": ""},
             {"type": "plan_chapter", "command_id": "h-plan", "story_id": STORY, "chapter": 1, "volume": 1,
              "goals": []},
             {"type": "submit_draft", "command_id": "h-d1", "story_id": STORY, "chapter": 1, "draft_id": "d1",
              "text": "Mara walks in."},
             {"type": "submit_draft", "command_id": "h-d2", "story_id": STORY, "chapter": 1, "draft_id": "d2",
              "text": "Mara rows."}]
    dismissal = {"type": "dismiss_finding", "command_id": "h-x", "story_id": STORY, "draft_id": "d1",
                 "finding_id": A, "reason": "a dream"}
    accept = {"type": "accept_draft", "command_id": "h-acc", "story_id": STORY, "draft_id": "d2",
              "override_reason": "meant"}
    with TestClient(create_app(store_url, embedder="hashing"), raise_server_exceptions=False) as client:
        keys = client.app.state.ctx.keys
        token = {scope: keys.create(scope, [], None)[0] for scope in ("worker", "author")}
        other = keys.create("author", ["another-story"], None)[0]

        def post(body: Any, key: str) -> Any:
            return client.post("/v1/commands", json=body, headers={"Authorization": f"Bearer {key}"})

        assert post(setup, token["author"]).status_code == 200
        for command in (dismissal, accept):
            refused = post(command, token["worker"])
            assert refused.status_code == 403 and refused.json()["code"] == "forbidden", refused.text
            elsewhere = post(command, other)
            assert elsewhere.json()["results"][0]["error"]["code"] == "unknown_story", elsewhere.text
            applied = post(command, token["author"])
            assert applied.status_code == 200 and applied.json()["results"][0]["status"] == "applied", applied.text
        drafts = client.get(f"/v1/stories/{STORY}/drafts", headers={"Authorization": f"Bearer {token['author']}"})
        assert drafts.status_code == 200, drafts.text
        rows = {d["draft_id"]: d for d in drafts.json()["drafts"]}
        assert [(d["finding_id"], d["reason"]) for d in rows["d1"]["dismissed"]] == [(A, "a dream")]
        assert rows["d1"]["override_reason"] is None and rows["d2"]["override_reason"] == "meant"
        assert rows["d2"]["status"] == "accepted" and rows["d2"]["dismissed"] == []
