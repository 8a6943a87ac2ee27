"""Bounds in the command schema and a parser that cannot be crashed (issue 16)."""

from __future__ import annotations

import json

import pytest

from canon_ledger.domain import bounds as b
from canon_ledger.domain.commands import decode_line, json_schema, parse_command, parse_line
from canon_ledger.domain.errors import CanonError, InvalidCommand

BASE = {
    "start_story": {"type": "start_story", "command_id": "c", "story_id": "s", "title": "T", "style_guardrails": [],
                    "output_contract": "md"},
    "plan_chapter": {"type": "plan_chapter", "command_id": "c", "story_id": "s", "chapter": 1, "volume": 1,
                     "goals": []},
    "propose_canon": {"type": "propose_canon", "command_id": "c", "story_id": "s", "proposal_id": "p",
                      "kind": "thread", "key": "k", "name": "K", "aliases": [], "text": "", "fields": {},
                      "valid_from": 1},
    "retire_canon": {"type": "retire_canon", "command_id": "c", "story_id": "s", "kind": "item", "key": "k",
                     "valid_from": 1, "reason": "r"},
    "record_volume_summary": {"type": "record_volume_summary", "command_id": "c", "story_id": "s", "volume": 1,
                              "text": "t"},
    "submit_draft": {"type": "submit_draft", "command_id": "c", "story_id": "s", "chapter": 1, "draft_id": "d",
                     "text": "t"},
    "ingest_document": {"type": "ingest_document", "command_id": "c", "collection_id": "k", "document_id": "d",
                        "title": "T", "text": ""},
}


def _with(kind: str, **changes):  # noqa: ANN003, ANN202
    return {**BASE[kind], **changes}


def _deep(n: int) -> object:
    value: object = 1
    for _ in range(n):
        value = [value]
    return value


REFUSED = [
    (_with("plan_chapter", chapter=10**30), "chapter"),
    (_with("plan_chapter", chapter=2**31), "chapter"),
    (_with("plan_chapter", chapter=b.MAX_CHAPTER + 1), "chapter"),
    (_with("plan_chapter", volume=10**300), "volume"),
    (_with("plan_chapter", goals=["x"] * (b.MAX_LIST + 1)), "goals"),
    (_with("plan_chapter", goals=["g\x00"]), "goals.0"),
    (_with("propose_canon", valid_from=2**63), "valid_from"),
    (_with("propose_canon", name="a\x00b"), "name"),
    (_with("propose_canon", text="\ud800"), "text"),
    (_with("propose_canon", text="x" * (b.MAX_CANON_TEXT + 1)), "text"),
    (_with("propose_canon", aliases=["a" * (b.MAX_ALIAS + 1)]), "aliases.0"),
    (_with("propose_canon", key="k" * (b.MAX_ID + 1)), "key"),
    (_with("propose_canon", fields={"a": _deep(b.MAX_FIELDS_DEPTH)}), "fields"),
    (_with("propose_canon", fields={"blob": "x" * (b.MAX_FIELDS_BYTES + 1)}), "fields"),
    (_with("propose_canon", fields={"n": 2**60}), "fields"),
    (_with("propose_canon", fields={"n": float("nan")}), "fields"),
    (_with("propose_canon", fields={"t\x00": 1}), "fields"),
    (_with("propose_canon", fields={"list": list(range(b.MAX_FIELDS_ITEMS + 1))}), "fields"),
    (_with("retire_canon", valid_from=10**18), "valid_from"),
    (_with("record_volume_summary", volume=10**30), "volume"),
    (_with("start_story", story_id="s" * (b.MAX_STORY_ID + 1)), "story_id"),
    (_with("start_story", budgets={"writer": 10**30}), "budgets.writer"),
    (_with("start_story", budgets={"writer": b.MAX_BUDGET + 1}), "budgets.writer"),
    (_with("start_story", command_id="c" * (b.MAX_ID + 1)), "command_id"),
    (_with("submit_draft", text="x" * (b.MAX_CHAPTER_TEXT + 1)), "text"),
    (_with("ingest_document", text="x" * (b.MAX_DOCUMENT_TEXT + 1)), "text"),
    (_with("ingest_document", document_id="d" * (b.MAX_DOCUMENT_ID + 1)), "document_id"),
    (_with("ingest_document", collection_id="c\ud800"), "collection_id"),
]


@pytest.mark.parametrize(("data", "field"), REFUSED, ids=[f"{d['type']}-{f}-{n}" for n, (d, f) in enumerate(REFUSED)])
def test_out_of_bounds_values_are_invalid_fields_naming_the_field(data, field) -> None:
    with pytest.raises(InvalidCommand) as e:
        parse_command(data)
    assert e.value.code == "invalid_field"
    assert e.value.field == field, e.value.message
    assert len(e.value.message) < 2000  # the offending value is never echoed whole


def test_values_at_the_bounds_are_accepted() -> None:
    parse_command(_with("plan_chapter", chapter=b.MAX_CHAPTER, volume=b.MAX_CHAPTER, goals=["g"] * b.MAX_LIST))
    parse_command(_with("start_story", story_id="s" * b.MAX_STORY_ID, budgets={"writer": b.MAX_BUDGET}))
    parse_command(_with("propose_canon", fields={"a": _deep(b.MAX_FIELDS_DEPTH - 1), "n": 2**53 - 1,
                                                 "state": "s" * b.MAX_STATE}))


def test_domain_rules_bound_the_fields_packets_act_on() -> None:
    from canon_ledger.domain.canon import require_control_fields

    for fields, field in (({"hidden_until": b.MAX_CHAPTER + 1}, "fields.hidden_until"),
                          ({"state": "s" * (b.MAX_STATE + 1)}, "fields.state"),
                          ({"nodes": [{"id": "n" * (b.MAX_ID + 1), "text": "t"}]}, "fields.nodes")):
        with pytest.raises(CanonError) as e:
            require_control_fields(fields)
        assert e.value.field == field


def test_the_published_schema_carries_the_bounds() -> None:
    defs = json_schema()["$defs"]
    assert defs["PlanChapter"]["properties"]["chapter"]["maximum"] == b.MAX_CHAPTER
    assert defs["StartStory"]["properties"]["story_id"]["maxLength"] == b.MAX_STORY_ID
    assert defs["IngestDocument"]["properties"]["text"]["maxLength"] == b.MAX_DOCUMENT_TEXT
    assert defs["PlanChapter"]["properties"]["goals"]["maxItems"] == b.MAX_LIST
    assert "hidden_until" in defs["ProposeCanon"]["properties"]["fields"]["description"]


def _schema_numbers(node: object) -> list[int]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("maximum", "exclusiveMaximum") and isinstance(v, int)]
        return found + [n for v in node.values() for n in _schema_numbers(v)]
    if isinstance(node, list):
        return [n for v in node for n in _schema_numbers(v)]
    return []


def test_every_number_the_schema_accepts_fits_a_32_bit_column() -> None:
    maxima = _schema_numbers(json_schema())
    assert maxima and max(maxima) < 2**31


HOSTILE_LINES = [
    ("[" * 100_000 + "]" * 100_000, "malformed_json"),
    ('{"fields": ' + "[" * 300 + "]" * 300 + "}", "malformed_json"),
    ('{"type": "plan_chapter", "chapter": ' + "9" * 5000 + "}", "invalid_number"),
    ('{"type": "plan_chapter", "chapter": 1e999}', "invalid_number"),
    ('{"type": "plan_chapter", "chapter": NaN}', "malformed_json"),
    ('{"type": "plan_chapter", "chapter": -Infinity}', "malformed_json"),
    ("\u2028", "malformed_json"),
    ('"\\ud800"', "malformed_json"),
    ('{"type": "' + "x" * 100_000 + '"}', "unknown_command_type"),
    ('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": "\\ud800"}', "invalid_field"),
    ('{"type": "confirm_canon", "command_id": "c", "story_id": "s", "proposal_id": "p"', "malformed_json"),
]


@pytest.mark.parametrize(("line", "code"), HOSTILE_LINES)
def test_hostile_lines_are_structured_errors(line: str, code: str) -> None:
    with pytest.raises(InvalidCommand) as e:
        parse_line(line)
    assert e.value.code == code, e.value.message
    assert len(e.value.message) < 2000


def test_bytes_that_are_not_utf8_name_where_they_break() -> None:
    with pytest.raises(InvalidCommand) as e:
        decode_line(b'{"a": "\xff"}')
    assert e.value.code == "invalid_utf8" and "byte 8" in e.value.message
    with pytest.raises(InvalidCommand) as e:
        decode_line(b"x" * (b.MAX_LINE_BYTES + 1))
    assert e.value.code == "line_too_long"
    assert decode_line("é".encode()) == "é"


def test_a_five_megabyte_document_is_read_in_one_line() -> None:
    line = json.dumps(_with("ingest_document", text="word " * (b.MAX_DOCUMENT_TEXT // 5)))
    assert parse_line(line).text.startswith("word")
