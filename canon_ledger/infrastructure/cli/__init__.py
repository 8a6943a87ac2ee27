"""``canon``: the command line (every verb: ``canon --help``; docs/commands.md).

Exit status: 0 success; 1 some command was rejected or lost a race (details on stdout);
2 bad usage or unreadable input; 3 the store is unavailable. Any non-zero exit prints a
one-line reason on stderr; with ``--format json`` stdout carries only JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.results import CommandResult
from canon_ledger.application.retrieval.feedback import MODES as FEEDBACK_MODES
from canon_ledger.domain.bounds import MAX_BUDGET, MAX_CHAPTER, MAX_ID, MAX_LINE_BYTES, MAX_POSITION
from canon_ledger.domain.story import DEFAULT_BUDGETS, ROLES
from canon_ledger.domain.document import title_of
from canon_ledger.domain.errors import CanonError, InvalidCommand
from canon_ledger.infrastructure.cli_errors import OK, REJECTED, UNAVAILABLE, UNAVAILABLE_CODES, USAGE, USAGE_CODES, Failure
from canon_ledger.infrastructure.cli_parsing import (CanonArgumentParser, UsageError, add_verb, an_id, bounded,
                                                    wants_json)
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.store_faults import is_store_fault, scrubbed
from canon_ledger.infrastructure.stores import URL_ENV, open_ledger, require_store, resolve_url, store_config



def _emit(obj: Any) -> None:
    """One line of strict JSON (never NaN or Infinity) on stdout."""
    sys.stdout.write(dumps(obj) + "\n")


# -- verbs -------------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)  # the event store and every read model's tables
    try:
        position = services.ledger.position()
        builds = {name: models.active().tag for name, models in services.read_models.items()}
    finally:
        services.close()
    if args.format == "json":
        _emit({"db": services.config.display, "position": position, "read_models": builds})
    else:
        print(f"initialised {services.config.display} (log position {position}; read models "
              + ", ".join(f"{n} {t}" for n, t in builds.items()) + ")")
    return OK


def cmd_schema(args: argparse.Namespace) -> int:
    from canon_ledger.domain.commands import json_schema

    print(json.dumps(json_schema(), indent=2))
    return OK


@dataclass(frozen=True)
class LineTooLong:
    """A line over ``MAX_LINE_BYTES``: read only that far, the rest skipped."""

    size: int


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
        _emit(body)
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
    from canon_ledger.infrastructure.hints import TagHints

    ledger = _ledger(args)
    stream = _open_input(args.file)
    counts: dict[str, int] = {}
    failed_lines: list[int] = []
    hints = TagHints(lambda: _services(args.db), lambda services: services.close())  # only for a refused tag

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
            items = [_parse(text) for _, text in numbered]
            for result, (line, _), item in zip(ledger.apply(items, atomic=True), numbered, items):
                record(result, line, item)
        else:
            # One command per transaction, reported as it lands: a crash mid-file loses
            # nothing that was reported, and a rerun reports those lines as duplicates.
            for line, text in numbered:
                item = _parse(text)
                record(ledger.apply([item])[0], line, item)
    finally:
        hints.close()
        ledger.close()
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


def _parse(text: bytes | LineTooLong | str | dict[str, Any]) -> Any:
    """A command, or the structured error that reading it gave (reported, never raised)."""
    # The command models load here, with the first command read: a verb that reads none never
    # imports pydantic (issue 39: cold start).
    from canon_ledger.domain.commands import decode_line, parse_command, parse_line

    try:
        if isinstance(text, LineTooLong):
            raise InvalidCommand("line_too_long", f"a line of {text.size:,} bytes; a command line is at most "
                                                  f"{MAX_LINE_BYTES:,} bytes")
        if isinstance(text, bytes):
            text = decode_line(text.rstrip(b"\r\n"))
        return parse_line(text) if isinstance(text, str) else parse_command(text)
    except CanonError as e:
        if e.code == "malformed_json" and isinstance(text, str) and _a_piece_of_a_command(text):
            return InvalidCommand(e.code, e.message + ONE_PER_LINE, e.field)
        return e


# A line that is a piece of a JSON object spread over several lines: a `"key": value` pair or a
# list item (a line that starts with a string), a closing brace or bracket, or an object or list
# opened and left open for the next line.
_PIECE = re.compile(r'["\]}].*|[{\[](?:.*[,{\[:])?', re.S)
ONE_PER_LINE = ("; `canon apply` reads one JSON object per line: a command spread over several lines is read line "
                "by line, so put each command on a line of its own (`jq -c . FILE` does it)")


def _a_piece_of_a_command(text: str) -> bool:
    return _PIECE.fullmatch(text.strip()) is not None


def _services(db: str | None) -> Any:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    return bootstrap(db)


def cmd_events(args: argparse.Namespace) -> int:
    ledger = _ledger(args)
    try:
        return _print_events(ledger, args)
    finally:
        ledger.close()


def _print_events(ledger: Any, args: argparse.Namespace) -> int:
    shown = 0
    for logged in ledger.history(story_id=args.story, start=args.start):
        if args.limit is not None and shown >= args.limit:
            break
        shown += 1
        if args.format == "json":
            _emit(
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


def cmd_packet(args: argparse.Namespace) -> int:
    from canon_ledger.application.packets.render import render_text
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)
    services.watch = _catch_up_watch(args)  # L1's own catch-up of a backlog: a bar, then a line on stderr
    try:
        request = Request(args.story, args.role, args.chapter, args.scene, args.budget, args.draft)
        packet = services.packet(request, after=args.after, at=args.at, record=not args.no_record)
    finally:
        services.close()
    print(packet.to_json() if args.format == "json" else render_text(packet))
    # Not in the packet: its bytes are hashed, the same whichever request caught the indexes up.
    note = services.watch.note("before this packet's L1 retrieval (not part of the packet)")
    if note:
        print(note, file=sys.stderr)
    return OK


def _catch_up_watch(args: argparse.Namespace) -> Any:
    """What a read's own catch-up of the indexes costs (``indexing.CatchUpWatch``): a bar on a terminal."""
    from canon_ledger.infrastructure.indexing import CatchUpWatch
    from canon_ledger.infrastructure.progress import quiet

    return CatchUpWatch(shown=not quiet(args.format))


def cmd_audit(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)
    try:
        report = services.auditor.audit(args.packet_id)
    finally:
        services.close()
    if args.format == "json":
        _emit(report.as_dict())
    else:
        verdict = "OK" if report.ok else "MISMATCH"
        print(f"audit {report.packet_id}: {verdict}")
        print(f"  replayed {report.replayed_events} events of story {report.story_id} up to position {report.position}")
        print(f"  recorded hash {report.recorded_hash}")
        print(f"  replayed hash {report.replayed_hash}")
        print(f"  live read model: {report.live}")
        for line in report.differences:
            print(f"  differs: {line}")
        print("  lineage:")
        for item, lineage in report.items:
            print(f"    {item.tier} {item.kind} {item.key} [{item.status}]")
            for src in lineage:
                who = f"{src.command_type} {src.command_id}" if src.command_id else "command unknown"
                print(f"      <- {src.position} {src.type} ({who})")
    if not report.ok:
        raise Failure(REJECTED, f"packet {report.packet_id} does not reproduce: " + (
            report.live if report.recorded_hash == report.replayed_hash else "the replayed hash differs"),
            "audit_mismatch")
    return OK


def cmd_rebuild(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    services = bootstrap(args.db, page_size=args.page_size)
    try:
        names = services.named_models(args.projection)
        reports = []
        for name in names:
            models = services.read_models[name]
            with bar(f"rebuild {name}", "pos", disable=quiet(args.format),
                     total=max(services.ledger.position(), 1)) as shown:
                reports.append(models.rebuild(lambda reached, goal: bar_to(shown, reached, goal),
                                              pause=args.pause / 1000, recount=args.recount))
    finally:
        services.close()
    for report in reports:
        if args.format == "json":
            _emit(report.as_dict())
        else:
            d = report.as_dict()
            print(f"rebuilt {d['projection']}: {d['old']} -> {d['new']}{' (resumed)' if d['resumed'] else ''}, "
                  f"{d['events']} positions in {d['seconds']} s ({d['events_per_second']} /s), now at {d['position']}")
    return OK


INGESTIBLE = (".md", ".markdown", ".txt", ".text")


def _documents(paths: list[str]) -> list[tuple[str, Path]]:
    """(document id, file) for files and folders. A folder's files are named by their path
    relative to the folder, a named file by its path relative to the working directory (its
    absolute path outside it): stable across runs, unique within a call. Two inputs that would
    share an id are refused before anything is written."""
    found: list[tuple[str, Path]] = []
    cwd = Path.cwd().resolve()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in INGESTIBLE)
            found += [(p.relative_to(path).as_posix(), p) for p in files]
        elif path.is_file():
            resolved = path.resolve()
            found.append((resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd)
                          else resolved.as_posix(), path))
        else:
            raise Failure(USAGE, f"cannot read {raw}: no such file or folder", "unreadable_input")
    seen: dict[str, Path] = {}
    for doc_id, path in found:
        other = seen.setdefault(doc_id, path)
        if other != path and other.resolve() != path.resolve():
            raise Failure(USAGE, f"{other} and {path} would both be document {doc_id!r} of the collection; "
                                 "ingest them in separate calls or from folders that keep them apart",
                          "document_id_collision")
    unique = {doc_id: path for doc_id, path in found}  # one file named twice is ingested once
    return list(unique.items())


def cmd_ingest(args: argparse.Namespace) -> int:
    import uuid

    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    documents = _documents(args.paths)
    services = bootstrap(args.db)
    counts: dict[str, int] = {}
    failed: list[dict[str, Any]] = []
    try:
        silent = quiet(args.format)
        shown = bar(f"ingest {args.collection}", "doc", disable=silent, total=len(documents))
        for doc_id, path in documents:
            shown.update(1)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                failed.append({"document_id": doc_id, "status": "rejected",
                               "error": {"code": "unreadable_file", "message": str(e), "field": "path"}})
                if args.format == "json":
                    _emit(failed[-1])
                continue
            command = _parse({"type": "ingest_document", "command_id": f"ingest-{uuid.uuid4().hex}",
                              "collection_id": args.collection, "document_id": doc_id, "title": title_of(doc_id, text),
                              "text": text})
            [result] = services.ledger.apply([command])
            counts[result.status] = counts.get(result.status, 0) + 1
            body = {"document_id": doc_id, **result.as_dict()}
            body.pop("index", None)
            if not result.ok:
                failed.append(body)
            if args.format == "json":
                _emit(body)
        shown.close()
        # Index and embed now, so the first search does not pay for the backlog.
        with bar("embed", "text", disable=silent) as shown:
            services.catch_up_retrieval(progress=lambda done, total: bar_to(shown, done, total))
    finally:
        services.close()
    if args.format != "json":
        print(f"{len(documents)} document(s) into {args.collection}: "
              + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing"))
        for f in failed:
            print(f"  {f['document_id']}: {f['error']['code']}: {f['error']['message']}")
    if failed:
        raise Failure(REJECTED, f"{len(failed)} of {len(documents)} documents not ingested", "not_ingested",
                      reported=True)
    return OK


def cmd_search(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    if not args.query.strip():
        raise Failure(USAGE, "the query is empty", "empty_query")
    if args.top < 1:
        raise Failure(USAGE, f"--top must be at least 1, not {args.top}", "invalid_field")
    from canon_ledger.application.knowledge.ports import ProviderError

    services = bootstrap(args.db)
    try:
        try:
            service = services.search_service(args.provider)
        except ProviderError as e:
            raise Failure(USAGE, str(e), "provider_unavailable") from None
        known = services.collections()
        unknown = [c for c in args.collection if c not in known]
        if unknown:
            raise Failure(USAGE, f"no documents in collection {', '.join(unknown)} "
                                 f"(known: {', '.join(sorted(known)) or 'none'})", "unknown_collection")
        services.watch = _catch_up_watch(args)
        result = service.search(args.collection, args.query, args.top, feedback=args.feedback)
    finally:
        services.close()
    note = services.watch.note("first") if services.watch is not None else None
    if note:  # a search's stages are not hashed: the catch-up it paid for is one of them
        from canon_ledger.application.packets.packet import Stage

        result.stages.insert(0, Stage("catch-up", "done", note))
    if args.format == "json":
        _emit(result.as_dict())
        return OK
    print(f"search {args.query!r} in {', '.join(result.collections)} at position {result.position}: "
          f"{len(result.hits)} hit(s)")
    for n, hit in enumerate(result.hits, start=1):
        score = "" if hit.score is None else f"  score {hit.score:.3f}"
        flag = "  STALE (last good TLDR)" if hit.stale else ""
        print(f"{n:>3}. [{hit.kind}] {hit.id}{score}{flag}  sources {hit.sources[:5]}")
        body = " | ".join(line for line in hit.text.splitlines() if line.strip())
        print(f"     {body[:300]}{' ...' if len(body) > 300 else ''}")
    print("stages:")
    for stage in result.stages:
        print(f"  {stage.step:<10} {stage.status:<8} {stage.detail}")
    return OK


def cmd_compile(args: argparse.Namespace) -> int:
    from canon_ledger.application.knowledge.ports import ProviderError
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    services = bootstrap(args.db)
    try:
        try:
            compiler = services.compiler(args.provider)
        except ProviderError as e:
            raise Failure(USAGE, str(e), "provider_unavailable") from None
        with bar("compile", "page", disable=quiet(args.format)) as shown:
            report = compiler.nightly(args.budget, args.collection, lambda done, total: bar_to(shown, done, total))
    finally:
        services.close()
    if args.format == "json":
        _emit(report.as_dict())
    else:
        d = report.as_dict()
        print(f"compiled {d['compiled']} page(s), skipped {d['skipped']}, failed {d['failed']}; "
              f"{d['remaining_stale']} still stale; stopped: {d['stopped_reason']}"
              + (f" ({d['detail']})" if d["detail"] else ""))
    return OK


def cmd_lint(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)
    try:
        report = services.lint(args.collection)
    finally:
        services.close()
    if args.format == "json":
        _emit(report.as_dict())
    else:
        state = "green" if report.green else f"{len(report.issues)} issue(s)"
        print(f"lint: {state} ({report.pages} page(s), {report.uncompiled_topics} topic(s) not compiled yet)")
        for issue in report.issues:
            print(f"  {issue.code}: {issue.topic_id}: {issue.detail}")
    if not report.green:
        raise Failure(REJECTED, f"lint is not green: {len(report.issues)} issue(s)", "lint_not_green")
    return OK


def cmd_quota(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)
    try:
        status = services.quota.status(args.provider)
    finally:
        services.close()
    if args.format == "json":
        _emit(status)
    else:
        g, e = status["generate"], status["embed"]
        print(f"{status['provider']} on {status['day']} (resets {status['resets_at']}):")
        print(f"  generate: {g['spent']} spent, {g['left']} left of {g['cap']} (compile: {g['compile_spent']} of {g['compile_cap']})")
        print(f"  embed:    {e['spent']} spent, {e['left']} left of {e['cap']}")
        print(f"  refused:  {status['refused']}" + (f"; exhausted: {status['exhausted']}" if status["exhausted"] else ""))
    return OK


def cmd_quarantine(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db)
    try:
        for name in ("canon", "authoring", "knowledge", "retrieval"):  # what the log holds now
            services.read_models[name].catch_up()
        rows = services.quarantined()
    finally:
        services.close()
    if args.format == "json":
        for row in rows:
            _emit(row)
        return OK
    if not rows:
        print("no quarantined events: every read model applied every event")
    for row in rows:
        print(f"{row['projection']:<28} {row['position']:>8}  {row['event_type']:<24} {row['scope'] or '-':<20} "
              f"{row['error']}")
    return OK


def cmd_demo(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.demo import run_demo

    services = bootstrap(args.db)
    try:
        return run_demo(services, args.format)
    finally:
        services.close()


# -- wiring -----------------------------------------------------------------------------------
def _ledger(args: argparse.Namespace) -> CanonLedger:
    return open_ledger(args.db)


BUDGETS_HELP = ", ".join(f"{role} {budget:,}" for role, budget in DEFAULT_BUDGETS.items())
EPILOG = f"""Default packet budgets in tokens (tiktoken cl100k_base), unless the story's start_story
sets its own: {BUDGETS_HELP}.
Exit status: 0 done; 1 a command or check was refused; 2 bad usage or unreadable input;
3 the store is unavailable (unreachable, locked, read-only, or a SQLite file that does not exist).
A store: --db URL or ${URL_ENV} (default sqlite:///canon.db); `canon init` creates it."""


def build_parser() -> argparse.ArgumentParser:
    common = CanonArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"database URL (sqlite:///file.db or postgresql://user@host:port/db); default ${URL_ENV} or "
             f"sqlite:///canon.db. A SQLite file must exist (`canon init` creates it)",
    )
    common.add_argument("--format", choices=("text", "json"), default=argparse.SUPPRESS,
                        help="text for people (default) or json: one JSON object per line on stdout, errors "
                             "included")

    parser = CanonArgumentParser(prog="canon", description="Canon Ledger: event-sourced canon and token-budgeted "
                                 "context packets for long-form fiction.", parents=[common], epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

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

    p = add_verb(verbs, "packet", common, "compile a worker's token-budgeted context packet from confirmed canon",
                 "Compile a worker's context packet from confirmed canon only (drafts and unconfirmed\n"
                 "proposals never reach one), filled by tier P0..P4 within the token budget.\n"
                 f"Default budgets in tokens: {BUDGETS_HELP}\n"
                 "(a story's start_story may set its own).\n"
                 "The qa packet is the canon a draft is checked against. With --draft D it also holds that\n"
                 "submitted draft in P0, labelled unconfirmed (draft_under_review), and recalls the canon\n"
                 "the draft mentions; no other packet ever holds a draft.")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--role", required=True, choices=ROLES,
                   help="the worker the packet is for: " + ", ".join(ROLES) + " (planner, writer and qa also get "
                        "L1 retrieval from earlier chapters)")
    p.add_argument("--chapter", required=True, type=bounded(1, MAX_CHAPTER), help=f"chapter number, 1..{MAX_CHAPTER:,}")
    p.add_argument("--scene", help="only this scene card's keys (default: every scene of the chapter)")
    p.add_argument("--budget", type=bounded(0, MAX_BUDGET),
                   help=f"token budget, 0..{MAX_BUDGET:,} (default: the story's budget for the role)")
    p.add_argument("--after", type=bounded(0, MAX_POSITION), metavar="POSITION",
                   help="reflect at least this log position (one a write returned); it does not wait for later "
                        "writes, and a position beyond the log is refused (default: everything applied)")
    p.add_argument("--draft", type=an_id(MAX_ID), metavar="DRAFT_ID",
                   help="qa only: the submitted draft under review, put in P0 as unconfirmed text (an accepted or "
                        "rejected draft is refused)")
    p.add_argument("--no-record", action="store_true", help="do not record PacketIssued in the log")
    p.add_argument("--at", type=bounded(0, MAX_POSITION), metavar="POSITION",
                   help="the packet as it would have been at this past log position (replayed; not recorded)")
    p.set_defaults(run=cmd_packet)

    p = add_verb(verbs, "audit", common, "replay history to reproduce an issued packet, and show each item's lineage")
    p.add_argument("packet_id", metavar="PACKET_ID", help="a packet's id (pkt_...), from its packet_id field")
    p.set_defaults(run=cmd_audit)

    p = add_verb(verbs, "rebuild", common,
                 "rebuild read models into new tables while the current ones serve, then switch")
    p.add_argument("--projection", choices=("canon", "authoring", "knowledge", "retrieval", "vectors", "all"),
                   default="all", help="the read model to rebuild (default: all)")
    p.add_argument("--pause", type=bounded(0, 60_000), default=0, metavar="MS",
                   help="sleep between pages, to leave room for live traffic")
    p.add_argument("--page-size", type=bounded(1, 100_000), metavar="N",
                   help="events per transaction, 1..100,000 (default: each read model's own size)")
    p.add_argument("--recount", action="store_true",
                   help="a repair: count every token afresh (empty the token-count memo) and start a new build "
                        "even if one was left unfinished")
    p.set_defaults(run=cmd_rebuild)

    p = add_verb(verbs, "ingest", common, "ingest markdown/text files or folders into a knowledge collection")
    p.add_argument("--collection", required=True, help="the collection to ingest into (created on first use)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files (.md, .markdown, .txt, .text) or folders of them")
    p.set_defaults(run=cmd_ingest)

    p = add_verb(verbs, "search", common,
                 "hybrid keyword + semantic search of a knowledge collection, with its stages")
    p.add_argument("--collection", required=True, action="append", metavar="C",
                   help="a collection to search (repeat for several); a story's chapters are story:<id>")
    p.add_argument("query", metavar="QUERY", help="the words to search for")
    p.add_argument("--top", type=bounded(1, 1000), default=8, metavar="K", help="chunks to return, 1..1,000 (default 8)")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "offline"), choices=("offline", "gemini"),
                   help="gemini lets a broad query step back (one generate call, cached); default "
                        "$CANON_LLM_PROVIDER or offline")
    p.add_argument("--feedback", choices=FEEDBACK_MODES, default=None,
                   help="pseudo-relevance feedback: hybrid (the default: the fused first pass feeds RM3 and "
                        "Rocchio, then a second pass; RM3 alone when keyword search answers alone), alone (RM3 "
                        "only when keyword search answers alone), always (RM3 on the keyword list), off")
    p.set_defaults(run=cmd_search)

    p = add_verb(verbs, "compile", common, "compile stale wiki pages, oldest drift first, within the LLM quota")
    p.add_argument("--budget", type=bounded(0, 100_000),
                   help="pages at most (default: the compile quota for an LLM provider, else all)")
    p.add_argument("--collection", help="only this collection's pages (default: every collection)")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "offline"), choices=("offline", "gemini"),
                   help="offline (extractive, no network; the default unless $CANON_LLM_PROVIDER says) or gemini "
                        "($GEMINI_API_KEY)")
    p.set_defaults(run=cmd_compile)

    p = add_verb(verbs, "lint", common, "check the wiki (no LLM calls); exits 1 unless green")
    p.add_argument("--collection", help="only this collection (default: every collection)")
    p.set_defaults(run=cmd_lint)

    p = add_verb(verbs, "quota", common, "LLM calls spent and left today, and when the day resets")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "gemini"),
                   help="the provider whose quota to show (default $CANON_LLM_PROVIDER or gemini)")
    p.set_defaults(run=cmd_quota)

    p = add_verb(verbs, "quarantine", common,
                 "events a read model could not apply (skipped, with their error); a rebuild retries them")
    p.set_defaults(run=cmd_quarantine)

    p = add_verb(verbs, "demo", common, "apply the bundled sample serial to an embedded store and show it",
                 "Apply the bundled sample serial to a store (default sqlite:///canon-demo.db, created if\n"
                 "missing), then show its packets, an audit, a search and a rebuild.")
    p.set_defaults(run=cmd_demo)

    from canon_ledger.infrastructure import (cli_check, cli_export, cli_import, cli_knowledge, cli_mcp, cli_summarize,
                                             cli_worker)
    from canon_ledger.infrastructure.cli_service import add_verbs

    add_verbs(verbs, common, bounded)
    cli_worker.add_verbs(verbs, common, bounded)
    cli_mcp.add_verbs(verbs, common)
    cli_import.add_verbs(verbs, common)
    cli_export.add_verbs(verbs, common)
    cli_summarize.add_verbs(verbs, common)
    cli_check.add_verbs(verbs, common)
    cli_knowledge.add_verbs(verbs, common)
    return parser


CREATES_STORE = ("init", "demo")  # the verbs that may create a SQLite file; every other verb needs one
NO_STORE = ("schema",)  # the verbs that never open a store


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; its exit status. A reader that leaves early (`canon events | head`) ends
    the output quietly, the status unchanged: an error is still reported on stderr."""
    status = _run(list(sys.argv[1:] if argv is None else argv))
    try:
        sys.stdout.flush()  # a reader that has left is met here, not in the interpreter's exit
    except BrokenPipeError:
        _quiet("stdout")
    except OSError as e:  # a full disk, say: the output is incomplete, and the status says so
        _quiet("stdout")
        _say(f"canon: could not write the output: {e.strerror or e}")
        return status or REJECTED
    if argv is None:  # this process's own entry (``canon``, ``python -m``): it ends next
        # Its objects need no last garbage collection: the interpreter's pass over every object
        # the verb loaded (a writer packet's ~0.1 s of exit, issue 39) is skipped; resources were
        # closed by the verb, and the memory goes back with the process.
        gc.freeze()
    return status


class _Sink:
    """Where a stream with no file descriptor of its own writes once its reader has left."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def _quiet(name: str) -> None:
    """``sys.stdout`` or ``sys.stderr`` (``name``) points at /dev/null: the interpreter's last
    flush cannot fail again (a stream with no file descriptor is replaced by a sink)."""
    stream = getattr(sys, name)
    try:
        descriptor = stream.fileno()  # first: a stream with none opens nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, descriptor)
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: no descriptor to point elsewhere
        setattr(sys, name, _Sink())


def _say(line: str) -> None:
    """One line on stderr, written through at once. A reader of stderr that has left misses it:
    the error keeps its status, as an error's JSON line does on stdout (``_emit_error``)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except BrokenPipeError:
        _quiet("stderr")


def _emit_error(error: dict[str, Any]) -> None:
    """An error's JSON line, written through at once; a reader that has left misses it and the
    error keeps its status (its message is on stderr already)."""
    try:
        _emit({"error": error})
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet("stdout")


def _run(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as e:
        if wants_json(argv):  # an error is one JSON line on stdout and its reason on stderr, no usage lines
            _say(f"canon: error: {e}")
            _emit_error({"code": "usage_error", "message": str(e), "field": e.field})
        else:
            _say(f"{e.usage}canon: error: {e}")
        return USAGE
    args.db = getattr(args, "db", None)
    args.format = getattr(args, "format", None) or "text"
    if args.verb == "demo" and args.db is None:
        args.db = "sqlite:///canon-demo.db"
    try:
        if args.verb not in CREATES_STORE + NO_STORE and not getattr(args, "dry_run", False):
            require_store(args.db)
        status: int = args.run(args)
        return status  # its output is flushed by ``main``, where a reader that has left is met
    except Failure as e:
        _say(f"canon: {e}")
        if args.format == "json" and not e.reported:
            _emit_error({"code": e.code, "message": str(e), "field": None})
        return e.status
    except CanonError as e:
        _say(f"canon: {e.code}: {e.message}")
        if args.format == "json":
            _emit_error(e.as_dict())
        if e.code in UNAVAILABLE_CODES:
            return UNAVAILABLE
        return USAGE if isinstance(e, InvalidCommand) or e.code in USAGE_CODES else REJECTED
    except BrokenPipeError:  # the reader left (`canon events | head`): stop quietly, as other tools do
        _quiet("stdout")
        _quiet("stderr")  # which of the two it was, the exception does not say; nothing more is written
        return OK
    except Exception as e:  # noqa: BLE001 - only store faults are handled here
        if not is_store_fault(e):
            raise
        reason = scrubbed(e, args.db)
        display = store_config(resolve_url(args.db)).display
        _say(f"canon: store unavailable at {display}: {reason}")
        if args.format == "json":
            _emit_error({"code": "store_unavailable", "message": f"store unavailable at {display}: {reason}",
                         "field": None})
        return UNAVAILABLE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
