"""The command union: parsing, structured errors, digests and the published schema."""

import pytest

from canon_ledger.domain.commands import json_schema, parse_line
from canon_ledger.domain.errors import InvalidCommand

TYPES = {
    "start_story", "plan_chapter", "add_scene_card", "propose_canon", "confirm_canon", "reject_canon",
    "retire_canon", "submit_draft", "accept_draft", "reject_draft", "record_chapter_summary", "record_volume_summary",
    "set_lore_cap", "ingest_document", "edit_chunk", "dismiss_finding", "record_knowledge", "start_series", "add_book",
}


def test_schema_publishes_the_whole_vocabulary():
    schema = json_schema()
    tags = set(schema["discriminator"]["mapping"])
    assert tags == TYPES
    plan = schema["$defs"]["PlanChapter"]
    assert set(plan["required"]) >= {"command_id", "story_id", "chapter", "volume", "goals", "type"}


@pytest.mark.parametrize(
    ("line", "code", "field"),
    [
        ("{", "malformed_json", None),
        ('"just a string"', "malformed_json", None),
        ('{"command_id": "c"}', "missing_field", "type"),
        ('{"type": "nope", "command_id": "c"}', "unknown_command_type", "type"),
        ('{"type": "confirm_canon", "command_id": "c", "story_id": "s"}', "missing_field", "proposal_id"),
        ('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": 7}', "invalid_field", "proposal_id"),
        ('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": "p", "x": 1}', "unknown_field", "x"),
        ('{"type": "plan_chapter", "command_id": "c", "story_id": "s", "chapter": 0, "volume": 1, "goals": []}', "invalid_field", "chapter"),
        ('{"type": "plan_chapter", "command_id": "c", "story_id": "s", "chapter": true, "volume": 1, "goals": []}', "invalid_field", "chapter"),
        ('{"type": "propose_canon", "command_id": "c", "story_id": "s", "proposal_id": "p", "kind": "spaceship", "key": "k", "name": "K", "aliases": [], "text": "", "fields": {}, "valid_from": 1}', "invalid_field", "kind"),
        ('{"type": "confirm_canon", "command_id": "", "story_id": "s", "proposal_id": "p"}', "invalid_field", "command_id"),
    ],
)
def test_bad_lines_become_structured_errors(line, code, field):
    with pytest.raises(InvalidCommand) as e:
        parse_line(line)
    assert (e.value.code, e.value.field) == (code, field)
    assert e.value.message


def test_digest_is_stable_and_content_sensitive():
    a = parse_line('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": "p"}')
    b = parse_line('{"proposal_id": "p", "story_id": "s", "command_id": "c", "type": "confirm_canon"}')
    c = parse_line('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": "q"}')
    assert a.digest() == b.digest() != c.digest()
