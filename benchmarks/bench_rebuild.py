#!/usr/bin/env python
"""Rebuild throughput and audit time (issue 4).

    python benchmarks/bench_rebuild.py [--quick] [--store sqlite|postgres|both] [--repeats 3] [--format json]

Loads the synthetic serial (benchmarks/gen_story.py: 1,000 chapters, 10,000 canon entries,
~100,000 events; --quick: 100 chapters) through the command path into a fresh store, then,
in the same process and the same run, R times each:

* **raw decoded read**: every event the canon projection subscribes to, read in pages of
  1,000 and decoded by the library's mapper (``ledger.event_log.read``), doing nothing with them; and
  the same read once more with Python's cyclic GC paused, as the runner pauses it around
  each page it projects (a second reference, so that the GC's share of a ratio is visible).
  The generated story is frozen out of the GC's reach before the repeats (``gc.freeze``):
  it is the script's own heap, which a real rebuild process does not have;
* **rebuild**: ``canon rebuild`` of the canon read model (blue/green into new tables, pages of
  the canon runner's page size (5,000 events) per transaction, tracking in the same transaction),
  three ways, each against the same repeat's raw read:
  - **warm**: the token-count memo (``projections/token_memo.py``) holds every text's count, as
    after any earlier catch-up: the normal case (a rebuild after a schema change, texts unchanged);
  - **cold**: the memo emptied just before (not timed): every text is counted and stored;
  - **recount**: ``rebuild(recount=True)`` (``canon rebuild --recount``, the repair): empties the
    memo itself (timed) and counts everything afresh;
* **SQL floor**: the SQL of a rebuild without any projection code: a copy of the active
  build's rows into fresh tables of the same schema by the store's own ``INSERT ... SELECT``
  (no Python per row), the deferred indexes built, ``ANALYZE``, and the copy dropped (a
  rebuild drops a build of the same size). A rebuild must read and decode the events and
  write these rows, so no projection can beat raw read + floor: ``raw / (raw + floor)`` is
  the **ceiling** of the rebuild/raw ratio on this store and machine;
* **audit** of the chapter-1,000 writer packet issued at the end of the log (replay of the
  story's canon events into a scratch build, recompile, compare, lineage).

Reports medians; the throughput ratio is rebuild events/s over raw read events/s (both
references), in wall time and in CPU time of this process (less sensitive to other load).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (PostgresStores, SQLiteStores, add_common_options, emit, header, load_story, loadavg,  # noqa: E402
                    log, machine_info)

from canon_ledger.application.packets.recipes import Request  # noqa: E402
from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

try:  # older code has no memo: then only the plain rebuild is measured
    from canon_ledger.projections.token_memo import TokenMemo  # noqa: E402
except ImportError:  # pragma: no cover
    TokenMemo = None  # type: ignore[assignment,misc]

MODES = ("warm", "cold", "recount")


def _rebuild(services: Any, mode: str) -> tuple[Any, float]:
    """(report, CPU s) of one canon rebuild with the memo warm, emptied first, or recounting."""
    if mode == "cold":
        memo = TokenMemo(services.canon.runner(services.canon.active()).projection.tokens.name)
        with services.canon.write_engine.begin() as conn:  # not timed: the memo is simply empty
            memo.clear(conn)
    c0 = time.process_time()
    report = services.canon.rebuild(recount=True) if mode == "recount" else services.canon.rebuild()
    return report, time.process_time() - c0


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """As ``projections.runner.gc_paused`` (kept here so the script also runs on older code)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _raw_read(ledger: Any, topics: list[str]) -> tuple[int, float, float]:
    """(events, wall s, CPU s) of reading and decoding them in pages of 1,000."""
    start, n = 1, 0
    t0, c0 = time.perf_counter(), time.process_time()
    end = ledger.event_log.position()
    while start <= end:
        page = ledger.event_log.read(start, 1000, end, topics)
        n += len(page)
        if len(page) < 1000:
            break
        start = page[-1][0] + 1
    return n, time.perf_counter() - t0, time.process_time() - c0


def _raw_read_gc_paused(ledger: Any, topics: list[str]) -> tuple[int, float, float]:
    with _gc_paused():
        return _raw_read(ledger, topics)


def _sql_floor(services: Any, n: int) -> float:
    """Seconds of the SQL floor (see the module docstring): the active build's rows copied into a
    fresh build's tables in the store, deferred indexes, ANALYZE, the copy dropped."""
    models = services.canon
    active = models.active()
    source = models.tables(active)
    copy = models.spec.tables(f"floor{n}", active.version)
    deferred = [ix for t in copy.all() for ix in sorted(t.indexes, key=lambda i: i.name) if not ix.unique]
    begin = models.write_engine.begin
    t0 = time.perf_counter()
    with begin() as conn:
        copy.metadata.create_all(conn)
        for index in deferred:
            index.drop(conn)
    with begin() as conn:
        for a, b in zip(source.all(), copy.all(), strict=True):
            columns = ", ".join(f'"{c.name}"' for c in a.columns)
            conn.exec_driver_sql(f'INSERT INTO "{b.name}" ({columns}) SELECT {columns} FROM "{a.name}"')
    with begin() as conn:
        for index in deferred:
            index.create(conn)
    with begin() as conn:
        for table in copy.all():
            conn.exec_driver_sql(f'ANALYZE "{table.name}"')
    with begin() as conn:
        copy.metadata.drop_all(conn)
    return time.perf_counter() - t0


def run_store(stores: Any, commands: list[Any], chapters: int, repeats: int) -> dict[str, Any]:
    with stores.fresh() as url:
        load = load_story(url, stores.kind, commands, 200)
        services = bootstrap(url)
        try:
            t0 = time.perf_counter()
            services.canon.catch_up_serving()
            first_catch_up = time.perf_counter() - t0
            packet = services.packets.packet(Request(gen_story.STORY, "writer", chapters))
            topics = services.canon.runner(services.canon.active()).projection.topics
            # The generated story (41k parsed commands) and the loader's objects are scaffolding a
            # `canon rebuild` process never holds: freeze them, so that the cyclic GC does not walk
            # them again in every measured read, rebuild and audit (it tripled the raw read here).
            gc.collect()
            gc.freeze()
            memo = TokenMemo is not None and "recount" in inspect.signature(services.canon.rebuild).parameters
            modes = MODES if memo else ("warm",)  # older code: the plain rebuild only
            reads, reads_gc, audits, floors = [], [], [], []
            rebuilds: dict[str, list[float]] = {m: [] for m in modes}
            cpu: dict[str, list[float]] = {"read": [], "read_gc_paused": [], "audit": [],
                                           **{f"rebuild_{m}": [] for m in modes}}
            checksums = set()
            for r in range(repeats):
                # Before every measurement, collect what the previous one left (not timed): a step
                # timed with the GC on would otherwise pay for its predecessors' cyclic garbage
                # (in one run the raw read of repeats 2 and 3 took 0.67-0.75 s of CPU against
                # 0.42 s in repeat 1, which made every later rebuild/raw ratio look better).
                gc.collect()
                n, seconds, c = _raw_read(services.ledger, topics)
                reads.append(seconds)
                cpu["read"].append(c)
                gc.collect()
                _, seconds_gc, c = _raw_read_gc_paused(services.ledger, topics)
                reads_gc.append(seconds_gc)
                cpu["read_gc_paused"].append(c)
                gc.collect()
                floors.append(_sql_floor(services, r + 1))
                for mode in modes:
                    gc.collect()
                    report, c = _rebuild(services, mode)
                    rebuilds[mode].append(report.seconds)
                    cpu[f"rebuild_{mode}"].append(c)
                    checksums.add(_checksum(services))
                gc.collect()
                t0, c0 = time.perf_counter(), time.process_time()
                audit = services.auditor.audit(packet.packet_id)
                audits.append(time.perf_counter() - t0)
                cpu["audit"].append(time.process_time() - c0)
                assert audit.ok, audit.as_dict()
                log(f"{stores.kind} repeat {r + 1}: raw read {n:,} events in {seconds:.2f} s ({seconds_gc:.2f} s GC "
                    f"paused); rebuild " + ", ".join(f"{m} {rebuilds[m][-1]:.2f} s" for m in modes)
                    + f"; SQL floor {floors[-1]:.2f} s; audit {audits[-1]:.2f} s")
            assert len(checksums) == 1, "rebuilds with a warm, cold and no memo gave different tables"
            raw_s, raw_gc_s = statistics.median(reads), statistics.median(reads_gc)
            rebuild_s = statistics.median(rebuilds["warm"])
            ratios = [a / b for a, b in zip(reads, rebuilds["warm"])]
            by_mode = {m: {"rebuild_s": round(statistics.median(v), 3),
                           "rebuild_events_per_s": round(n / statistics.median(v)),
                           "ratio": round(raw_s / statistics.median(v), 3),
                           "ratio_range": [round(min(a / b for a, b in zip(reads, v)), 3),
                                           round(max(a / b for a, b in zip(reads, v)), 3)],
                           "ratio_gc_paused_read": round(raw_gc_s / statistics.median(v), 3),
                           "cpu_ratio": round(statistics.median(cpu["read"]) / statistics.median(cpu[f"rebuild_{m}"]), 3)}
                       for m, v in rebuilds.items()}
            cpu["rebuild"] = cpu["rebuild_warm"]
            return {
                "modes": by_mode, "checksum": checksums.pop(), "memo_entries": _memo_entries(services) if memo else None,
                "store": stores.kind, "load": load, "log_position": services.ledger.event_log.position(),
                "canon_events": n, "first_catch_up_s": round(first_catch_up, 2),
                "page_size": services.canon.runner(services.canon.active()).page_size,
                "raw_read_s": round(raw_s, 3), "raw_read_events_per_s": round(n / raw_s),
                "raw_read_gc_paused_s": round(raw_gc_s, 3),
                "rebuild_s": round(rebuild_s, 3), "rebuild_events_per_s": round(n / rebuild_s),
                "ratio": round(raw_s / rebuild_s, 3),
                "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                "ratio_gc_paused_read": round(raw_gc_s / rebuild_s, 3),
                "sql_floor_s": round(statistics.median(floors), 3),
                "ceiling_ratio": round(statistics.median([a / (a + f) for a, f in zip(reads, floors)]), 3),
                "cpu_s": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
                "cpu_ratio": round(statistics.median(cpu["read"]) / statistics.median(cpu["rebuild"]), 3),
                "audit_s": round(statistics.median(audits), 3), "audit_replayed_events": audit.replayed_events,
                "packet_position": packet.position,
                "per_repeat": {"raw_read_s": [round(x, 3) for x in reads], "raw_read_gc_paused_s": [round(x, 3) for x in reads_gc],
                               **{f"rebuild_{m}_s": [round(x, 3) for x in v] for m, v in rebuilds.items()},
                               "audit_s": [round(x, 3) for x in audits],
                               "sql_floor_s": [round(x, 3) for x in floors],
                               "cpu_s": {k: [round(x, 3) for x in v] for k, v in cpu.items()}},
            }
        finally:
            gc.unfreeze()
            services.close()


def _checksum(services: Any) -> str:
    from canon_ledger.projections.checksum import table_checksum

    models = services.canon
    with models.read_engine.begin() as conn:
        return table_checksum(conn, models.tables(models.active(conn)))


def _memo_entries(services: Any) -> int | None:
    if TokenMemo is None:
        return None
    memo = TokenMemo(services.canon.runner(services.canon.active()).projection.tokens.name)
    with services.canon.read_engine.begin() as conn:
        return memo.size(conn)


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m = report["machine"]
    lines = [
        *header("bench_rebuild.py", argv, m),
        f"- Story: {report['chapters']} chapters, {report['commands']:,} commands; repeats {report['repeats']} (medians)",
        "",
        "| store | memo | canon events read | raw decoded read ev/s (s) | rebuild ev/s (s) | rebuild/raw | goal | "
        "rebuild/raw (GC-paused read) | CPU rebuild/raw | SQL floor s | ceiling raw/(raw+floor) | audit at end of log | goal |",
        "|---|---|--:|--:|--:|--:|--|--:|--:|--:|--:|--:|--|",
    ]
    for r in report["results"]:
        modes = r.get("modes") or {"-": {k: r[k] for k in ("rebuild_s", "rebuild_events_per_s", "ratio", "ratio_range",
                                                            "ratio_gc_paused_read", "cpu_ratio")}}
        for mode, m in modes.items():
            lo, hi = m["ratio_range"]
            lines.append(
                f"| {r['store']} | {mode} | {r['canon_events']:,} | {r['raw_read_events_per_s']:,} ({r['raw_read_s']:.2f}) | "
                f"{m['rebuild_events_per_s']:,} ({m['rebuild_s']:.2f}) | **{m['ratio']:.2f}x** ({lo:.2f}-{hi:.2f}) | >= 0.5x "
                f"{'met' if m['ratio'] >= 0.5 else 'MISSED'} | {m['ratio_gc_paused_read']:.2f}x | {m['cpu_ratio']:.2f}x | "
                f"{_floor(r)} | "
                f"{r['audit_s']:.2f} s (position {r['packet_position']:,}, {r['audit_replayed_events']:,} events replayed) | "
                f"<= 5 s {'met' if r['audit_s'] <= 5 else 'MISSED'} |")
    return "\n".join(lines)


def _floor(r: dict[str, Any]) -> str:
    if "sql_floor_s" not in r:
        return "- | -"
    return f"{r['sql_floor_s']:.2f} | {r['ceiling_ratio']:.2f}x"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 chapters, 1 repeat")
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=3)
    add_common_options(parser)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    chapters = 100 if args.quick else gen_story.CHAPTERS
    entries = 1000 if args.quick else gen_story.ENTRIES
    repeats = 1 if args.quick else args.repeats
    commands = [parse_command(c) for c in gen_story.generate(chapters=chapters, entries=entries)]
    report: dict[str, Any] = {"machine": machine_info(args.pg_url if args.store != "sqlite" else None),
                              "chapters": chapters, "commands": len(commands), "repeats": repeats, "results": []}
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    for kind in kinds:
        stores = SQLiteStores() if kind == "sqlite" else PostgresStores(args.pg_url)
        try:
            report["results"].append(run_store(stores, commands, chapters, repeats))
        finally:
            stores.close()
    report["machine"]["loadavg_end"] = loadavg()
    report["machine"]["wall_seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args, markdown(report, sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
