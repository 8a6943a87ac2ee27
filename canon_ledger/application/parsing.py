"""Reading commands from JSON text, with every failure turned into a structured error."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from canon_ledger.domain.bounds import MAX_INT_DIGITS, MAX_JSON_DEPTH, MAX_LINE_BYTES
from canon_ledger.domain.commands import COMMAND_ADAPTER, Command
from canon_ledger.domain.errors import InvalidCommand

_CODES = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "union_tag_invalid": "unknown_command_type",
    "union_tag_not_found": "missing_field",
}


def _describe(problem: ErrorDetails) -> tuple[str, str | None, str]:
    loc = [str(part) for part in problem["loc"]]
    kind = problem["type"]
    if kind == "union_tag_invalid":
        tags = problem.get("ctx", {}).get("expected_tags", "")
        tag = str(problem.get("ctx", {}).get("tag"))
        shown = repr(tag if len(tag) <= 60 else tag[:57] + "...")
        return "unknown_command_type", "type", f"unknown command type {shown}; expected one of {tags}"
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


def _int(literal: str) -> int:
    if len(literal) > MAX_INT_DIGITS + 1 and len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise InvalidCommand("invalid_number", f"an integer of {len(literal.lstrip('-'))} digits; "
                                               f"numbers here have at most {MAX_INT_DIGITS}")
    return int(literal)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise InvalidCommand("invalid_number", f"{literal[:30]} is out of range for a number")
    return value


def _constant(name: str) -> Any:
    raise InvalidCommand("malformed_json", f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def _depth(data: Any) -> int:
    """How deeply ``data``'s lists and objects nest (iterative: no recursion to exhaust)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_JSON_DEPTH:
            stack.extend((inner, depth + 1) for inner in value if isinstance(inner, (dict, list)))
    return deepest


def decode_line(raw: bytes) -> str:
    """One input line's bytes as text: UTF-8 or a structured error naming where it breaks."""
    if len(raw) > MAX_LINE_BYTES:
        raise InvalidCommand("line_too_long", f"a line of {len(raw):,} bytes; a command line is at most "
                                              f"{MAX_LINE_BYTES:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidCommand("invalid_utf8", f"not UTF-8 text: {e.reason} at byte {e.start + 1}") from None


def parse_json(text: str) -> Any:
    """Strict JSON with the commands' bounds (depth, integer digits, no NaN or Infinity).
    Every failure, however hostile the text, is an ``InvalidCommand``; nothing else is raised."""
    if len(text) > MAX_LINE_BYTES:
        raise InvalidCommand("line_too_long", f"a line of {len(text):,} characters; a command line is at most "
                                              f"{MAX_LINE_BYTES:,} bytes")
    try:
        data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise InvalidCommand("malformed_json", f"not valid JSON: {_where(text, e)}") from None
    except RecursionError:
        raise InvalidCommand("malformed_json", f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise InvalidCommand("malformed_json", f"nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def _where(text: str, error: json.JSONDecodeError) -> str:
    """What broke and where, as line and column (1-based) of ``text``. An error past the last
    character that is not whitespace (a missing closing brace, a truncated line) is placed
    just after that character, not on the blank or newline that follows it."""
    content = len(text.rstrip())
    if content == 0:
        return "the text is blank (a command is a JSON object)"
    if error.pos < content:
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    line = text.count("\n", 0, content) + 1
    column = content - (text.rfind("\n", 0, content) + 1) + 1
    return f"{error.msg} at line {line} column {column}, where the text ends (a closing brace or bracket missing?)"


def parse_line(line: str) -> Command:
    """One JSON command (``parse_json``'s bounds, then the command schema's)."""
    data = parse_json(line)
    if not isinstance(data, dict):
        raise InvalidCommand("malformed_json", f"a command is a JSON object, got {type(data).__name__}")
    return parse_command(data)
