"""``canon export lorebook``: a story's confirmed canon in force at a chapter, as a lorebook
file (``application.lorebook_export``).

The lorebook's format and the CLI's output format share the word ``--format``: every verb's
``--format text|json`` says how results are printed, and the issue spells the lorebook's format
``--format sillytavern|lorebook_v3|novelai``. This verb takes both: its ``--format`` accepts the
two output formats and the three lorebook formats (a lorebook format there means ``--as`` that
format, with text output), and ``--as`` (or ``--lorebook-format``) names the lorebook format
alone, so ``--as novelai --format json`` gets the JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.lorebook_export import TARGETS
from canon_ledger.infrastructure.cli.errors import OK, USAGE, Failure
from canon_ledger.infrastructure.cli.parsing import CanonArgumentParser, add_verb, bounded
from canon_ledger.infrastructure.jsonout import dumps

OUTPUT_FORMATS = ("text", "json")


def _lorebook_format(args: argparse.Namespace) -> str:
    """The lorebook format named by ``--as`` or ``--format``; ``args.format`` is left the output's."""
    named = args.format if args.format in TARGETS else None
    if named is not None:
        args.format = "text"
    if args.lorebook_format and named and args.lorebook_format != named:
        raise Failure(USAGE, f"--as {args.lorebook_format} and --format {named} name two lorebook formats",
                      "conflicting_formats")
    chosen = args.lorebook_format or named
    if chosen is None:
        raise Failure(USAGE, f"name the lorebook format: --as {'|'.join(TARGETS)} (or --format ...)",
                      "lorebook_format_required")
    return str(chosen)


def _write_atomically(path: Path, text: str) -> None:
    """``text`` at ``path`` whole or not at all: a temporary file beside it, then a rename."""
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise Failure(USAGE, f"{path}: cannot write there ({e.strerror})", "unwritable_output") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as e:
        Path(temporary).unlink(missing_ok=True)
        raise Failure(USAGE, f"{path}: cannot write it ({e.strerror})", "unwritable_output") from None


def cmd_export_lorebook(args: argparse.Namespace) -> int:
    target = _lorebook_format(args)
    from canon_ledger.application.lorebook_export import export_lorebook
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        exported = export_lorebook(services.views(), services.ledger.event_log, args.story, args.as_of, target,
                                   kinds=tuple(args.kind or ()))
    body = json.dumps(exported.document, ensure_ascii=False, indent=2) + "\n"
    if args.output is None:
        print(body, end="")
        return OK
    _write_atomically(Path(args.output), body)
    report = {**exported.report(), "file": args.output}
    if args.format == "json":
        print(dumps(report))
    else:
        sources = ", ".join(f"{n} {fmt}" for fmt, n in report["by_source"].items()) or "none"
        print(f"{report['entries']} entr{'y' if report['entries'] == 1 else 'ies'} of {args.story} in force at chapter "
              f"{args.as_of} written to {args.output} as {target} (from: {sources}); left out as hidden: "
              f"{report['hidden']} entr{'y' if report['hidden'] == 1 else 'ies'}, {report['hidden_nodes']} chain node(s)")
    return OK


def _without_format(common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``common``'s options but ``--format``, which this verb defines itself (argparse has no
    public way to leave out one of a parent's options; its actions are shared, not copied)."""
    parent = CanonArgumentParser(add_help=False)
    for action in common._actions:
        if "--format" not in action.option_strings:
            parent._add_action(action)
    return parent


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "export", common, "export a story's confirmed canon (as a lorebook)")
    kinds = p.add_subparsers(dest="export_kind", required=True, metavar="lorebook")

    from canon_ledger.domain.canon import KINDS

    lb = add_verb(kinds, "lorebook", _without_format(common),
                  "confirmed canon in force at a chapter as SillyTavern world info, a CCv3 lorebook or a NovelAI "
                  "lorebook",
                  "Writes the story's confirmed canon in force at chapter --as-of (nothing hidden then: an entry "
                  "hidden until a later chapter is left out, a chain's later nodes dropped) as SillyTavern world "
                  "info (sillytavern), a CCv3 lorebook (lorebook_v3) or a NovelAI .lorebook (novelai). An entry a "
                  "`canon import lorebook` brought is written back whole into its own format (a character card's "
                  "book into lorebook_v3), its content the canon text: importing the export gives the same entries. "
                  "Others get the format's fields with their activation (keys: the name and aliases, or the "
                  "entry's fields.recall). Without -o the lorebook goes to stdout; with -o it is written whole "
                  "(a temporary file, then a rename) and a summary is printed.")
    lb.add_argument("--story", required=True, help="the story (it must exist)")
    lb.add_argument("--as-of", type=bounded(1, MAX_CHAPTER), required=True, metavar="K",
                    help="the chapter: the canon in force then, nothing hidden then")
    lb.add_argument("--as", "--lorebook-format", dest="lorebook_format", choices=TARGETS,
                    help="the lorebook's format")
    lb.add_argument("--format", choices=OUTPUT_FORMATS + TARGETS, default=argparse.SUPPRESS,
                    help="text (default) or json: how the summary is printed; or the lorebook's format, as --as")
    lb.add_argument("-o", "--output", metavar="FILE", help="write the lorebook here (default: stdout)")
    lb.add_argument("--kind", action="append", choices=KINDS, help="only entries of this kind (repeatable)")
    lb.set_defaults(run=cmd_export_lorebook)
