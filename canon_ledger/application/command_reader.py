"""Reading commands from JSON, for every door: each piece of input becomes a command, or the
structured ``CanonError`` that reading it gave, returned in its place (never raised), so that
the ledger's results line up with the input and a batch with an unreadable command can be
refused whole (``CanonLedger.apply`` reports such an item ``rejected`` and writes nothing for it).

Framing stays at the door: ``canon apply`` cuts its input into lines (a line over the bound is
a ``LineTooLong``), ``POST /v1/commands`` reads a body holding one command or a list, the Python
API takes dicts. What each piece becomes is decided here, on one path: JSON text within
``domain.bounds`` (``domain.commands.parse_json``), then a JSON object read by the command
schema (``domain.commands.parse_object``).

The command models (pydantic) are imported by the first read, not with this module: a process
that reads no command never loads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from canon_ledger.domain.bounds import MAX_LINE_BYTES
from canon_ledger.domain.errors import CanonError, InvalidCommand

if TYPE_CHECKING:
    from canon_ledger.application.ledger import CommandOrError

# A decoded JSON value's types: anything else handed to ``read_value`` was read already.
_JSON_VALUES = (dict, list, str, int, float, bool, type(None))
# A line that is a piece of a JSON object spread over several lines: a `"key": value` pair or a
# list item (a line that starts with a string), a closing brace or bracket, or an object or list
# opened and left open for the next line.
_PIECE = re.compile(r'["\]}].*|[{\[](?:.*[,{\[:])?', re.S)
ONE_PER_LINE = ("; `canon apply` reads one JSON object per line: a command spread over several lines is read line "
                "by line, so put each command on a line of its own (`jq -c . FILE` does it)")


@dataclass(frozen=True)
class LineTooLong:
    """A line over ``MAX_LINE_BYTES``, in place of its bytes: read only that far, the rest
    skipped, its ``size`` kept for the error."""

    size: int


def read_value(value: object) -> CommandOrError:
    """A decoded JSON value as a command: an object read by the command schema, any other
    JSON value ``malformed_json``. A command model (or a ``CanonError``) is returned as it is:
    it was read already."""
    if not isinstance(value, _JSON_VALUES):
        return cast("CommandOrError", value)
    from canon_ledger.domain.commands import parse_object

    try:
        return parse_object(value)
    except CanonError as e:
        return e


def read_line(line: bytes | str | LineTooLong) -> CommandOrError:
    """One line of JSON-lines input (its bytes, UTF-8, a trailing newline ignored; or its text)
    as a command. A line that is only a piece of a JSON object (a command spread over several
    lines) is told to put each command on a line of its own."""
    from canon_ledger.domain.commands import decode_line, parse_json

    text: bytes | str | LineTooLong = line
    try:
        if isinstance(text, LineTooLong):
            raise InvalidCommand("line_too_long", f"a line of {text.size:,} bytes; a command line is at most "
                                                  f"{MAX_LINE_BYTES:,} bytes")
        if isinstance(text, bytes):
            text = decode_line(text.rstrip(b"\r\n"))
        read = read_value(parse_json(text))
    except CanonError as e:
        read = e
    if isinstance(read, CanonError) and read.code == "malformed_json" and isinstance(text, str) \
            and _a_piece_of_a_command(text):
        return InvalidCommand(read.code, read.message + ONE_PER_LINE, read.field)
    return read


def read_batch(body: bytes, most: int) -> list[CommandOrError]:
    """A body holding one command or a list of them (UTF-8 JSON), each read by ``read_value``
    and its error left in its place. The body itself is refused, raised as an
    ``InvalidCommand``: unreadable, an empty list (``empty_batch``), more than ``most`` items
    (``batch_too_large``)."""
    from canon_ledger.domain.commands import decode_line, parse_json

    data = parse_json(decode_line(body))
    batch = data if isinstance(data, list) else [data]
    if not batch:
        raise InvalidCommand("empty_batch", "the body is an empty list: send a command or a list of them")
    if len(batch) > most:
        raise InvalidCommand("batch_too_large", f"{len(batch):,} commands; a request carries at most {most:,}")
    return [read_value(raw) for raw in batch]


def _a_piece_of_a_command(text: str) -> bool:
    return _PIECE.fullmatch(text.strip()) is not None
