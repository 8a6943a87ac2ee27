#!/usr/bin/env python
"""A series of books against a single book with the same canon: the writer packet of the last
book at its middle chapter, and the canon rebuild per book.

    python benchmarks/bench_series.py [--store sqlite|postgres|both] [--quick] [--books N]
                                      [--chapters N] [--entries N] [--samples N] [--warmup N]
                                      [--pg-url URL] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Goal: the series book's writer packet p50 <= 1.2x the same packet of
a single-book story with the same canon.

**The stores.** ``gen_story``'s serial, once per book (``--books``, default 10, of ``--chapters``,
default 300, and ``--entries`` canon entries each, default 3,000; book N with seed N, so the books
share many keys: a later book's own canon overrides an earlier one's), each book added to one
series whose bible holds the serial's world rules again under keys of its own, and a story
``single``: the last book's commands again as a story in no series. Everything through the
command path (``common.load_story``).

**Per store**: the canon read model rebuilt from the log (timed; per book: the time over the
books and the single story); then ``--warmup`` packets of each and ``--samples`` pairs,
alternated (series book, then single, then single, then series book ...), ``record=False``, each
request the same every time: the writer packet of the last book's chapter ``--chapters // 2``
(its first scene); p50 and p95 each and their ratio; the series packet's items inherited from
the bible and earlier books counted, and both packets audited once.

``--quick``: 3 books of 60 chapters, 600 entries each, 30 samples: a smoke run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (add_common_options, bench_stores, emit, header, load_story, log, percentiles,  # noqa: E402
                    )

from canon_ledger.domain.commands import parse_command  # noqa: E402

GOAL = 1.2
SERIES = "saga"
SINGLE = "single"


def book_id(n: int) -> str:
    return f"book{n:02d}"


def commands(books: int, chapters: int, entries: int) -> list[Any]:
    out: list[dict[str, Any]] = [{"type": "start_series", "command_id": "series", "story_id": SERIES,
                                  "title": "The Saga"}]
    rules = [c for c in gen_story.for_story(SERIES, seed=0, chapters=chapters, entries=entries)
             if c["type"] in ("propose_canon", "confirm_canon")]
    kinds = {c["proposal_id"]: c["kind"] for c in rules if c["type"] == "propose_canon"}
    out += [c for c in rules if kinds[c["proposal_id"]] in ("world_rule", "faction", "location")]
    for n in range(1, books + 1):
        out += gen_story.for_story(book_id(n), seed=n, chapters=chapters, entries=entries)
        out.append({"type": "add_book", "command_id": f"add-{n}", "story_id": book_id(n), "series_id": SERIES})
    out += gen_story.for_story(SINGLE, seed=books, chapters=chapters, entries=entries)
    return [parse_command(c) for c in out]


def measure(url: str, kind: str, books: int, chapter: int, samples: int, warmup: int) -> dict[str, Any]:
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(url, embedder="hashing")
    try:
        services.packets.retriever = None  # L0: L1 reads no inherited canon and would add its own noise
        t0 = time.perf_counter()
        services.canon.rebuild()
        rebuild = time.perf_counter() - t0
        log(f"{kind}: canon rebuilt in {rebuild:.1f} s")
        last = book_id(books)
        with services.packets.reader.snapshot(last) as snap:
            scene = snap.scenes(last, chapter)[0].scene_id
        requests = {"series": Request(last, "writer", chapter, scene=scene),
                    "single": Request(SINGLE, "writer", chapter, scene=scene)}
        packets = {k: services.packets.packet(r, record=True) for k, r in requests.items()}
        audits = {k: services.auditor.audit(p.packet_id).ok for k, p in packets.items()}
        inherited = sum(1 for i in packets["series"].items if "; from " in i.reason)
        for _ in range(warmup):
            for r in requests.values():
                services.packets.packet(r, record=False)
        times: dict[str, list[float]] = {"series": [], "single": []}
        order = ["series", "single"]
        for n in range(samples):
            for k in (order if n % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                services.packets.packet(requests[k], record=False)
                times[k].append(time.perf_counter() - t)
        p50 = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        return {"store": kind, "rebuild_seconds": round(rebuild, 2),
                "rebuild_seconds_per_book": round(rebuild / (books + 1), 2), "chapter": chapter,
                "p50_ms": p50, "p95_ms": {k: percentiles(v)["p95"] for k, v in times.items()},
                "ratio": p50["series"] / p50["single"], "inherited_items": inherited, "audits_ok": audits,
                "items": {k: len(p.items) for k, p in packets.items()},
                "used_tokens": {k: p.used_tokens for k, p in packets.items()}}
    finally:
        services.close()


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    cmds = commands(args.books, args.chapters, args.entries)
    log(f"series: {args.books} books of {args.chapters} chapters, {args.entries:,} entries each, and a single "
        f"book: {len(cmds):,} commands")
    results = []
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                loaded = load_story(url, store.kind, cmds, 100)
                results.append({"load": loaded, **measure(url, store.kind, args.books, args.chapters // 2,
                                                          args.samples, args.warmup)})
    return {"machine": info, "books": args.books, "chapters": args.chapters, "entries": args.entries,
            "samples": args.samples, "goal": GOAL, "results": results, "skipped": skipped}


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    out = [*header("bench_series.py", argv, report["machine"]),
           f"- {report['books']} books of {report['chapters']} chapters, {report['entries']:,} entries each; "
           f"{report['samples']} samples per packet, alternated; goal: series / single <= {report['goal']}x", "",
           "| store | chapter | p50 series (ms) | p50 single (ms) | series / single | p95 series | p95 single "
           "| inherited items | audits | rebuild (s) | rebuild per book (s) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in report["results"]:
        out.append(f"| {r['store']} | {r['chapter']} | {r['p50_ms']['series']:.2f} | {r['p50_ms']['single']:.2f} "
                   f"| {r['ratio']:.2f}x | {r['p95_ms']['series']:.2f} | {r['p95_ms']['single']:.2f} "
                   f"| {r['inherited_items']} | {'ok' if all(r['audits_ok'].values()) else r['audits_ok']} "
                   f"| {r['rebuild_seconds']} | {r['rebuild_seconds_per_book']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="3 books of 60 chapters, 600 entries, 30 samples")
    parser.add_argument("--books", type=int)
    parser.add_argument("--chapters", type=int)
    parser.add_argument("--entries", type=int)
    parser.add_argument("--samples", type=int)
    parser.add_argument("--warmup", type=int, default=10)
    add_common_options(parser)
    args = parser.parse_args(argv)
    args.books = args.books or (3 if args.quick else 10)
    args.chapters = args.chapters or (60 if args.quick else 300)
    args.entries = args.entries or (600 if args.quick else 3_000)
    args.samples = args.samples or (30 if args.quick else 200)
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
