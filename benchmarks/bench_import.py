#!/usr/bin/env python
"""War and Peace through the command path, then knowledge catch-up and extractive compile (issue 5).

    python benchmarks/bench_import.py [--stores sqlite,postgres] [--repeats 3] [--batch-size 100]
                                      [--chapters N] [--quick] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. The novel (``../shared/data/novels/war_and_peace.txt`` relative to
the project root; see ``../shared/data/README.md``) is split into its 15 books and 2 epilogues
(volumes 1..17) and 365 chapters ("CHAPTER I" ..., restarting per book; numbered 1..365 here).
It becomes one story: ``start_story``; per chapter ``plan_chapter`` (volume = book),
``submit_draft`` (the chapter text), ``accept_draft`` (the knowledge projection chunks accepted
text into collection ``story:<story_id>``) and ``record_chapter_summary`` (the chapter's first
sentence); after each book's last chapter ``record_volume_summary``. Commands are parsed before
the clock starts.

For each store (a temp SQLite file; a scratch PostgreSQL database ``canon_bench_<hex>``,
created and dropped here) and each repeat, in a fresh store:

1. **command path**: ``bootstrap(url)``, then ``services.ledger.apply(batch, atomic=True)`` per
   ``--batch-size`` commands (every command must come back ``applied``);
2. **knowledge catch-up**: ``services.knowledge.catch_up_serving()`` over the whole log (chunks made);
3. **extractive compile**: ``services.compiler("offline").nightly()``: one page per topic;
4. **raw baselines** of step 1, each into a fresh store whose events table the library created
   (same shape): the stored event rows the ledger wrote (read back from its events table), one
   transaction per ledger batch, inserted with plain ``sqlite3`` ``executemany`` (SQLite), with
   ``psycopg`` ``executemany`` of a plain INSERT and with ``COPY ... FROM STDIN (FORMAT BINARY)``
   (PostgreSQL); and the library's own ``recorder.insert_events`` of the same rows.

Reports medians over the repeats and the throughput ratios command path / raw (goal on
PostgreSQL: >= 0.3x raw COPY).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from sqlalchemy import false, func, select

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    ROOT,
    add_common_options,
    applied_batches,
    emit,
    header,
    loadavg,
    log,
    machine_info,
    read_back,
    run_copy_postgres,
    run_raw_postgres,
    run_raw_sqlite,
    run_recorder,
    stores_for,
)
from gen_story import NOVEL_RELATIVE, NOVEL_STORY, novel_commands, read_novel  # noqa: E402

from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

STORY = NOVEL_STORY


# -- one repeat in one store ---------------------------------------------------------------------
def run_import(url: str, kind: str, commands: list[Any], batch: int) -> dict[str, Any]:
    services = bootstrap(url)
    try:
        ledger = services.ledger
        positions: list[int] = []
        t0 = time.perf_counter()
        for results in applied_batches(ledger, commands, batch, kind):
            positions.append(max(r.position for r in results))  # type: ignore[type-var]
        apply_s = time.perf_counter() - t0
        events = ledger.event_log.position()
        transactions = read_back(ledger, positions)  # untimed: the rows the raw baselines insert
        assert sum(map(len, transactions)) == events

        t0 = time.perf_counter()
        services.knowledge.catch_up_serving()
        catch_up_s = time.perf_counter() - t0
        kt = services.knowledge.tables(services.knowledge.active())
        collection = f"story:{STORY}"
        with services.canon.read_engine.connect() as conn:
            chunks, chunk_tokens = conn.execute(
                select(func.count(), func.coalesce(func.sum(kt.chunks.c.tokens), 0))
                .where(kt.chunks.c.collection_id == collection, kt.chunks.c.removed == false())).one()
            documents = conn.execute(select(func.count()).select_from(kt.documents)
                                     .where(kt.documents.c.collection_id == collection)).scalar_one()
            topics = conn.execute(select(func.count()).select_from(kt.topics)
                                  .where(kt.topics.c.collection_id == collection)).scalar_one()

        compiler = services.compiler("offline")
        t0 = time.perf_counter()
        report = compiler.nightly()
        compile_s = time.perf_counter() - t0
        if report.failed or report.remaining_stale or report.compiled != topics:
            raise RuntimeError(f"{kind}: compile incomplete: {report.as_dict() | {'pages': len(report.pages)}}")
        return {
            "apply_s": apply_s, "events": events, "transactions": transactions, "positions": positions,
            "catch_up_s": catch_up_s, "chunks": int(chunks), "chunk_tokens": int(chunk_tokens),
            "documents": int(documents), "topics": int(topics),
            "compile_s": compile_s, "pages": report.compiled, "log_after_compile": ledger.event_log.position(),
        }
    finally:
        services.close()


# -- the benchmark -------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    path = os.path.normpath(os.path.join(ROOT, args.novel))
    books = read_novel(path)
    all_chapters = [ch for b in books for ch in b.chapters]
    dicts = novel_commands(books, args.chapters)
    t0 = time.perf_counter()
    commands = [parse_command(d) for d in dicts]
    parse_s = time.perf_counter() - t0
    used = [ch for ch in all_chapters if args.chapters is None or ch.number <= args.chapters]
    text_bytes = sum(len(ch.text.encode()) for ch in used)
    by_type: dict[str, int] = {}
    for d in dicts:
        by_type[d["type"]] = by_type.get(d["type"], 0) + 1
    workload = {
        "novel": args.novel, "books": len(books), "chapters_in_novel": len(all_chapters),
        "chapters": len(used), "volumes": len({ch.volume for ch in used}), "commands": len(commands),
        "by_type": by_type, "text_mb": text_bytes / 1e6, "parse_s": parse_s, "batch_size": args.batch_size,
    }
    log(f"novel: {len(books)} books, {len(all_chapters)} chapters; importing {len(used)} chapters, "
        f"{text_bytes / 1e6:.2f} MB of chapter text, {len(commands):,} commands (parsed in {parse_s:.2f} s)")

    stores, skipped = stores_for(args.stores, args.pg_url)
    info = machine_info(args.pg_url if any(s.kind == "postgres" for s in stores) else None)

    samples: dict[tuple[str, str], list[float]] = {}
    facts: dict[str, dict[str, Any]] = {}
    try:
        for repeat in range(args.repeats):
            for store in stores:
                with store.fresh() as url:
                    run = run_import(url, store.kind, commands, args.batch_size)
                transactions = run.pop("transactions")
                run.pop("positions")
                for name in ("apply_s", "catch_up_s", "compile_s"):
                    samples.setdefault((store.kind, name), []).append(run[name])
                facts[store.kind] = {k: v for k, v in run.items() if not k.endswith("_s")} | {"txns": len(transactions)}
                baselines: list[tuple[str, Any]] = [("recorder", lambda u: run_recorder(u, transactions))]
                if store.kind == "sqlite":
                    baselines.append(("raw_insert", lambda u: run_raw_sqlite(u, transactions)))
                else:
                    baselines.append(("raw_insert", lambda u: run_raw_postgres(u, transactions, lock=False)))
                    baselines.append(("raw_copy", lambda u: run_copy_postgres(u, transactions)))
                for name, fn in baselines:
                    with store.fresh() as url:
                        samples.setdefault((store.kind, name), []).append(fn(url))
                line = ", ".join(f"{name} {samples[(store.kind, name)][-1]:.2f} s"
                                 for name in ("apply_s", "raw_insert", "raw_copy", "recorder", "catch_up_s", "compile_s")
                                 if (store.kind, name) in samples)
                log(f"repeat {repeat + 1}/{args.repeats} {store.kind:8} {run['events']:,} events, {run['chunks']:,} chunks, "
                    f"{run['pages']} pages: {line}")
    finally:
        for store in stores:
            store.close()

    results = []
    for store in stores:
        k = store.kind
        f = facts[k]
        med = {name: statistics.median(v) for (kind, name), v in samples.items() if kind == k}
        row: dict[str, Any] = {
            "store": k, **f,
            "per_repeat": {name: [round(x, 3) for x in v] for (kind, name), v in samples.items() if kind == k},
            "apply_s": med["apply_s"], "commands_per_s": len(commands) / med["apply_s"],
            "events_per_s": f["events"] / med["apply_s"], "text_mb_per_s": text_bytes / 1e6 / med["apply_s"],
            "catch_up_s": med["catch_up_s"], "catch_up_events_per_s": f["events"] / med["catch_up_s"],
            "chunks_per_s": f["chunks"] / med["catch_up_s"],
            "compile_s": med["compile_s"], "pages_per_s": f["pages"] / med["compile_s"],
        }
        for name in ("raw_insert", "raw_copy", "recorder"):
            if name in med:
                apply_runs, base_runs = samples[(k, "apply_s")], samples[(k, name)]
                row[name] = {"seconds": med[name], "events_per_s": f["events"] / med[name],
                             "ratio": med[name] / med["apply_s"],
                             "ratio_per_repeat": [b / a for a, b in zip(apply_runs, base_runs)]}
        results.append(row)
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    return {"machine": info, "workload": workload, "repeats": args.repeats, "results": results, "skipped": skipped,
            "goal_pg_vs_copy": 0.3}


# -- reporting -------------------------------------------------------------------------------------
def _ratio(row: dict[str, Any], name: str) -> str:
    if name not in row:
        return "-"
    r = row[name]
    spread = f" ({min(r['ratio_per_repeat']):.2f}-{max(r['ratio_per_repeat']):.2f})" if len(r["ratio_per_repeat"]) > 1 else ""
    return f"{r['ratio']:.2f}x{spread}"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m, w = report["machine"], report["workload"]
    out = header("bench_import.py", argv, m)
    types = ", ".join(f"{t} {n}" for t, n in w["by_type"].items())
    out += [
        f"- Workload: `{w['novel']}`, {w['chapters']} chapters in {w['volumes']} volumes, {w['text_mb']:.2f} MB of "
        f"chapter text; {w['commands']:,} commands ({types}), atomic batches of {w['batch_size']}; parsed before "
        f"timing in {w['parse_s']:.2f} s.",
        f"- Medians of {report['repeats']} repeats, a fresh store for every run. Ratios are command-path throughput "
        "/ baseline throughput, same rows and same transactions; in brackets the per-repeat range.",
        "",
        "| Store | Txns | Events | Command path s | cmd/s | events/s | MB/s | Raw INSERT events/s | Path/raw INSERT "
        "| Raw COPY events/s | Path/raw COPY | Recorder events/s | Path/recorder |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["results"]:
        cells = [r["store"], f"{r['txns']:,}", f"{r['events']:,}", f"{r['apply_s']:.2f}", f"{r['commands_per_s']:,.0f}",
                 f"{r['events_per_s']:,.0f}", f"{r['text_mb_per_s']:.2f}",
                 f"{r['raw_insert']['events_per_s']:,.0f}", _ratio(r, "raw_insert"),
                 f"{r['raw_copy']['events_per_s']:,.0f}" if "raw_copy" in r else "-", _ratio(r, "raw_copy"),
                 f"{r['recorder']['events_per_s']:,.0f}", _ratio(r, "recorder")]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "| Store | Knowledge catch-up s | log events/s | chunks | chunks/s | chunk tokens | topics "
            "| Compile s | pages | pages/s |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        out.append(f"| {r['store']} | {r['catch_up_s']:.2f} | {r['catch_up_events_per_s']:,.0f} | {r['chunks']:,} "
                   f"| {r['chunks_per_s']:,.0f} | {r['chunk_tokens']:,} | {r['topics']} | {r['compile_s']:.2f} "
                   f"| {r['pages']} | {r['pages_per_s']:.1f} |")
    for r in report["results"]:
        if "raw_copy" in r:
            ok = r["raw_copy"]["ratio"] >= report["goal_pg_vs_copy"]
            out += ["", f"Goal, {r['store']}: command path >= {report['goal_pg_vs_copy']}x raw COPY: "
                    f"{'met' if ok else '**missed**'} ({r['raw_copy']['ratio']:.2f}x)."]
    for store, reason in report["skipped"].items():
        out += ["", f"Skipped {store}: {reason}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres", help="comma list of sqlite,postgres")
    parser.add_argument("--repeats", type=int, help="repeats, fresh store each (default 3; 1 with --quick)")
    parser.add_argument("--batch-size", type=int, default=100, help="commands per atomic batch")
    parser.add_argument("--chapters", type=int, help="import only the first N chapters (default: all 365)")
    parser.add_argument("--quick", action="store_true", help="40 chapters, 1 repeat (smoke run)")
    parser.add_argument("--novel", default=NOVEL_RELATIVE, help="path relative to the project root")
    add_common_options(parser)
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.quick and args.chapters is None:
        args.chapters = 40
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = set(args.stores) - {"sqlite", "postgres"}
    if unknown or args.repeats < 1 or args.batch_size < 1 or (args.chapters is not None and args.chapters < 1):
        parser.error(f"bad arguments (unknown stores: {sorted(unknown)})" if unknown else "counts must be >= 1")
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
