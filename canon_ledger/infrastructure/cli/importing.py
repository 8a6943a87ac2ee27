"""``canon import manuscript``: a Markdown or plain-text book into a story, chapter by chapter,
through the ordinary commands (``application.manuscript_import``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, UNAVAILABLE, USAGE, Failure
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.infrastructure.cli.parsing import add_verb, bounded
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.progress import bar, quiet

MAX_MANUSCRIPT_BYTES = 64 * 1024 * 1024  # War and Peace is 3.2 MB


def _read(path: str) -> str:
    file = Path(path)
    try:
        if file.stat().st_size > MAX_MANUSCRIPT_BYTES:
            raise Failure(USAGE, f"{path}: larger than {MAX_MANUSCRIPT_BYTES:,} bytes", "file_too_large")
        return file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(USAGE, f"{path}: cannot read it as UTF-8 text ({type(e).__name__})", "unreadable_file") from None


def cmd_import_manuscript(args: argparse.Namespace) -> int:
    from canon_ledger.domain.manuscript import CHAPTER, VOLUME, ManuscriptError, pattern, split

    text = _read(args.file)
    try:
        manuscript = split(text, chapter=pattern(args.chapter_pattern, CHAPTER, "chapter"),
                           volume=pattern(args.volume_pattern, VOLUME, "volume"))
    except ManuscriptError as e:
        raise Failure(USAGE, f"{args.file}: {e}", e.code) from None
    structure = manuscript.structure()
    if args.dry_run:
        if args.format == "json":
            print(dumps({"story_id": args.story, "dry_run": True, **structure}))
        else:
            _print_structure(structure)
        return OK
    from canon_ledger.application.manuscript_import import import_manuscript
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        new_story = services.views().story_head(args.story) is None
        shown = bar(f"import {args.story}", "chapter", disable=quiet(args.format), total=len(manuscript.chapters))
        try:
            report = import_manuscript(services.ledger, manuscript, args.story, title=args.title or Path(args.file).stem,
                                       new_story=new_story, progress=shown.update)
        except CanonError as e:  # a command out of bounds: nothing was applied
            raise Failure(USAGE, f"{args.file}: {e.message}", e.code) from None
        finally:
            shown.close()
        indexed = _index(services, args)
    return _shown(args.format, report, lambda counts: [
        f"{report.chapters} chapter(s) in {report.volumes} volume(s) into {args.story}: {counts}; "
        f"{len(report.new_drafts)} chapter text(s) accepted; log at {report.position}"], indexed)


def cmd_import_lorebook(args: argparse.Namespace) -> int:
    from canon_ledger.domain.lorebook import LorebookError, read

    if args.series:
        args.story = args.series  # a series' bible is the story of the series' id

    try:
        data = Path(args.file).read_bytes()[:MAX_MANUSCRIPT_BYTES + 1]
    except OSError as e:
        raise Failure(USAGE, f"{args.file}: cannot read it ({type(e).__name__})", "unreadable_file") from None
    if len(data) > MAX_MANUSCRIPT_BYTES:
        raise Failure(USAGE, f"{args.file}: larger than {MAX_MANUSCRIPT_BYTES:,} bytes", "file_too_large")
    try:
        book = read(data)
    except LorebookError as e:
        raise Failure(USAGE, f"{args.file}: {e}", e.code) from None
    from canon_ledger.infrastructure.cli import lorebook

    if args.dry_run:
        return lorebook.dry_run(args, book)
    from canon_ledger.application.lorebook_import import import_lorebook
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        try:
            head = services.views().story_head(args.story)
            if args.series and not (head and head["series"] and head["series"]["role"] == "bible"):
                _start_series(services, args.story, args.title or Path(args.file).stem)
                head = services.views().story_head(args.story)
            report = import_lorebook(services.ledger, book, args.story, kind=args.kind, confirm=args.confirm,
                                     valid_from=args.valid_from, new_story=head is None,
                                     title=args.title or Path(args.file).stem)
        except CanonError as e:  # the story's start out of bounds: nothing was applied (an entry's is in the report)
            raise Failure(USAGE, f"{args.file}: {e.message}", e.code) from None
        indexed = _index(services, args)
    _shown(args.format, report, lambda counts: [
        f"{report.entries} entr{'y' if report.entries == 1 else 'ies'} from a {book.format} lorebook into "
        f"{args.story} ({'proposed and confirmed' if args.confirm else 'proposed'}): {counts}; log at "
        f"{report.position}", *(f"  disabled, not imported: {name}" for name in report.disabled),
        *lorebook.refused_lines(report)], indexed)
    return lorebook.refused(args.format, report)


def _start_series(services: Any, series: str, title: str) -> None:
    """``--series``: start the series (its bible the story imported into) unless it exists."""
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.domain.ids import content_digest

    [result] = services.ledger.apply([parse_command({
        "type": "start_series", "command_id": f"lore:series:{content_digest(series)}", "story_id": series,
        "title": title})])
    if not result.ok:
        raise CanonError(result.error.code, result.error.message, result.error.field)


def _index(services: Any, args: argparse.Namespace) -> Any:
    """What the import's commands left behind brought into every read model now (a bar on a
    terminal), left to a running worker, or (``--no-index``) to the next read: ``indexing.Indexed``."""
    from canon_ledger.infrastructure.indexing import index_now

    return index_now(services, shown=not quiet(args.format), skip=args.no_index)


def _shown(fmt: str, report: Any, lines: Callable[[str], list[str]], indexed: Any) -> int:
    """The report and what was ``indexed``, as JSON or as ``lines(counts)`` and a line; then OK,
    or the ``Failure`` of an import that stopped at a refused batch, or whose indexing failed
    (its commands stand: exit 3, and importing again indexes)."""
    if fmt == "json":
        print(dumps({**report.as_dict(), "indexed": indexed.as_dict()}))
    else:
        for line in lines(", ".join(f"{n} {s}" for s, n in sorted(report.counts.items())) or "nothing"):
            print(line)
        print(indexed.line())
    if report.failed is not None:
        error = report.failed.get("error", {})
        print(f"refused: {error.get('code')}: {error.get('message')}", file=sys.stderr)
        raise Failure(REJECTED, "the import stopped at a refused batch (earlier batches are applied; "
                      "importing again resumes)", error.get("code", "rejected"), reported=fmt == "json")
    if indexed.error is not None:
        raise Failure(UNAVAILABLE, f"indexing failed after the import, whose commands are applied: {indexed.error} "
                      "(importing again appends nothing and indexes; so does the next packet or a worker)",
                      "indexing_failed", reported=fmt == "json")
    return OK


def _print_structure(structure: dict[str, Any]) -> None:
    chapters = {c["chapter"]: c for c in structure["chapters"]}
    print(f"{len(chapters)} chapter(s), {len(structure['volumes'])} volume(s), {structure['words']:,} words"
          f"; front matter {structure['front_matter_words']:,} words")
    for v in structure["volumes"]:
        print(f"volume {v['volume']}: {v['heading'] or '(no heading)'}")
        for n in v["chapters"]:
            c = chapters[n]
            title = f" {c['title']}" if c["title"] else ""
            print(f"  chapter {n:>4} ({c['heading']}){title}: {c['words']:,} words")


def _no_index(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-index", action="store_true",
                   help="do not bring the read models and the search indexes (keyword, vectors) up to date before "
                        "returning (the default, with a bar on a terminal, unless a running `canon worker` follows "
                        "them: then it is left to it); the next packet or search catches up first")


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "import", common, "import a manuscript (Markdown or plain text) or a lorebook into a story")
    kinds = p.add_subparsers(dest="import_kind", required=True, metavar="manuscript|lorebook")
    m = add_verb(kinds, "manuscript", common,
                 "a book's chapters as planned chapters with accepted drafts; re-importing is idempotent",
                 "Detects chapter headings (`# Chapter 3`, `CHAPTER 3. Title`, `Chapter III`, `Chapter Three`) and "
                 "volume headings (`BOOK ONE`, `Part 2`, `VOLUME I`, `# Book 1`, `FIRST EPILOGUE`); text before the "
                 "first chapter is front matter. Issues start_story (if the story is new), plan_chapter, "
                 "submit_draft and accept_draft in atomic batches, with ids derived from the content: an unchanged "
                 "file imports as all duplicates, an edited chapter as one new accepted draft.")
    m.add_argument("file", help="the manuscript (UTF-8 Markdown or plain text)")
    m.add_argument("--story", required=True, help="the story to import into (started if new)")
    m.add_argument("--title", help="the new story's title (default: the file's name)")
    m.add_argument("--dry-run", action="store_true", help="print the detected volumes and chapters; write nothing")
    m.add_argument("--chapter-pattern", metavar="REGEX",
                   help="a chapter heading line (whole line, case-insensitive; group 1, if any, is its title)")
    m.add_argument("--volume-pattern", metavar="REGEX", help="a volume heading line (as --chapter-pattern)")
    _no_index(m)
    m.set_defaults(run=cmd_import_manuscript)

    from canon_ledger.domain.canon import KINDS

    lb = add_verb(kinds, "lorebook", common, "a lorebook's enabled entries as canon proposals (--confirm: confirmed)",
                  "Reads SillyTavern world info (its entries an object or a list), a CCv3 lorebook (lorebook_v3), a "
                  "character card (chara_card_v2/v3, JSON or PNG: its character_book), a NovelAI .lorebook (or the "
                  "lorebook of a .story or .scenario) and a RisuAI lorebook export. Each enabled entry becomes "
                  "propose_canon (key: a slug of its name; aliases: its keys; text: its content; fields.lorebook: "
                  "the source's settings, whole: its keys then bring it into packets when mentioned); disabled "
                  "entries are reported, not imported; an entry out of bounds (content, keys) is reported by index "
                  "and name, not imported, and the others are (exit 1). Ids derive from the content: importing "
                  "again appends nothing.")
    lb.add_argument("file", help="the lorebook (.json, .lorebook or a .png character card)")
    where = lb.add_mutually_exclusive_group(required=True)
    where.add_argument("--story", help="the story (started by the import if it is new)")
    where.add_argument("--series", metavar="SERIES", help="a series' bible: the series is started (its bible the "
                       "story SERIES) unless it exists, and the entries go to its bible, which every book inherits")
    lb.add_argument("--title", help="the new story's title (default: the file's name)")
    lb.add_argument("--kind", choices=KINDS, default="world_rule", help="the entries' canon kind (default world_rule)")
    lb.add_argument("--confirm", action="store_true", help="confirm every proposal in the same atomic batch")
    lb.add_argument("--valid-from", type=bounded(1, MAX_CHAPTER), default=1, metavar="N",
                    help="the chapter the entries are in force from (default 1)")
    _no_index(lb)
    lb.add_argument("--dry-run", action="store_true",
                    help="print each entry as it would be imported (or why not); write nothing")
    lb.set_defaults(run=cmd_import_lorebook)
