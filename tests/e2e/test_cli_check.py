"""``canon check`` (issue 42) as a user runs it, on both stores: a dead character who walks into
a later chapter's draft is an error finding (exit 1) with his name as the span and the event that
confirmed his death as the evidence; a draft that only remembers him is clean (exit 0); an
unknown draft is the usual structured refusal."""

from __future__ import annotations

import json

import pytest

from tests.cli_runner import canon

STORY = "ferry"
DEAD = "The rain kept on. Bram walked into the mill and shook the water from his coat."
CLEAN = "The rain kept on. At the mill they remembered how Bram had laughed at the weir."
COMMANDS = [
    {"type": "start_story", "command_id": "ck-1", "story_id": STORY, "title": "Ferry", "style_guardrails": [],
     "output_contract": "Prose."},
    *({"type": "plan_chapter", "command_id": f"ck-plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
       "goals": [f"chapter {n}"]} for n in (1, 2, 3)),
    {"type": "propose_canon", "command_id": "ck-2", "story_id": STORY, "proposal_id": "p-bram", "kind": "character",
     "key": "bram", "name": "Bram", "aliases": ["the ferryman"], "text": "Ferryman of the lower river.",
     "fields": {"state": "alive"}, "valid_from": 1},
    {"type": "confirm_canon", "command_id": "ck-3", "story_id": STORY, "proposal_id": "p-bram"},
    {"type": "propose_canon", "command_id": "ck-4", "story_id": STORY, "proposal_id": "p-bram-dead",
     "kind": "character", "key": "bram", "name": "Bram", "aliases": ["the ferryman"],
     "text": "Drowned at the weir in the flood.", "fields": {"state": "dead"}, "valid_from": 2},
    {"type": "confirm_canon", "command_id": "ck-5", "story_id": STORY, "proposal_id": "p-bram-dead"},
    {"type": "submit_draft", "command_id": "ck-6", "story_id": STORY, "chapter": 3, "draft_id": "d3-walks",
     "text": DEAD},
    {"type": "submit_draft", "command_id": "ck-7", "story_id": STORY, "chapter": 3, "draft_id": "d3-remembers",
     "text": CLEAN},
]


@pytest.fixture
def story(store_url: str) -> tuple[str, int]:
    """The story applied: (the store, the position of the event that confirmed Bram dead)."""
    applied = canon("--db", store_url, "apply", "-", "--format", "json",
                    stdin="".join(json.dumps(c) + "\n" for c in COMMANDS))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    [confirmed] = [r for r in map(json.loads, applied.stdout.splitlines()) if r["command_id"] == "ck-5"]
    events = canon("--db", store_url, "events", "--story", STORY, "--format", "json")
    [death] = [e["position"] for e in map(json.loads, events.stdout.splitlines())
               if e["type"].startswith("CanonEntry.") and e["data"]["version"]["proposal_id"] == "p-bram-dead"]
    assert death <= confirmed["position"]  # one of the confirming command's events
    return store_url, death


def test_a_dead_character_walking_in_is_an_error_and_a_memory_is_not(story: tuple[str, int]) -> None:
    url, death = story
    args = ("--db", url, "check", "--story", STORY)

    found = canon(*args, "--draft", "d3-walks", "--format", "json")
    assert found.returncode == 1, found.stderr
    [line] = found.stdout.splitlines()  # one JSON object: the report, no error object after it
    report = json.loads(line)
    assert (report["story_id"], report["draft_id"], report["chapter"], report["status"]) == \
        (STORY, "d3-walks", 3, "submitted")
    assert report["errors"] == 1 and report["warnings"] == 0 and report["dismissed"] == []
    [finding] = report["findings"]
    assert (finding["type"], finding["severity"]) == ("unavailable_character", "error")
    assert finding["entry"] == {"kind": "character", "key": "bram", "name": "Bram"}
    span = finding["span"]
    assert span["text"] == "Bram" == DEAD[span["start"]:span["end"]]
    assert [e["source"] for e in finding["evidence"]] == [death]
    assert finding["evidence"][0]["valid_from"] == 2 and "dead" in finding["evidence"][0]["text"]
    assert finding["id"].startswith("fnd_") and "no LLM call" in json.dumps(report["stages"])
    assert found.stderr.startswith("canon: ") and len(found.stderr.splitlines()) == 1

    again = canon(*args, "--draft", "d3-walks", "--format", "json")  # the same draft and canon: the same id
    assert json.loads(again.stdout)["findings"][0]["id"] == finding["id"]

    text = canon(*args, "--draft", "d3-walks")
    assert text.returncode == 1
    first, summary = text.stdout.splitlines()[:2]
    assert first.startswith("ERROR") and "unavailable_character" in first and "character bram" in first
    assert "'Bram'" in first and f"position {death}" in first and finding["message"] in first
    assert summary.startswith(f"check {STORY}/d3-walks (chapter 3, submitted)") and "1 error(s)" in summary

    clean = canon(*args, "--draft", "d3-remembers", "--format", "json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["findings"] == [] and clean.stderr == ""
    assert canon(*args, "--draft", "d3-remembers").returncode == 0

    missing = canon(*args, "--draft", "nope", "--format", "json")
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "unknown_draft"
    assert missing.stderr.startswith("canon: unknown_draft")
    beyond = canon(*args, "--draft", "d3-walks", "--after", "999999", "--format", "json")
    assert beyond.returncode == 2 and json.loads(beyond.stdout)["error"]["code"] == "position_beyond_log"
    unread = canon(*args, "--format", "json")  # no --draft: a usage error
    assert unread.returncode == 2 and json.loads(unread.stdout)["error"]["code"] == "usage_error"
