#!/usr/bin/env python
"""``canon summarize`` offline throughput on real books (issue 40): chapters/s and words/s.

    python benchmarks/bench_summarize.py [BOOK ...] [--repeats N] [--stores sqlite,postgres]
                                         [--pg-url URL] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Per book (default: the three committed ones, War and Peace, Moby-Dick,
Pride and Prejudice; a ``.gz`` is read decompressed), medians of ``--repeats`` runs:

- **extractive**: ``domain.summary.summarise`` over every chapter's text, in this process, no
  store: the method alone;
- **summarize**, per store: the book imported into a fresh store (``import_manuscript``, not
  timed), the canon and authoring read models caught up (timed apart: *catch-up s*, what the first
  read after an import pays whatever reads it), then ``Services.summarizer("offline").run`` as
  ``canon summarize --story S`` runs it: every chapter summarised and recorded
  (``record_chapter_summary`` in atomic batches), then every volume. *words* are the chapters'
  words (what is read); events are what the run appended. Then the same run again: it finds every
  chapter summarised and appends nothing (*re-run s*; the log position is checked unchanged).

Throughput excludes the import and the catch-up. The hashing embedder stands in (nothing here
embeds).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (ROOT, add_common_options, emit, header, loadavg, log, machine_info, median,  # noqa: E402
                    stores_for)

from canon_ledger.application.manuscript_import import import_manuscript  # noqa: E402
from canon_ledger.domain.manuscript import split  # noqa: E402
from canon_ledger.domain.summary import METHOD, summarise  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

BOOKS = [ROOT / "tests" / "fixtures" / name for name in ("war_and_peace.txt", "moby_dick.txt.gz",
                                                         "pride_and_prejudice.txt.gz")]


def read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8-sig")


def extractive(texts: list[str], repeats: int) -> dict[str, Any]:
    """The method alone: every chapter summarised, ``repeats`` times; the median run."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for text in texts:
            summarise(text)
        runs.append(time.perf_counter() - t0)
    seconds = median(runs)
    words = sum(len(t.split()) for t in texts)
    return {"seconds": round(seconds, 3), "chapters_per_s": round(len(texts) / seconds, 1),
            "words_per_s": round(words / seconds)}


def one_run(url: str, book: Any) -> dict[str, Any]:
    services = bootstrap(url, embedder="hashing")
    try:
        t0 = time.perf_counter()
        report = import_manuscript(services.ledger, book, "book", title="book", new_story=True)
        imported = time.perf_counter() - t0
        assert report.failed is None, report.failed
        t0 = time.perf_counter()
        services.views()  # canon and authoring caught up with the import
        catch_up = time.perf_counter() - t0
        before = services.ledger.event_log.position()
        t0 = time.perf_counter()
        done = services.summarizer("offline").run("book")
        seconds = time.perf_counter() - t0
        assert done.stopped_reason == "done" and not done.failed and not done.remaining, done.as_dict()
        after = services.ledger.event_log.position()
        t0 = time.perf_counter()
        again = services.summarizer("offline").run("book")
        rerun = time.perf_counter() - t0
        assert again.summarised == [] and services.ledger.event_log.position() == after, "a re-run appended events"
    finally:
        services.close()
    return {"import_s": imported, "catch_up_s": catch_up, "seconds": seconds, "rerun_s": rerun,
            "chapters": len(done.summarised), "volumes": sum(1 for v in done.volumes if v["outcome"] == "summarised"),
            "events": after - before}


def measure(path: Path, stores: list[Any], repeats: int) -> dict[str, Any]:
    book = split(read(path))
    texts = [c.text for c in book.chapters if c.text.strip()]
    words = sum(len(t.split()) for t in texts)
    row: dict[str, Any] = {"book": path.name, "chapters": len(texts), "words": words,
                           "extractive": extractive(texts, max(repeats, 5))}
    for store in stores:
        runs = []
        for n in range(repeats):
            log(f"{path.name}: {store.kind} run {n + 1}/{repeats}")
            with store.fresh() as url:
                runs.append(one_run(url, book))
        seconds = median([r["seconds"] for r in runs])
        row[store.kind] = {
            "summarised": runs[0]["chapters"], "volumes": runs[0]["volumes"], "events": runs[0]["events"],
            "seconds": round(seconds, 3), "chapters_per_s": round(runs[0]["chapters"] / seconds, 1),
            "words_per_s": round(words / seconds), "events_per_s": round(runs[0]["events"] / seconds),
            "rerun_s": round(median([r["rerun_s"] for r in runs]), 3),
            "catch_up_s": round(median([r["catch_up_s"] for r in runs]), 3),
            "import_s": round(median([r["import_s"] for r in runs]), 3), "runs": len(runs)}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("books", nargs="*", type=Path, help="plain-text or .gz books (default: the committed three)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per book and store (default 3); the median")
    parser.add_argument("--stores", default="sqlite", help="comma-separated: sqlite, postgres (default sqlite)")
    add_common_options(parser)
    args = parser.parse_args()
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    m = machine_info(args.pg_url if "postgres" in kinds else None)
    stores, skipped = stores_for(kinds, args.pg_url)
    started = time.perf_counter()
    try:
        rows = [measure(p, stores, args.repeats) for p in (args.books or BOOKS)]
    finally:
        for store in stores:
            store.close()
    m |= {"wall_seconds": round(time.perf_counter() - started, 1), "loadavg_end": loadavg(), "method": METHOD,
          "skipped": skipped}
    lines = header("bench_summarize.py", sys.argv[1:], m) + [
        "", f"Extractive method alone ({METHOD}, median of {max(args.repeats, 5)}):", "",
        "| book | chapters | words | s | chapters/s | words/s |", "|---|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['book']} | {r['chapters']} | {r['words']:,} | {r['extractive']['seconds']} | "
              f"{r['extractive']['chapters_per_s']:,} | {r['extractive']['words_per_s']:,} |" for r in rows]
    for store in stores:
        lines += ["", f"`canon summarize --story S` (offline) on {store.kind}, median of {args.repeats}:", "",
                  "| book | chapters | volumes | events | s | chapters/s | words/s | re-run s | catch-up s | import s |",
                  "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for r in rows:
            d = r[store.kind]
            lines.append(f"| {r['book']} | {d['summarised']} | {d['volumes']} | {d['events']:,} | {d['seconds']} | "
                         f"{d['chapters_per_s']:,} | {d['words_per_s']:,} | {d['rerun_s']} | {d['catch_up_s']} | "
                         f"{d['import_s']} |")
    emit({"machine": m, "books": rows}, args, "\n".join(lines))


if __name__ == "__main__":
    main()
