"""Reading commands from JSON text, with every failure turned into a structured error."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from domain.commands import COMMAND_ADAPTER, Command
from domain.errors import InvalidCommand

_CODES = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "union_tag_invalid": "unknown_command_type",
    "union_tag_not_found": "missing_field",
}


def _describe(problem: dict[str, Any]) -> tuple[str, str | None, str]:
    loc = [str(part) for part in problem["loc"]]
    kind = problem["type"]
    if kind == "union_tag_invalid":
        tags = problem.get("ctx", {}).get("expected_tags", "")
        tag = problem.get("ctx", {}).get("tag")
        return "unknown_command_type", "type", f"unknown command type {tag!r}; expected one of {tags}"
    if kind == "union_tag_not_found":
        return "missing_field", "type", "type: a command needs a 'type' (see `canon schema`)"
    # A discriminated union puts the tag first ("start_story.title"): the field is what follows.
    field = ".".join(loc[1:]) if len(loc) > 1 else (loc[0] if loc else None)
    return _CODES.get(kind, "invalid_field"), field, f"{field}: {problem['msg']}"


def from_validation_error(error: ValidationError) -> InvalidCommand:
    described = [_describe(p) for p in error.errors()]
    code, field, _ = described[0]
    return InvalidCommand(code, "; ".join(message for _, _, message in described), field)


def parse_command(data: Any) -> Command:
    try:
        return COMMAND_ADAPTER.validate_python(data)
    except ValidationError as e:
        raise from_validation_error(e) from None


def parse_line(line: str) -> Command:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidCommand("malformed_json", f"not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(data, dict):
        raise InvalidCommand("malformed_json", f"a command is a JSON object, got {type(data).__name__}")
    return parse_command(data)
