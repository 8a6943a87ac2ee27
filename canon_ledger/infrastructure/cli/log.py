"""The store and its log: ``init`` creates a store, ``apply`` appends commands to its log
(read from JSON lines, ``application.command_reader``), ``schema`` prints the commands'
vocabulary, ``events`` lists the log. ``apply`` and ``events`` open the ledger alone
(``bootstrap.open_store``): no read model is loaded unless a refusal needs a hint from one."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from canon_ledger.application.command_reader import LineTooLong, read_line
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.results import CommandResult
from canon_ledger.domain.bounds import MAX_LINE_BYTES, MAX_POSITION
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, USAGE, Failure
from canon_ledger.infrastructure.cli.output import emit
from canon_ledger.infrastructure.cli.parsing import add_verb, bounded


def cmd_init(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:  # the event store and every read model's tables
        position = services.ledger.event_log.position()
        builds = {name: models.active().tag for name, models in services.read_models.items()}
    if args.format == "json":
        emit({"db": services.config.display, "position": position, "read_models": builds})
    else:
        print(f"initialised {services.config.display} (log position {position}; read models "
              + ", ".join(f"{n} {t}" for n, t in builds.items()) + ")")
    return OK


def cmd_schema(args: argparse.Namespace) -> int:
    from canon_ledger.domain.commands import json_schema

    print(json.dumps(json_schema(), indent=2))
    return OK


def _numbered_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | LineTooLong]]:
    """(line number, bytes) of each non-blank line, or ``LineTooLong`` in place of its bytes."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            size = len(raw)
            while True:  # skip to the end of this line
                rest = stream.readline(1 << 20)
                size += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, LineTooLong(size)
            continue
        if raw.strip(b" \t\r\n"):
            yield number, raw


def _open_input(path: str) -> IO[bytes]:
    """The bytes of ``path`` (or stdin for ``-``): a file and stdin read the same way."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return Path(path).open("rb")
    except OSError as e:
        raise Failure(USAGE, f"cannot read {path}: {e.strerror}", "unreadable_input") from None


def _report(result: CommandResult, line: int, fmt: str) -> None:
    body = {"line": line, **result.as_dict()}
    body.pop("index", None)
    if fmt == "json":
        emit(body)
        return
    what = f"line {line}: {result.status}"
    if result.type:
        what += f" {result.type} {result.command_id}"
    if result.position is not None:
        what += f" @ {result.position}"
    if result.error is not None:
        field = f" ({result.error.field})" if result.error.field else ""
        what += f" - {result.error.code}{field}: {result.error.message}"
    print(what)


def cmd_apply(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import open_store
    from canon_ledger.infrastructure.hints import TagHints

    store = open_store(args.db)
    ledger = store.ledger
    stream = _open_input(args.file)
    counts: dict[str, int] = {}
    failed_lines: list[int] = []
    hints = TagHints(store.services)  # the read models, wired only for a refused tag

    def record(result: CommandResult, line: int, command: Any) -> None:
        result = hints(result, command)
        counts[result.status] = counts.get(result.status, 0) + 1
        if not result.ok:
            failed_lines.append(line)
        _report(result, line, args.format)
        sys.stdout.flush()

    try:
        numbered = list(_numbered_lines(stream)) if args.atomic else _numbered_lines(stream)
        if args.atomic:
            items = [read_line(text) for _, text in numbered]
            for result, (line, _), item in zip(ledger.apply(items, atomic=True), numbered, items):
                record(result, line, item)
        else:
            # One command per transaction, reported as it lands: a crash mid-file loses
            # nothing that was reported, and a rerun reports those lines as duplicates.
            for line, text in numbered:
                item = read_line(text)
                record(ledger.apply([item])[0], line, item)
    finally:
        store.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    total = sum(counts.values())
    if failed_lines:
        shown = ", ".join(str(n) for n in failed_lines[:10]) + (" ..." if len(failed_lines) > 10 else "")
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        raise Failure(REJECTED, f"{len(failed_lines)} of {total} commands not applied ({summary}); lines {shown}",
                      "not_applied", reported=True)
    if args.format != "json":
        print(f"{total} commands: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())), file=sys.stderr)
    return OK


def cmd_events(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import open_store

    store = open_store(args.db)
    try:
        return _print_events(store.ledger, args)
    finally:
        store.close()


def _print_events(ledger: CanonLedger, args: argparse.Namespace) -> int:
    shown = 0
    for logged in ledger.event_log.history(story_id=args.story, start=args.start):
        if args.limit is not None and shown >= args.limit:
            break
        shown += 1
        if args.format == "json":
            emit(
                {
                    "position": logged.position,
                    "type": logged.type,
                    "story_id": logged.story_id,
                    "originator_id": str(logged.originator_id),
                    "version": logged.version,
                    "timestamp": logged.timestamp.isoformat(),
                    "data": logged.data,
                }
            )
        else:
            data = json.dumps(logged.data, ensure_ascii=False, default=str)
            if len(data) > 100:
                data = data[:97] + "..."
            print(f"{logged.position:>8}  {logged.type:<28} {logged.story_id or '-':<16} v{logged.version:<4} {data}")
    return OK


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "init", common, "create the store: the event log and every read model's tables")
    p.set_defaults(run=cmd_init)

    p = add_verb(verbs, "apply", common, "apply JSON-lines commands from FILE or - (stdin), one result line each",
                 "Apply JSON-lines commands (see `canon schema`), one per line, from FILE or - (stdin).\n"
                 "Each line answers applied (with its log position), unchanged (it would change nothing),\n"
                 "duplicate (that command_id was applied before), rejected (with error.code, message, field),\n"
                 "not_applied (an --atomic batch rolled back) or conflict (retry it).")
    p.add_argument("file", metavar="FILE|-", help="a file of JSON lines, or - for standard input")
    p.add_argument("--atomic", action="store_true", help="all commands or none, in one transaction")
    p.set_defaults(run=cmd_apply)

    p = add_verb(verbs, "schema", common, "print the JSON Schema of the command vocabulary (every field described)")
    p.set_defaults(run=cmd_schema)

    p = add_verb(verbs, "events", common, "list the global event log, in order, with positions")
    p.add_argument("--story", help="only this story's events")
    p.add_argument("--from", dest="start", type=bounded(1, MAX_POSITION), default=1, metavar="POSITION",
                   help="start at this log position (default 1)")
    p.add_argument("--limit", type=bounded(0, MAX_POSITION), help="at most this many events")
    p.set_defaults(run=cmd_events)
