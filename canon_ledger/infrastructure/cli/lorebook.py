"""``canon import lorebook``'s dry run and its refused entries (``cli.importing`` runs the verb)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from canon_ledger.domain.lorebook import Lorebook
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, Failure
from canon_ledger.infrastructure.jsonout import dumps


def dry_run(args: argparse.Namespace, book: Lorebook) -> int:
    """Print what importing ``book`` would bring, entry by entry, and write nothing (the store is
    not opened: whether the story exists, or an entry is imported already, is not asked)."""
    from canon_ledger.application.lorebook_import import plan
    from canon_ledger.infrastructure.tokenizer import token_counter

    planned = plan(book, args.story, kind=args.kind, confirm=args.confirm, valid_from=args.valid_from)
    tokens = token_counter()
    entries = [p.as_dict() | {"tokens": tokens.count(p.entry.text)} for p in planned]
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    if args.format == "json":
        print(dumps({"story_id": args.story, "dry_run": True, "format": book.format, "name": book.name,
                     "counts": counts, "entries": entries}))
        return OK
    shown = {"import": "to import", "refused": "refused (out of bounds)", "disabled": "disabled"}
    summary = ", ".join(f"{counts[s]} {said}" for s, said in shown.items() if s in counts) or "nothing"
    print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} in a {book.format} lorebook for {args.story}: "
          f"{summary} (dry run: nothing written)")
    for e in entries:
        print(_line(e))
    return OK


def _named(e: dict[str, Any]) -> str:
    uid = f" (uid {e['uid']})" if e["uid"] != str(e["index"]) else ""
    return f"entry {e['index']} \"{e['name']}\"{uid}"


def _line(e: dict[str, Any]) -> str:
    if e["status"] == "disabled":
        return f"  {_named(e)}: disabled, not imported"
    keys = ", ".join(e["keys"][:8]) + (f" (+{len(e['keys']) - 8})" if len(e["keys"]) > 8 else "")
    activation = e["activation"]
    if activation == "selective":
        activation += f" ({e['logic']}: {', '.join(e['secondary_keys'][:8])})"
    order = f"; order {e['order']:g}" if e["order"] is not None else ""
    ignore = "; ignores the budget" if e["ignore_budget"] else ""
    tokens = f"{e['tokens']:,} token{'' if e['tokens'] == 1 else 's'}"
    line = (f"  {_named(e)} -> {e['kind']} {e['key']}: keys [{keys}]; {activation}; {tokens} "
            f"({e['chars']:,} chars){order}{ignore}")
    if e["refusal"] is not None:
        line += f"\n    refused: {e['refusal']['code']}: {e['refusal']['message']}"
    return line


def refused_lines(report: Any) -> list[str]:
    """The report's refused entries, a line each."""
    return [f"  refused, not imported: {_named(r)}: {r['code']}: {r['message']}" for r in report.refused]


def refused(fmt: str, report: Any) -> int:
    """OK, or the ``Failure`` of an import that left entries out of bounds out (the others imported)."""
    if not report.refused:
        return OK
    first = report.refused[0]
    for r in report.refused:
        print(f"refused: {_named(r)}: {r['code']}: {r['message']}", file=sys.stderr)
    n = len(report.refused)
    raise Failure(REJECTED, f"{n} entr{'y' if n == 1 else 'ies'} out of bounds not imported (the others are; "
                  "mend the file and import it again)", first["code"], reported=fmt == "json")
