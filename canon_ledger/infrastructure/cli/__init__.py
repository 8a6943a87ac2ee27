"""``canon``: the command line (every verb: ``canon --help``; docs/commands.md).

Exit status: 0 success; 1 some command was rejected or lost a race (details on stdout);
2 bad usage or unreadable input; 3 the store is unavailable. Any non-zero exit prints a
one-line reason on stderr; with ``--format json`` stdout carries only JSON.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any

from canon_ledger.domain.errors import CanonError, InvalidCommand
from canon_ledger.infrastructure.cli import (check, export, importing, knowledge, log, mcp, packets, service, store,
                                            summarize, who_knows, worker)
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, UNAVAILABLE, UNAVAILABLE_CODES, USAGE, USAGE_CODES, Failure
from canon_ledger.infrastructure.cli.output import emit
from canon_ledger.infrastructure.cli.packets import BUDGETS_HELP
from canon_ledger.infrastructure.cli.parsing import CanonArgumentParser, UsageError, wants_json
from canon_ledger.infrastructure.store_faults import is_store_fault, scrubbed
from canon_ledger.infrastructure.stores import URL_ENV, require_store, resolve_url, store_config

# Each module registers its own verbs (``add_verbs``).
VERB_GROUPS = (log, packets, knowledge, store, service, worker, mcp, importing, export, summarize, check, who_knows)

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
    for group in VERB_GROUPS:  # in this order in ``canon --help``
        group.add_verbs(verbs, common)
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
        # the verb loaded (a share of a short verb's time: docs/benchmarks.md) is skipped;
        # resources were closed by the verb, and the memory goes back with the process.
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
        emit({"error": error})
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
