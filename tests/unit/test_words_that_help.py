"""Reading commands (issue 38): blank aliases, tags and keys are refused with a structured
error, and the errors people meet most say what was probably meant (curly quotes, a mistyped
command type). These are the domain's own parsers: every door (CLI, HTTP, MCP) reads through them."""

from __future__ import annotations

import pytest

from canon_ledger.domain.commands import parse_command, parse_json, parse_line
from canon_ledger.domain.errors import InvalidCommand

PROPOSE = {"type": "propose_canon", "command_id": "c", "story_id": "s", "proposal_id": "p", "kind": "character",
           "key": "ilse", "name": "Ilse", "aliases": [], "text": "", "fields": {}, "valid_from": 1}
CARD = {"type": "add_scene_card", "command_id": "c", "story_id": "s", "chapter": 1, "scene_id": "1a", "summary": "",
        "characters": [], "locations": [], "threads": [], "callbacks": [], "items": []}


@pytest.mark.parametrize(("command", "field"), [
    ({**PROPOSE, "aliases": [""]}, "aliases.0"),
    ({**PROPOSE, "aliases": ["the Marrow girl", "   "]}, "aliases.1"),
    ({**PROPOSE, "tags": [""]}, "tags.0"),
    ({**PROPOSE, "tags": ["magic", "\t"]}, "tags.1"),
    ({**PROPOSE, "key": " "}, "key"),
    ({**CARD, "characters": [""]}, "characters.0"),
    ({**CARD, "callbacks": ["lamps", "  "]}, "callbacks.1"),
])
def test_a_blank_alias_tag_or_key_is_refused_naming_the_field(command: dict, field: str) -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_command(command)
    assert (refused.value.code, refused.value.field) == ("invalid_field", field), refused.value.as_dict()
    assert "blank" in refused.value.message or "at least 1 character" in refused.value.message


def test_aliases_and_tags_with_words_still_read() -> None:
    command = parse_command({**PROPOSE, "aliases": ["the Marrow girl", " Lamplighter "], "tags": ["magic"]})
    assert command.aliases == ["the Marrow girl", " Lamplighter "] and command.tags == ["magic"]


@pytest.mark.parametrize("text", [
    '{\u201ctype\u201d: \u201cplan_chapter\u201d}',  # “type”: “plan_chapter” (a word processor's quotes)
    '{"type": \u2018plan_chapter\u2019}',
])
def test_curly_quotes_get_a_hint_to_use_straight_ones(text: str) -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_json(text)
    assert refused.value.code == "malformed_json"
    assert "curly quotes" in refused.value.message and 'straight double quotes (")' in refused.value.message


def test_single_quotes_get_the_double_quotes_hint() -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_json("{'type': 'plan_chapter'}")
    assert 'straight double quotes ("), not single ones' in refused.value.message


def test_plain_malformed_json_gets_no_quote_hint() -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_json('{"type": plan_chapter}')
    assert "curly" not in refused.value.message


def test_a_mistyped_command_type_gets_a_did_you_mean() -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_line('{"type": "plan_chapters", "command_id": "c"}')
    assert (refused.value.code, refused.value.field) == ("unknown_command_type", "type")
    assert "did you mean 'plan_chapter'?" in refused.value.message
    with pytest.raises(InvalidCommand) as far:
        parse_line('{"type": "launch_rocket", "command_id": "c"}')
    assert "did you mean" not in far.value.message and "expected one of" in far.value.message


def test_the_docs_name_the_search_feedback_default_the_code_has() -> None:
    """docs/commands.md once said `alone` was the default; the code's default is `hybrid`."""
    from pathlib import Path

    from canon_ledger.application.retrieval.search import FEEDBACK

    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text().split())
    assert f"`--feedback` is pseudo-relevance feedback: `{FEEDBACK}` (the default" in doc
    assert "(the default)" not in doc.split("`--feedback` is pseudo-relevance feedback:")[1].split("Packets run")[0]


def test_curly_quotes_inside_a_string_are_text_not_a_hint() -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_json('{"text": "she said \u201chello\u201d", }')  # broken by the trailing comma, not the quotes
    assert "curly" not in refused.value.message
