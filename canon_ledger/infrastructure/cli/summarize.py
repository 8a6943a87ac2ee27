"""``canon summarize``: summaries for a story's accepted chapters that have none, and for its
volumes, as ordinary commands (``application.summaries``): extractive and offline by default
(``domain.summary``), Gemini within the day's quota with ``--provider gemini``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, Failure, unavailable_provider_as_usage
from canon_ledger.infrastructure.cli.parsing import add_verb, bounded
from canon_ledger.infrastructure.jsonout import dumps


def chapter_range(text: str) -> tuple[int, int]:
    """An argparse type: ``A-B`` (``A`` <= ``B``) or ``N`` (``N-N``), chapters within 1..MAX_CHAPTER,
    or a usage error saying what is wrong."""
    number = bounded(1, MAX_CHAPTER)
    head, dash, tail = text.strip().partition("-")
    if not head.strip() or (dash and not tail.strip()):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a chapter range: A-B (e.g. 1-20) or one chapter N")
    first = number(head)
    last = number(tail) if dash else first
    if first > last:
        raise argparse.ArgumentTypeError(f"{text.strip()[:40]}: the first chapter ({first:,}) is after the last "
                                         f"({last:,})")
    return first, last


chapter_range.__name__ = "chapter range"


def cmd_summarize(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    first, last = args.chapters or (None, None)
    with bootstrap(args.db) as services:
        with unavailable_provider_as_usage():
            summarizer = services.summarizer(args.provider)
        with bar(f"summarize {args.story}", "chapter", disable=quiet(args.format)) as shown:
            report = summarizer.run(args.story, first, last, lambda done, total: bar_to(shown, done, total))
    if args.format == "json":
        print(dumps(report.as_dict()))
    else:
        for line in _lines(report.as_dict()):
            print(line)
    if report.refused is None:
        return OK
    error = report.refused.get("error", {})
    print(f"refused: {error.get('code')}: {error.get('message')}", file=sys.stderr)
    raise Failure(REJECTED, "the summaries stopped at a refused batch (earlier ones are applied; running again "
                  "resumes)", error.get("code", "rejected"), reported=args.format == "json")


def _lines(d: dict[str, Any]) -> list[str]:
    reasons: dict[str, int] = {}
    for s in d["skipped"]:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    volumes = [v for v in d["volumes"] if v["outcome"] == "summarised"]
    skipped = f"; skipped {len(d['skipped'])} ({', '.join(f'{n} {r}' for r, n in sorted(reasons.items()))})" \
        if d["skipped"] else ""
    lines = [f"summarised {len(d['summarised'])} chapter(s) and {len(volumes)} volume(s) of {d['story_id']} "
             f"({d['method']}){skipped}"]
    lines += [f"  volume {v['volume']} not summarised: {v['reason']}"
              + (f" (chapters {v['chapters']})" if v.get("chapters") else "")
              for v in d["volumes"] if v["outcome"] == "skipped" and v["reason"] != "has_summary"]
    lines += [f"  failed: {'volume ' + str(f['volume']) if 'volume' in f else 'chapter ' + str(f['chapter'])}: "
              f"{f['detail']}" for f in d["failed"]]
    remaining = d["remaining"]
    again = " (run again to resume)" if remaining and d["stopped_reason"] == "quota" else ""
    lines.append(f"stopped: {d['stopped_reason']}" + (f" ({d['detail']})" if d["detail"] else "")
                 + f"; {len(remaining)} chapter(s) still without a summary{again}; log at {d['position']}")
    return lines


# ``domain.summary``'s METHOD, CHAPTER_WORDS and VOLUME_WORDS, for the help: that module is not
# imported to build the parser (every verb builds it; a test holds the two equal).
METHOD, CHAPTER_WORDS, VOLUME_WORDS = "extractive-v1", 120, 250


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(
        verbs, "summarize", common, "record summaries of accepted chapters (and volumes) that have none",
        "Record a summary for each accepted chapter that has none (record_chapter_summary), then for each\n"
        "volume without one whose planned chapters are all accepted and summarised (record_volume_summary,\n"
        "from their summaries). A chapter or volume that has a summary keeps it: an author's own summary\n"
        "wins, and running again appends nothing (command ids derive from the story, the chapter, its text\n"
        "and the summary).\n\n"
        f"offline (the default; {METHOD}): no network. The chapter's own sentences, chosen by the\n"
        "frequency of their content words in the chapter (names weigh more; English stop words, and in\n"
        "any language words in over half the sentences, weigh nothing), with a bonus for the opening\n"
        "and closing sentences; the best are taken while they fit, each new one favouring words not yet\n"
        f"covered, and kept in text order: up to {CHAPTER_WORDS} words a chapter, {VOLUME_WORDS} a volume (CJK: a\n"
        "character counts half a word; sentences end at 。！？ too). canon_ledger/domain/summary.py\n"
        "states the method in full.\n\n"
        "gemini ($GEMINI_API_KEY): one generate call per chapter and per volume, each reserved in the\n"
        "quota ledger (the day's summarize share, then the generate cap; `canon quota`). The run stops\n"
        "cleanly when the quota refuses or Gemini answers 429, reporting what is left; running it\n"
        "again (the next day) resumes with the chapters still without a summary.")
    p.add_argument("--story", required=True, help="the story whose chapters to summarise")
    p.add_argument("--chapters", type=chapter_range, metavar="A-B",
                   help=f"only chapters A..B (or one chapter N), within 1..{MAX_CHAPTER:,} (default: every chapter); "
                        "the volumes they are in are summarised when complete")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "offline"), choices=("offline", "gemini"),
                   help="offline (extractive, no network; the default unless $CANON_LLM_PROVIDER says) or gemini "
                        "($GEMINI_API_KEY)")
    p.set_defaults(run=cmd_summarize)
