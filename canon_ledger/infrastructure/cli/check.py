"""``canon check``: the continuity check of a draft against the confirmed canon in force at its
chapter (``application.continuity``). No LLM call by default; ``--provider gemini``
adds one metered review, falling back to the deterministic findings (its stage says so)."""

from __future__ import annotations

import argparse
from typing import Any

from canon_ledger.domain.bounds import MAX_ID, MAX_POSITION
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, Failure, unavailable_provider_as_usage
from canon_ledger.infrastructure.cli.parsing import add_verb, an_id, bounded
from canon_ledger.infrastructure.jsonout import dumps

QUOTED = 60  # characters of a finding's span shown in the text output


def cmd_check(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        with unavailable_provider_as_usage():
            report = services.continuity(args.provider).check(args.story, args.draft, after=args.after,
                                                              provider=args.provider)
    body = report.as_dict()
    if args.format == "json":
        print(dumps(body))
    else:
        for line in lines(body):
            print(line)
    if report.errors:
        raise Failure(REJECTED, f"draft {args.draft} has {report.errors} continuity error(s) against the canon in "
                      f"force at chapter {report.chapter}", "continuity_errors", reported=True)
    return OK


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= QUOTED else flat[:QUOTED - 3] + "...")


def finding_line(f: dict[str, Any]) -> str:
    """One finding: severity, type, entry, the draft's span (quoted, cut), message, evidence positions."""
    entry, span = f["entry"], f["span"]
    proof = ", ".join(f"position {e['source']} (chapter {e['valid_from']})" for e in f["evidence"])
    return (f"{f['severity'].upper():<7} {f['type']:<21} {entry['kind']} {entry['key']} ({entry['name']}) at "
            f"{span['start']}-{span['end']} {_quote(span['text'])}: {f['message']}  [evidence: {proof or 'none'}; "
            f"{f['id']}]")


def lines(d: dict[str, Any]) -> list[str]:
    out = [finding_line(f) for f in d["findings"]]
    dismissed = f", {len(d['dismissed'])} dismissed as intentional" if d["dismissed"] else ""
    out.append(f"check {d['story_id']}/{d['draft_id']} (chapter {d['chapter']}, {d['status']}) against canon at "
               f"position {d['position']}: {d['errors']} error(s), {d['warnings']} warning(s){dismissed}")
    out.append("stages:")
    out += [f"  {s['step']:<14} {s['status']:<8} {s['detail']}" for s in d["stages"]]
    return out


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(
        verbs, "check", common, "check a draft against the confirmed canon in force at its chapter; exits 1 on errors",
        "Check a draft against the confirmed canon in force at its chapter (continuity):\n"
        "entries not yet in canon or retired, spoilers of what canon hides until a later chapter, a\n"
        "field stated otherwise than canon says, a dead (missing, imprisoned, ...) character acting.\n"
        "Each finding has the draft's span and the log positions of the canon events that prove it;\n"
        "findings a person dismissed on the draft are left out. Deterministic, no LLM call by default.\n"
        "Exit 0 with no error finding (warnings allowed), 1 with any.")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--draft", required=True, type=an_id(MAX_ID), metavar="DRAFT_ID", help="the draft to check")
    p.add_argument("--after", type=bounded(0, MAX_POSITION), metavar="POSITION",
                   help="reflect at least this log position (one a write returned); a position beyond the log is "
                        "refused (default: everything applied)")
    p.add_argument("--provider", default="offline", choices=("offline", "gemini"),
                   help="offline (the rules alone, no network; the default) or gemini (one metered review of the "
                        "draft and its evidence, $GEMINI_API_KEY; on any failure the rules' findings stand, and "
                        "the stages say so)")
    p.set_defaults(run=cmd_check)

