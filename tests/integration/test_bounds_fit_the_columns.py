"""No value the command schema accepts can overflow a column (issue 16), on both stores.

Commands are built from the maxima the published schema states (``canon schema``): ids, keys
and aliases at their longest, written in a letter whose casefold is three letters long
(aliases are stored casefolded), chapters and volumes at the largest number, fields and chain
nodes at their limits, a document whose headings nest six deep. They are applied, every read
model catches up, and nothing may be quarantined: every row fit its column.
"""

from __future__ import annotations

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain import bounds as b
from canon_ledger.domain.commands import json_schema, parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap

WIDE = "\u0390"  # one character that casefolds to three
SCHEMA = json_schema()["$defs"]


def longest(model: str, prop: str, letter: str = WIDE) -> str:
    node = SCHEMA[model]["properties"][prop]
    node = node.get("items", node)
    return letter * node["maxLength"]


def largest(model: str, prop: str) -> int:
    return SCHEMA[model]["properties"][prop]["maximum"]


def _commands() -> list[dict]:
    story = longest("StartStory", "story_id")
    chapter, volume = largest("PlanChapter", "chapter"), largest("PlanChapter", "volume")
    key = longest("ProposeCanon", "key")
    chain = "c" + longest("ProposeCanon", "key")[1:]
    scene = longest("AddSceneCard", "scene_id")
    heading = "H" * 200
    doc = "\n\n".join(f"{'#' * level} {heading}{level}\n\nBody {level}." for level in range(1, 7))
    budgets = {role: SCHEMA["StartStory"]["properties"]["budgets"]["additionalProperties"]["maximum"]
               for role in ("planner", "writer", "qa", "summarizer", "chat")}
    c = [
        {"type": "start_story", "story_id": story, "title": "T" * 50, "style_guardrails": ["g"],
         "output_contract": "md", "budgets": budgets},
        {"type": "plan_chapter", "story_id": story, "chapter": chapter, "volume": volume, "goals": ["goal"]},
        {"type": "propose_canon", "story_id": story, "proposal_id": longest("ProposeCanon", "proposal_id"),
         "kind": "character", "key": key, "name": "N" * 100, "aliases": [longest("ProposeCanon", "aliases")] * 3,
         "text": "who", "fields": {"state": "s" * b.MAX_STATE, "n": b.MAX_JSON_INT, "secret": True}, "valid_from": 1,
         "tags": [longest("ProposeCanon", "tags")]},
        {"type": "confirm_canon", "story_id": story, "proposal_id": longest("ProposeCanon", "proposal_id")},
        {"type": "propose_canon", "story_id": story, "proposal_id": "chain", "kind": "development_chain",
         "key": chain, "name": "Chain", "aliases": [], "text": "a chain", "valid_from": 1,
         "fields": {"nodes": [{"id": WIDE * b.MAX_ID, "kind": "k" * b.MAX_NODE_KIND, "text": "node",
                               "hidden_until": b.MAX_CHAPTER}]}},
        {"type": "confirm_canon", "story_id": story, "proposal_id": "chain"},
        {"type": "propose_canon", "story_id": story, "proposal_id": "thread", "kind": "thread", "key": "t",
         "name": "Thread", "aliases": [], "text": "open", "valid_from": chapter, "fields": {"state": "open",
                                                                                          "hidden_until": chapter}},
        {"type": "confirm_canon", "story_id": story, "proposal_id": "thread"},
        {"type": "add_scene_card", "story_id": story, "chapter": chapter, "scene_id": scene, "summary": "scene",
         "characters": [key], "locations": [], "threads": [], "callbacks": [], "items": [], "pov": key},
        {"type": "record_knowledge", "story_id": story, "character": key, "kind": "character", "key": key,
         "chapter": chapter, "how": longest("RecordKnowledge", "how")},
        {"type": "submit_draft", "story_id": story, "chapter": chapter, "draft_id": longest("SubmitDraft", "draft_id"),
         "text": "The chapter.\n\n" + doc},
        {"type": "dismiss_finding", "story_id": story, "draft_id": longest("SubmitDraft", "draft_id"),
         "finding_id": "fnd_" + "f" * 16, "reason": longest("DismissFinding", "reason")},
        {"type": "accept_draft", "story_id": story, "draft_id": longest("SubmitDraft", "draft_id"),
         "override_reason": longest("DismissFinding", "reason")},  # the same bound (anyOf null)
        {"type": "record_chapter_summary", "story_id": story, "chapter": chapter, "text": "summary"},
        {"type": "record_volume_summary", "story_id": story, "volume": volume, "text": "volume summary"},
        {"type": "retire_canon", "story_id": story, "kind": "character", "key": key,
         "valid_from": largest("RetireCanon", "valid_from"), "reason": "gone"},
        {"type": "ingest_document", "collection_id": longest("IngestDocument", "collection_id", "k"),
         "document_id": longest("IngestDocument", "document_id", "d"), "title": "Doc", "text": doc + "\n\n" + doc},
    ]
    return [{"command_id": f"max-{n}", **cmd} for n, cmd in enumerate(c)]


@pytest.mark.slow
def test_commands_at_every_bound_project_on_both_stores_without_quarantine(store_url) -> None:
    s = bootstrap(store_url, embedder="hashing")
    try:
        results = s.ledger.apply([parse_command(c) for c in _commands()])
        assert [r.status for r in results] == ["applied"] * len(results), [r.as_dict() for r in results if not r.ok]
        for name in ("canon", "authoring", "knowledge", "retrieval"):
            s.read_models[name].catch_up_serving()
        s.catch_up_retrieval()
        assert s.quarantined() == []
        story = _commands()[0]["story_id"]
        packet = s.packets.packet(Request(story, "writer", largest("PlanChapter", "chapter") - 1 + 1), record=False)
        assert packet.budget == b.MAX_BUDGET and "quarantined" not in [st.step for st in packet.stages]
        assert s.auditor.audit(s.packets.packet(Request(story, "planner", 5)).packet_id).ok
    finally:
        s.close()
