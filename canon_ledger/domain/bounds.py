"""The bounds every value from a client must fit before it can touch the log.

An event is immutable: a value the read models cannot store (a chapter past a column's
integer range, a NUL that PostgreSQL text refuses, an id longer than its column) would stay
in the log for good. So every bound here is chosen to fit the narrowest column that stores
it, on both stores (``tests/integration/test_bounds_fit_the_columns.py`` proves it by
projecting commands built from these maxima), and is checked by the command schema, so it
is published by ``canon schema`` and refused with ``invalid_field`` naming the field.

Pure: no I/O. The numbers are the contract; change one only with the column beside it.
"""

from __future__ import annotations

import math
from typing import Any

# Numbers: chapters, volumes, valid_from, hidden_until. PostgreSQL ``integer`` is 2^31 - 1.
MAX_CHAPTER = 1_000_000
MAX_BUDGET = 1_000_000  # tokens per packet
MAX_POSITION = 2**31 - 1  # log positions: the read models' tracking column is a 32-bit integer
MAX_JSON_INT = 2**53 - 1  # inside free-form ``fields``: what every JSON reader keeps exact

# Strings, in characters.
MAX_STORY_ID = 64  # the story's chapter collection ``story:<id>`` lives in a 100-character column
MAX_ID = 200  # command, proposal, draft, scene ids; canon keys (200-character columns)
MAX_FINDING_ID = 20  # a continuity finding's id: fnd_ + 16 hex digits
MAX_COLLECTION_ID = 100
MAX_DOCUMENT_ID = 300  # chunk and topic ids are built from collection + document + headings
MAX_CHUNK_ID = 1000
MAX_ALIAS = 128  # aliases are stored casefolded (up to 3x longer) in a 400-character column
MAX_STATE = 40  # a thread's ``fields.state`` (40-character column)
MAX_NODE_KIND = 40
MAX_NAME = 1_000  # names, titles
MAX_LINE_TEXT = 20_000  # a goal, a guardrail, a scene summary, a reason, the output contract
MAX_CANON_TEXT = 100_000  # a canon entry's text; a chapter or volume summary
MAX_CHAPTER_TEXT = 2_000_000  # a draft's text (War and Peace's longest chapter is ~40,000)
MAX_DOCUMENT_TEXT = 5_242_880  # an ingested document (5 MiB of characters)

# Lists.
MAX_LIST = 500  # goals, guardrails, a scene card's keys of one type, aliases, tags

# Free-form ``fields`` objects.
MAX_FIELDS_DEPTH = 8  # objects and lists nested inside ``fields`` (a chain's nodes need 3)
MAX_FIELDS_BYTES = 65_536  # as compact JSON
MAX_FIELDS_ITEMS = 4_096  # keys and list elements, all levels together

# One JSON line of ``canon apply`` (a 5 MiB document escapes to at most ~6x that).
MAX_LINE_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 64  # a command nests 4 levels plus ``fields``
MAX_INT_DIGITS = 100  # longer integer literals are refused before int() parses them (shorter ones reach the schema, which names the field)


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on both stores, or None.

    NUL: PostgreSQL text refuses it (SQLite would take it: refused on both, so a command
    means the same on either). A lone surrogate: not Unicode, cannot be encoded as UTF-8."""
    if "\x00" in value:
        return "must not contain NUL (\\u0000) characters"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (it holds a lone surrogate)"
    return None


def fields_problem(fields: Any) -> str | None:
    """Why a free-form ``fields`` object is out of bounds, or None: depth, item count, size,
    integers beyond ``MAX_JSON_INT``, floats that are not finite, text that cannot be stored.

    Iterative (a hostile depth cannot exhaust the stack)."""
    items = 0
    stack: list[tuple[Any, int, str]] = [(fields, 1, "fields")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_FIELDS_DEPTH:
                return f"{path}: nested deeper than {MAX_FIELDS_DEPTH} levels"
            items += len(value)
            for key, inner in value.items():
                if not isinstance(key, str):
                    return f"{path}: keys must be strings"
                why = text_problem(key)
                if why is not None or len(key) > MAX_ID:
                    return f"{path}: key {key[:40]!r}... {why or f'is longer than {MAX_ID} characters'}"
                stack.append((inner, depth + 1, f"{path}.{key}"))
        elif isinstance(value, list):
            if depth > MAX_FIELDS_DEPTH:
                return f"{path}: nested deeper than {MAX_FIELDS_DEPTH} levels"
            items += len(value)
            stack.extend((inner, depth + 1, f"{path}[{n}]") for n, inner in enumerate(value))
        elif isinstance(value, str):
            why = text_problem(value)
            if why is not None:
                return f"{path} {why}"
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if abs(value) > MAX_JSON_INT:
                return f"{path}: integers in fields are limited to +/-{MAX_JSON_INT}"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{path}: numbers must be finite (no NaN or Infinity)"
        else:
            return f"{path}: {type(value).__name__} is not a JSON value"
        if items > MAX_FIELDS_ITEMS:
            return f"fields: more than {MAX_FIELDS_ITEMS} keys and list items"
    return None


def compact_size(fields: Any) -> int:
    """Bytes of ``fields`` as compact JSON (call after ``fields_problem`` said it is JSON)."""
    import json

    return len(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
