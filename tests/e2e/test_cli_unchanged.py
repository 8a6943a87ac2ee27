"""`canon apply` answers `unchanged` (exit 0) for a command that changes nothing (issue 21):
the whole demo serial, applied again under new command ids, moves no story: each command
records only its receipt, so that its id names it for good (a retry is a ``duplicate``, a
different command under it is refused)."""

from __future__ import annotations

import json
from pathlib import Path

from canon_ledger.infrastructure.demo import SAMPLE
from tests.cli_runner import canon


def _answers(result) -> list[dict]:  # noqa: ANN001
    return [json.loads(line) for line in result.stdout.splitlines()]


def _log_end(store_url: str) -> int:
    events = canon("--db", store_url, "events", "--format", "json")
    assert events.returncode == 0, events.stderr
    return _answers(events)[-1]["position"]


def _under_new_ids(text: str) -> str:
    """Every command of ``text`` again, each under a command id never used."""
    return "".join(json.dumps({**(c := json.loads(line)), "command_id": f"again-{c['command_id']}"}) + "\n"
                   if line.strip() else "\n" for line in text.splitlines())


def test_the_demo_applied_again_under_new_command_ids_is_unchanged_line_by_line(store_url: str, tmp_path: Path) -> None:
    first = canon("--db", store_url, "apply", str(SAMPLE), "--format", "json")
    assert first.returncode == 0, first.stderr
    applied = _answers(first)
    assert applied and {r["status"] for r in applied} == {"applied"}
    end = _log_end(store_url)
    assert end == applied[-1]["position"]

    again = tmp_path / "again.jsonl"
    again.write_text(_under_new_ids(SAMPLE.read_text(encoding="utf-8")), encoding="utf-8")
    result = canon("--db", store_url, "apply", str(again), "--format", "json")
    assert result.returncode == 0, result.stderr
    answers = _answers(result)
    assert [(a["line"], a["status"]) for a in answers] == [(r["line"], "unchanged") for r in applied]
    assert [a["type"] for a in answers] == [r["type"] for r in applied]
    assert all(a["command_id"].startswith("again-") and "position" not in a for a in answers)
    # Nothing of the story moved: only one receipt per command, so that its new id names it for good.
    moved = [json.loads(line) for line in canon("--db", store_url, "events", "--from", str(end + 1), "--limit", "1000",
                                                "--format", "json").stdout.splitlines()]
    assert [e["type"] for e in moved] == ["CommandReceipt.Recorded"] * len(applied)
    end = _log_end(store_url)

    # Sent again, line by line or as one batch, they are duplicates of themselves, and the log stays.
    for mode in ((), ("--atomic",)):
        retried = canon("--db", store_url, "apply", str(again), *mode, "--format", "json")
        assert retried.returncode == 0, (mode, retried.stderr)
        assert {a["status"] for a in _answers(retried)} == {"duplicate"}, mode
        assert _log_end(store_url) == end, f"{mode}: the log moved"
    # An id that changed nothing cannot later name a different command.
    other = json.loads(again.read_text(encoding="utf-8").splitlines()[1])
    other = {**other, "goals": ["a different chapter plan"]} if other["type"] == "plan_chapter" else {**other, "title": "Other"}
    reused = canon("--db", store_url, "apply", "-", "--format", "json", stdin=json.dumps(other) + "\n")
    assert reused.returncode == 1
    assert _answers(reused)[0]["error"]["code"] == "command_id_must_identify_one_command"
    # The demo's own command ids are still its duplicates.
    retried = canon("--db", store_url, "apply", str(SAMPLE), "--format", "json")
    assert retried.returncode == 0 and {a["status"] for a in _answers(retried)} == {"duplicate"}
    assert _log_end(store_url) == end


def test_in_an_atomic_batch_a_repeat_of_an_earlier_command_is_unchanged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'batch.db'}"
    assert canon("--db", url, "init").returncode == 0
    start = {"type": "start_story", "command_id": "b-1", "story_id": "s", "title": "T", "style_guardrails": ["g"],
             "output_contract": "md"}
    plan = {"type": "plan_chapter", "command_id": "b-2", "story_id": "s", "chapter": 1, "volume": 1, "goals": ["g"]}
    batch = [start, plan, {**plan, "command_id": "b-3"}, {**start, "command_id": "b-4"}]
    result = canon("--db", url, "apply", "-", "--atomic", "--format", "json",
                   stdin="".join(json.dumps(c) + "\n" for c in batch))
    assert result.returncode == 0, result.stderr
    answers = _answers(result)
    assert [a["status"] for a in answers] == ["applied", "applied", "unchanged", "unchanged"]
    assert answers[0]["position"] == answers[1]["position"] == _log_end(url)

    # A repeat that differs is refused by its rule, and the batch with it applies nothing.
    end = _log_end(url)
    differs = [{**plan, "command_id": "b-5", "chapter": 2}, {**plan, "command_id": "b-6", "goals": ["other"]}]
    refused = canon("--db", url, "apply", "-", "--atomic", "--format", "json",
                    stdin="".join(json.dumps(c) + "\n" for c in differs))
    assert refused.returncode == 1
    assert [(a["status"], a.get("error", {}).get("code")) for a in _answers(refused)] == [
        ("not_applied", None), ("rejected", "chapter_number_must_be_unique")]
    assert _log_end(url) == end
