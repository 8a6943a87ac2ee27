"""``canon summarize`` (``application.summaries``) on both stores: summaries of imported chapters
reach the next chapter's writer packet (P2) as ordinary ``record_chapter_summary`` commands, an
author's summary is never replaced, running again appends nothing, volumes are summarised once
complete; with Gemini (the real SDK against the fake server), one reserved call per chapter, a
run that stops cleanly on the day's quota (refused reservation or 429) and resumes the next day
where it stopped; and the verb itself: its report, its refusals (bad ranges, unknown story, no
key), which write nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from canon_ledger.application.knowledge.quota import QuotaPolicy
from canon_ledger.application.manuscript_import import import_manuscript
from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.summaries import chapter_command_id
from canon_ledger.domain import ids
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.manuscript import split
from canon_ledger.domain.summary import METHOD, summarise
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests import cli_runner
from tests.conftest import sqlite_store
from tests.fakes.gemini_server import FakeGemini

STORY = "quay"
MANUSCRIPT = """PART ONE

Chapter 1

Ilse woke at dawn on the Quay. The lamps of the Quay were out, every one of them. Oskar had gone
in the night, and his lamp with him.

Chapter 2

Oskar left the city by the river gate. Nobody saw him go. The guard at the river gate slept.

PART TWO

Chapter 3

The river ran clear at last. Ilse followed the silt upriver to the old post, where the lamps
had burned all winter.

Chapter 4

At the old post Ilse found Oskar's lamp, still warm. She lit it and went on up the river.
"""
TEXT = {c.number: c.text for c in split(MANUSCRIPT).chapters}
AUTHOR_2 = "Oskar slips out by the river gate while the guard sleeps."
AUTHOR_1 = "Ilse finds the Quay dark and Oskar gone."


@pytest.fixture
def hs(store_url: str) -> Iterator[Any]:
    """Services on the hashing embedder, the manuscript imported (4 chapters, 2 volumes)."""
    services = bootstrap(store_url, embedder="hashing")
    try:
        report = import_manuscript(services.ledger, split(MANUSCRIPT), STORY, title="The Quay", new_story=True)
        assert report.failed is None and len(report.new_drafts) == 4
        yield services
    finally:
        services.close()


def _author(services: Any, chapter: int, text: str) -> None:
    [result] = services.ledger.apply([parse_command({
        "type": "record_chapter_summary", "command_id": f"author-{chapter}-{len(text)}", "story_id": STORY,
        "chapter": chapter, "text": text})])
    assert result.status == "applied", result.as_dict()


def _summary(services: Any, chapter: int) -> str | None:
    return services.ledger.repository.get(ids.chapter_id(STORY, chapter)).summary


def _recent(services: Any, chapter: int) -> dict[tuple[str, str, str], str]:
    """(tier, kind, key) -> text of the summaries in the writer packet of ``chapter``."""
    packet = services.packet(Request(STORY, "writer", chapter), record=False)
    return {(i.tier, i.kind, i.key): i.text for i in packet.items
            if i.kind in ("chapter_summary", "volume_summary") and i.status == "included"}


def test_summaries_reach_the_next_packet_once_and_the_authors_summary_wins(hs: Any) -> None:
    _author(hs, 2, AUTHOR_2)
    report = hs.summarizer().run(STORY, 1, 3)
    assert [c["chapter"] for c in report.summarised] == [1, 3]
    assert report.skipped == [{"chapter": 2, "reason": "has_summary"}]  # the author's own
    assert [(v["volume"], v["outcome"], v.get("reason")) for v in report.volumes] == [
        (1, "summarised", None), (2, "skipped", "chapters_without_summary")]  # chapter 4 was not asked for
    assert (report.counts, report.stopped_reason, report.remaining, report.method) == ({"applied": 3}, "done", [], METHOD)
    assert _summary(hs, 2) == AUTHOR_2 and _summary(hs, 1) == summarise(TEXT[1])

    recent = _recent(hs, 4)  # the next chapter's writer packet
    assert summarise(TEXT[1]) in recent[("P2", "chapter_summary", "1")]
    assert AUTHOR_2 in recent[("P2", "chapter_summary", "2")]
    assert summarise(TEXT[3]) in recent[("P2", "chapter_summary", "3")]
    assert ("P3", "volume_summary", "1") in recent  # an earlier volume's summary

    # An ordinary command with a derived id: the same one again is a duplicate.
    [again] = hs.ledger.apply([parse_command({
        "type": "record_chapter_summary", "story_id": STORY, "chapter": 1, "text": summarise(TEXT[1]),
        "command_id": chapter_command_id(STORY, 1, TEXT[1], METHOD, summarise(TEXT[1]))})])
    assert again.status == "duplicate"

    position = hs.ledger.event_log.position()
    rerun = hs.summarizer().run(STORY, 1, 3)
    assert (rerun.summarised, rerun.counts, rerun.position) == ([], {}, position)  # nothing appended

    rest = hs.summarizer().run(STORY)
    assert [c["chapter"] for c in rest.summarised] == [4] and rest.first is None
    assert [(v["volume"], v["outcome"]) for v in rest.volumes] == [(1, "skipped"), (2, "summarised")]
    assert ("P2", "volume_summary", "2") in _recent(hs, 4)

    _author(hs, 1, AUTHOR_1)  # a later summary of the author's replaces ours, as any later summary does
    position = hs.ledger.event_log.position()
    last = hs.summarizer().run(STORY)
    assert (last.summarised, last.position) == ([], position)
    assert {"chapter": 1, "reason": "has_summary"} in last.skipped
    assert AUTHOR_1 in _recent(hs, 4)[("P2", "chapter_summary", "1")]


def test_a_summary_the_author_records_meanwhile_is_kept(hs: Any) -> None:
    from canon_ledger.domain.summary import ExtractiveSummariser

    class AuthorWritesToo(ExtractiveSummariser):
        """The extractive writer, while the author records chapter 3's summary in the meantime."""

        def summarise_chapter(self, title: str, number: int, text: str) -> str:
            if number == 3:
                _author(hs, 3, "The author's summary of chapter 3.")
            return super().summarise_chapter(title, number, text)

    from canon_ledger.application.summaries import Summarizer

    report = Summarizer(hs.ledger, hs.views, AuthorWritesToo(), hs.quota).run(STORY)
    assert [c["chapter"] for c in report.summarised] == [1, 2, 4]
    assert {"chapter": 3, "reason": "summarised_meanwhile"} in report.skipped
    assert _summary(hs, 3) == "The author's summary of chapter 3." and report.remaining == []


class Sleeps(list[float]):
    """Stands in for ``time.sleep`` between 5xx retries: records the delays, waits for none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _calls(services: Any) -> list[tuple[str, str]]:
    """(purpose, outcome) of every reserved call, and ("...", "refused") of every refusal, in order."""
    out: list[tuple[str, str]] = []
    for e in services.ledger.event_log.history():
        if e.type == "QuotaDay.Reserved":
            out.append((e.data["purpose"], e.data["call_id"]))
        elif e.type == "QuotaDay.Settled":
            out = [(p, e.data["outcome"]) if c == e.data["call_id"] else (p, c) for p, c in out]
        elif e.type == "QuotaDay.Refused":
            out.append((e.data["purpose"], "refused"))
    return out


def test_gemini_spends_one_reserved_call_per_chapter_stops_on_the_days_quota_and_resumes(
        store_url: str, gemini: FakeGemini, gemini_key: str) -> None:
    services = bootstrap(store_url, embedder="hashing", quota_policy=QuotaPolicy(summarize_per_day=3))
    try:
        import_manuscript(services.ledger, split(MANUSCRIPT), STORY, title="The Quay", new_story=True)
        day = [date(2030, 1, 1)]
        services.quota.today = lambda: day[0]
        summarizer = services.summarizer("gemini", api_key=gemini_key, base_url=gemini.url, timeout_ms=2_000)
        summarizer.sleep = Sleeps()

        # Day 1: chapter 1's answer is not a summary (failed: the run goes on); chapters 2 and 3 are
        # summarised; then the day's summarize share (3) is spent: the run stops before chapter 4.
        gemini.script("invalid_json", kind="generate")
        first = summarizer.run(STORY)
        assert [c["chapter"] for c in first.summarised] == [2, 3] and [f["chapter"] for f in first.failed] == [1]
        assert (first.stopped_reason, first.remaining, first.volumes) == ("quota", [1, 4], [])
        assert "summarize may use 3 generate calls a day" in first.detail
        assert len(gemini.calls("generate")) == 3
        assert _summary(services, 2) == gemini.summary("chapter", 2) and _summary(services, 1) is None

        again = summarizer.run(STORY)  # the same day: refused at once, nothing sent, nothing written
        assert (again.summarised, again.stopped_reason, again.remaining) == ([], "quota", [1, 4])
        assert len(gemini.calls("generate")) == 3

        # Day 2: it resumes with chapter 1; Gemini's 429 (its daily quota) stops it at chapter 4.
        day[0] += timedelta(days=1)
        gemini.script("ok", "429", kind="generate")
        second = summarizer.run(STORY)
        assert [c["chapter"] for c in second.summarised] == [1]
        assert (second.stopped_reason, second.remaining) == ("quota", [4]) and "429" in second.detail
        assert services.quota.status("gemini")["exhausted"]

        # Day 3: chapter 4 (a 503 retried: a second reserved call), volume 1, and the share is spent
        # before volume 2; day 4: volume 2.
        day[0] += timedelta(days=1)
        gemini.script("503", kind="generate")
        third = summarizer.run(STORY)
        assert [c["chapter"] for c in third.summarised] == [4] and summarizer.sleep == [0.5]
        assert [(v["volume"], v["outcome"]) for v in third.volumes] == [(1, "summarised")]
        assert (third.stopped_reason, third.remaining) == ("quota", [])
        day[0] += timedelta(days=1)
        fourth = summarizer.run(STORY)
        assert [(v["volume"], v["outcome"]) for v in fourth.volumes] == [(1, "skipped"), (2, "summarised")]
        assert fourth.stopped_reason == "done"
        status = services.quota.status("gemini")["generate"]
        assert (status["summarize_spent"], status["summarize_cap"], status["spent"]) == (1, 3, 1)
        assert services.ledger.repository.get(ids.volume_id(STORY, 2)).summary == gemini.summary("volume", 2)
        assert all(_summary(services, n) == gemini.summary("chapter", n) for n in (1, 2, 3, 4))

        position, sent = services.ledger.event_log.position(), len(gemini.requests)
        done = summarizer.run(STORY)  # nothing left: no call, nothing appended
        assert (done.summarised, done.position) == ([], position)
        assert len(gemini.requests) == sent == 9

        assert _calls(services) == [
            ("summarize:quay:1", "error"), ("summarize:quay:2", "ok"), ("summarize:quay:3", "ok"),
            ("summarize:quay:4", "refused"),
            ("summarize:quay:1", "refused"),
            ("summarize:quay:1", "ok"), ("summarize:quay:4", "error"),
            ("summarize:quay:4", "error"), ("summarize:quay:4", "ok"), ("summarize:quay:volume-1", "ok"),
            ("summarize:quay:volume-2", "refused"),
            ("summarize:quay:volume-2", "ok")]
        assert all(r.carried_key and not r.key_in_query for r in gemini.requests)
    finally:
        services.close()


# -- the verb ----------------------------------------------------------------------------------
def _canon(db: str, *args: str, **env: str) -> Any:
    return cli_runner.canon("--db", db, *args, env={"CANON_EMBEDDER": "hashing", **env})


def _position(db: str) -> int:
    events = _canon(db, "--format", "json", "events").stdout.splitlines()
    return int(json.loads(events[-1])["position"]) if events else 0


def test_the_verb_reports_refuses_bad_input_and_writes_nothing_twice(tmp_path: Path) -> None:
    db = sqlite_store(tmp_path / "cli.db")
    book = tmp_path / "quay.md"
    book.write_text(MANUSCRIPT.replace("\n", "\r\n"), encoding="utf-8")
    assert _canon(db, "import", "manuscript", str(book), "--story", STORY).returncode == 0
    start = _position(db)

    for bad in ("0", "5-3", "1-1000000000000000000000000000000", "1-", "-4", "x-y", "1000001"):
        out = _canon(db, "--format", "json", "summarize", "--story", STORY, "--chapters", bad)
        assert out.returncode == 2, (bad, out.stdout, out.stderr)
        error = json.loads(out.stdout)["error"]
        assert (error["code"], error["field"]) == ("usage_error", "chapters"), bad
    unknown = _canon(db, "--format", "json", "summarize", "--story", "nobody")
    assert unknown.returncode == 1 and json.loads(unknown.stdout)["error"]["code"] == "unknown_story"
    no_key = _canon(db, "--format", "json", "summarize", "--story", STORY, "--provider", "gemini")
    assert no_key.returncode == 2 and json.loads(no_key.stdout)["error"]["code"] == "provider_unavailable"
    assert "GEMINI_API_KEY" in no_key.stderr
    assert _position(db) == start  # no refusal wrote anything

    out = _canon(db, "--format", "json", "summarize", "--story", STORY, "--chapters", "2")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["chapters"] == {"first": 2, "last": 2} and [c["chapter"] for c in report["summarised"]] == [2]
    assert out.stderr == ""  # no bar with --format json

    text = _canon(db, "summarize", "--story", STORY)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"summarised 3 chapter(s) and 2 volume(s) of {STORY} ({METHOD}); skipped 1 (1 has_summary)",
        f"stopped: done; 0 chapter(s) still without a summary; log at {_position(db)}"]
    position = _position(db)
    again = json.loads(_canon(db, "--format", "json", "summarize", "--story", STORY).stdout)
    assert again["summarised"] == [] and again["position"] == position == _position(db)


def test_the_verb_with_gemini_never_prints_the_key(tmp_path: Path, gemini: FakeGemini, gemini_key: str) -> None:
    db = sqlite_store(tmp_path / "gem.db")
    book = tmp_path / "quay.md"
    book.write_text(MANUSCRIPT, encoding="utf-8")
    assert _canon(db, "import", "manuscript", str(book), "--story", STORY).returncode == 0
    gemini.script("ok", "ok", "ok", "429", kind="generate")  # Gemini's daily quota ends the day at chapter 4
    out = _canon(db, "summarize", "--story", STORY, "--provider", "gemini", GEMINI_API_KEY=gemini_key,
                 GOOGLE_GEMINI_BASE_URL=gemini.url, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"summarised 3 chapter(s) and 0 volume(s) of {STORY} (gemini:gemini-2.5-flash)"
    assert lines[-1].startswith("stopped: quota (gemini answered 429 RESOURCE_EXHAUSTED")
    assert "1 chapter(s) still without a summary (run again to resume)" in lines[-1]
    assert [r.status for r in gemini.requests] == [200, 200, 200, 429]
    assert gemini_key not in out.stdout + out.stderr and gemini_key[len("test-key-"):] not in out.stdout + out.stderr
