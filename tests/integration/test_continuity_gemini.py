"""``canon check --provider gemini`` (issue 42, the LLM ceiling): the real google-genai SDK against
the fake Gemini server. One reserved call reviews a draft against its evidence table and adds a
finding; asking again is answered from the cache (no call); a 429, an exhausted day, 5xx after
the retries and an answer not in the schema fall back to the rules' findings, the stage saying
why, the quota ledger settled; the model's findings are validated (span, entry, evidence)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from canon_ledger.application.continuity import read_steps
from canon_ledger.application.knowledge.quota import QuotaPolicy
from canon_ledger.application.packets.ports import DraftView
from canon_ledger.domain import ids
from canon_ledger.domain.continuity_rules import TYPES
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.providers.gemini_judge import (MARKER, PREFIX, FindingSchema, FindingsSchema,
                                                                evidence_table, validated)
from tests import cli_runner
from tests.conftest import sqlite_store
from tests.fakes.gemini_server import FakeGemini
from tests.helpers import applied

STORY = "ford"
DRAFT = "Mira waited at the gate. Harl walked into the hall, and Mira's blue eyes narrowed."
RULES = {"unavailable_character", "field_conflict"}  # what the rules find in DRAFT (Harl is dead; Mira's eyes are grey)


def _entry(key: str, name: str, valid_from: int, fields: dict[str, Any], n: int = 1) -> list[dict[str, Any]]:
    pid = f"{key}-{n}"
    return [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": STORY, "proposal_id": pid,
             "kind": "character", "key": key, "name": name, "aliases": [], "text": f"{name} of the ford.",
             "fields": fields, "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": STORY, "proposal_id": pid}]


def _story(services: Any) -> None:
    applied(services,
           {"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Ford",
            "style_guardrails": ["Past tense."], "output_contract": "Prose only."},
           *({"type": "plan_chapter", "command_id": f"plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
              "goals": [f"Chapter {n} at the ford"]} for n in (1, 2, 3)),
           *_entry("mira", "Mira", 1, {"eyes": "grey"}),
           *_entry("harl", "Harl", 1, {"state": "alive"}),
           *_entry("harl", "Harl", 2, {"state": "dead"}, n=2),
           {"type": "submit_draft", "command_id": "d-3", "story_id": STORY, "chapter": 3, "draft_id": "d3",
            "text": DRAFT},
           {"type": "submit_draft", "command_id": "d-3b", "story_id": STORY, "chapter": 3, "draft_id": "d3b",
            "text": DRAFT + " Mira left."})


def _services(url: str, **policy: int) -> Any:
    services = bootstrap(url, embedder="hashing", quota_policy=QuotaPolicy(**policy) if policy else None)
    _story(services)
    return services


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Any]:
    services = _services(sqlite_store(tmp_path / "canon.db"))
    yield services
    services.close()


def _check(s: Any, gemini: FakeGemini, key: str, draft: str = "d3") -> dict[str, Any]:
    check = s.continuity("gemini", api_key=key, base_url=gemini.url, timeout_ms=2_000, sleep=lambda _: None)
    return check.check(STORY, draft, provider="gemini").as_dict()


def _stage(report: dict[str, Any]) -> dict[str, Any]:
    (stage,) = [st for st in report["stages"] if st["step"] == "gemini-review"]
    return stage


def _calls(s: Any) -> dict[str, str]:
    """call_id -> state of today's gemini calls in the quota ledger."""
    day = s.quota.today().isoformat()
    return {c: v["state"] for c, v in s.ledger.repository.get(ids.quota_day_id("gemini", day)).calls.items()}


def _rules_only(s: Any) -> list[str]:
    return [f["id"] for f in s.continuity().check(STORY, "d3").as_dict()["findings"]]


def test_one_reserved_call_adds_a_finding_and_asking_again_hits_the_cache(
        store_url: str, gemini: FakeGemini, gemini_key: str) -> None:
    s = _services(store_url)
    try:
        report = _check(s, gemini, gemini_key)
        (call,) = gemini.calls("generate")
        prompt = call.body["contents"][0]["parts"][0]["text"]
        assert prompt.startswith(MARKER) and DRAFT in prompt and "Harl of the ford." in prompt
        assert call.body["generationConfig"]["responseMimeType"] == "application/json"
        types = [f["type"] for f in report["findings"]]
        assert set(types) == RULES | {f"{PREFIX}field_conflict"}
        (added,) = [f for f in report["findings"] if f["type"].startswith(PREFIX)]
        assert added["entry"] == {"kind": "character", "key": "harl", "name": "Harl"}
        assert added["span"] == {"start": DRAFT.index("Harl"), "end": DRAFT.index("Harl") + 4, "text": "Harl"}
        assert added["severity"] == "warning" and added["id"].startswith("fnd_")
        assert added["evidence"][0]["valid_from"] == 2
        stage = _stage(report)
        assert stage["status"] == "done" and stage["detail"].startswith("1 finding(s) added by gemini:gemini-2.5-flash")
        status = s.quota.status("gemini")["generate"]
        assert (status["spent"], status["continuity_spent"], status["continuity_cap"]) == (1, 1, 5)
        assert list(_calls(s).values()) == ["spent"]

        again = _check(s, gemini, gemini_key)
        assert len(gemini.calls("generate")) == 1 and s.quota.status("gemini")["generate"]["spent"] == 1
        assert again["findings"] == report["findings"] and "from cache, no call" in _stage(again)["detail"]
        # Another process on the store asks the same: the cache is in the store.
        other = bootstrap(store_url, embedder="hashing")
        try:
            assert _check(other, gemini, gemini_key)["findings"] == report["findings"]
        finally:
            other.close()
        assert len(gemini.calls("generate")) == 1
        # A dismissed model finding is not reported again (the rules' are kept).
        applied(s, {"type": "dismiss_finding", "command_id": "dismiss", "story_id": STORY, "draft_id": "d3",
                   "finding_id": added["id"], "reason": "a ghost, on purpose"})
        after = _check(s, gemini, gemini_key)
        assert {f["type"] for f in after["findings"]} == RULES and len(gemini.calls("generate")) == 1
    finally:
        s.close()


@pytest.mark.parametrize("behaviour", ["429", "429_minute"])
def test_a_429_falls_back_to_the_rules_and_settles_the_call(
        s: Any, gemini: FakeGemini, gemini_key: str, behaviour: str) -> None:
    gemini.script(behaviour, kind="generate")
    report = _check(s, gemini, gemini_key)
    assert [f["id"] for f in report["findings"]] == _rules_only(s)
    stage = _stage(report)
    assert stage["status"] == "skipped" and stage["detail"].startswith("quota: gemini answered 429")
    assert stage["detail"].endswith("no LLM review, the deterministic findings stand alone")
    assert gemini_key not in json.dumps(report)
    assert list(_calls(s).values()) == ["spent"]  # settled: the call was made
    assert bool(s.quota.status("gemini")["exhausted"]) == (behaviour == "429")
    # Nothing was cached: once the quota allows, the next check asks.
    if behaviour == "429_minute":
        assert any(f["type"].startswith(PREFIX) for f in _check(s, gemini, gemini_key)["findings"])
        assert len(gemini.calls("generate")) == 2


def test_an_exhausted_day_or_a_spent_cap_sends_nothing(tmp_path: Path, gemini: FakeGemini, gemini_key: str) -> None:
    s = _services(sqlite_store(tmp_path / "cap.db"), continuity_per_day=1)
    try:
        assert _stage(_check(s, gemini, gemini_key))["status"] == "done"
        capped = _check(s, gemini, gemini_key, "d3b")  # another draft: the day's one continuity call is spent
        assert _stage(capped)["detail"] == ("quota: continuity may use 1 generate calls a day; all are used; "
                                            "no LLM review, the deterministic findings stand alone")
        s.quota.exhaust("gemini", "gemini answered 429 RESOURCE_EXHAUSTED: daily quota exhausted")
        exhausted = _check(s, gemini, gemini_key, "d3b")
        assert _stage(exhausted)["status"] == "skipped" and "is exhausted for" in _stage(exhausted)["detail"]
        assert {f["type"] for f in exhausted["findings"]} == RULES
        assert len(gemini.calls("generate")) == 1 and list(_calls(s).values()) == ["spent"]
        assert s.quota.status("gemini")["refused"] == 2
        # The cached review still answers on an exhausted day.
        assert _stage(_check(s, gemini, gemini_key))["status"] == "done"
    finally:
        s.close()


@pytest.mark.parametrize("behaviours", [("wrong_schema",), ("invalid_json",), ("503", "503", "503", "503")])
def test_a_bad_answer_or_5xx_after_the_retries_falls_back(
        s: Any, gemini: FakeGemini, gemini_key: str, behaviours: tuple[str, ...]) -> None:
    gemini.script(*behaviours, kind="generate")
    report = _check(s, gemini, gemini_key)
    assert [f["id"] for f in report["findings"]] == _rules_only(s)
    stage = _stage(report)
    assert stage["status"] == "error" and stage["detail"].startswith("gemini:gemini-2.5-flash failed: gemini ")
    assert stage["detail"].endswith("; the deterministic findings stand alone")
    assert ("503" in stage["detail"]) == (behaviours[0] == "503")
    assert len(gemini.calls("generate")) == len(behaviours)
    assert list(_calls(s).values()) == ["spent"] * len(behaviours)  # each attempt its own settled call
    assert not s.quota.status("gemini")["exhausted"]


def test_findings_that_do_not_hold_up_are_dropped(s: Any) -> None:
    _rules_only(s)  # the canon read model caught up
    with s.packets.reader.snapshot(STORY) as snap:
        steps = read_steps(snap, STORY, DRAFT)
    table, shown = evidence_table(steps, 3)
    assert [(row["key"], [st["standing"] for st in row["steps"]]) for row in table] == [
        ("harl", ["earlier", "in force"]), ("mira", ["in force"])]
    harl = shown[("character", "harl")][-1]
    draft = DraftView("d3", 3, "submitted", DRAFT, 1)
    at = DRAFT.index("Harl")

    def finding(**change: Any) -> dict[str, Any]:
        base = {"type": "unavailable_character", "severity": "error",
                "entry": {"kind": "character", "key": "harl", "name": "Harl"},
                "span": {"start": at, "end": at + 4, "text": "Harl"},
                "evidence": [{"text": "made up", "valid_from": 99, "source": harl.source}], "message": " Harl  walks. "}
        return {**base, **change}

    answer = FindingsSchema.model_validate({"findings": [
        finding(),
        finding(span={"start": at + 1, "end": at + 5, "text": "Harl"}),  # moved to where "Harl" is: the same one
        finding(span={"start": len(DRAFT) - 2, "end": len(DRAFT) + 3, "text": "Zebulon"}),  # not in the draft
        finding(entry={"kind": "character", "key": "osk", "name": "Osk"}),  # not in the table
        finding(evidence=[{"text": "x", "valid_from": 1, "source": 10_000}]),  # cites no step of the table
        finding(message="the same finding again"),  # same id: kept once
    ]})
    (kept,) = [f.as_dict() for f in validated(answer, draft, shown)]
    assert kept["type"] == "llm:unavailable_character" and kept["message"] == "Harl walks."
    assert kept["evidence"] == [{"text": harl.text, "valid_from": 2, "source": harl.source, "hidden_until": None}]


def test_the_verb_with_gemini(tmp_path: Path, gemini: FakeGemini, gemini_key: str) -> None:
    db = sqlite_store(tmp_path / "cli.db")
    services = _services(db)
    services.close()
    env = {"CANON_EMBEDDER": "hashing", "GEMINI_API_KEY": gemini_key, "GOOGLE_GEMINI_BASE_URL": gemini.url,
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    gemini.script("ok", "429", kind="generate")
    runs = [cli_runner.canon("--db", db, "--format", "json", "check", "--story", STORY, "--draft", d,
                             "--provider", "gemini", env=env) for d in ("d3", "d3", "d3b")]
    assert [r.returncode for r in runs] == [1, 1, 1]  # the rules' errors stand either way
    first, cached, fallback = (json.loads(r.stdout) for r in runs)
    assert any(f["type"].startswith(PREFIX) for f in first["findings"]) and cached["findings"] == first["findings"]
    assert "from cache, no call" in _stage(cached)["detail"]
    assert _stage(fallback)["detail"].startswith("quota: gemini answered 429")
    assert [r.status for r in gemini.requests] == [200, 429]
    assert all(gemini_key not in r.stdout + r.stderr for r in runs)
    no_key = cli_runner.canon("--db", db, "--format", "json", "check", "--story", STORY, "--draft", "d3",
                              "--provider", "gemini", env={"CANON_EMBEDDER": "hashing", "GEMINI_API_KEY": None})
    assert no_key.returncode == 2 and json.loads(no_key.stdout)["error"]["code"] == "provider_unavailable"


def test_the_model_may_answer_every_type_the_rules_know() -> None:
    assert set(get_args(FindingSchema.model_fields["type"].annotation)) == {*TYPES, "other"}
