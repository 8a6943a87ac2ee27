#!/usr/bin/env python
"""Command apply throughput: CanonLedger vs raw INSERTs of the same rows (issue 2).

    python benchmarks/bench_apply.py [--quick] [--commands N] [--repeats R]
                                     [--stores sqlite,postgres] [--format markdown|json]

Not part of the pytest run. For each store (a temp SQLite file in WAL mode; a scratch
PostgreSQL database ``canon_bench_<hex>`` created and dropped here) and each mode
(``single``: ``ledger.apply([cmd])`` per command, one transaction each; ``batch``:
``ledger.apply(batch, atomic=True)``, one transaction per 100 commands) it times:

* ``ledger``   - CanonLedger.apply on a generated story (reads aggregates, decides, saves);
* ``recorder`` - the library's own ``recorder.insert_events`` of the same stored events,
                 one call per ledger transaction (no reads, no decide, no mapping);
* ``event_store`` - the library's ``events.put`` of the same events (decoded from the rows
                 before the clock), one call per ledger transaction: its mapper (JSON
                 transcoding) and recorder, the least any save of these events through the
                 library costs (no reads, no decide, no event objects made);
* ``raw``      - plain sqlite3 / psycopg INSERTs of exactly the rows the ledger wrote (read
                 back from its events table: originator_id, originator_version, topic,
                 state), one transaction per ledger transaction, into a fresh events table
                 created by the library (same shape: SQLite ``stored_events``, PostgreSQL
                 ``canonledger_events``);
* ``raw_lock`` - PostgreSQL only: ``raw`` plus ``LOCK TABLE ... IN EXCLUSIVE MODE`` in each
                 transaction, as the library does to keep commit order = position order.

Every variant gets a fresh store per repeat; the report gives medians over the repeats and
the ratio ledger/raw. One extra instrumented ledger run per store and mode (not part of the
medians) splits the time into loads (repository.get and get_many, of which SQL; a batch's one
read of many aggregates counts as one read), save (of which the recorder's insert + commit) and
the rest (domain decisions, receipts, unit of work, ledger code).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    Row,
    add_common_options,
    emit,
    header,
    loadavg,
    log,
    machine_info,
    median,
    read_back,
    run_raw_postgres,
    run_raw_sqlite,
    run_recorder,
    stores_for,
)
from gen_story import flat  # noqa: E402

from canon_ledger.application.ledger import CanonLedger  # noqa: E402
from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.infrastructure.stores import open_ledger  # noqa: E402


# -- timed runs ----------------------------------------------------------------------------------
@dataclass
class LedgerRun:
    seconds: float
    transactions: list[list[Row]]  # the rows each ledger transaction wrote, in commit order
    profile: dict[str, Any] | None = None

    @property
    def events(self) -> int:
        return sum(len(t) for t in self.transactions)


@dataclass
class Probe:
    """Wraps the ledger's instance methods to time loads, SQL reads, saves and SQL writes."""

    ledger: CanonLedger
    totals: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)  # a load inside a load is timed once

    def __post_init__(self) -> None:
        self._wrap(self.ledger.repository, "get", "load")
        self._wrap(self.ledger.recorder, "select_events", "read_sql")
        if hasattr(self.ledger.repository, "get_many"):  # a batch's aggregates in one query: one read
            self._wrap(self.ledger.repository, "get_many", "load")
            self._wrap(self.ledger.repository, "_select_heads", "read_sql")
        self._wrap(self.ledger, "save", "save")
        self._wrap(self.ledger.recorder, "insert_events", "write_sql")
        self.counts["read_sql_empty"] = 0

    def _wrap(self, obj: Any, name: str, label: str) -> None:
        inner = getattr(obj, name)
        self.totals.setdefault(label, 0.0)
        self.counts.setdefault(label, 0)
        self.depth.setdefault(label, 0)
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth[label]:
                return inner(*args, **kwargs)
            t0 = clock()
            result = None
            self.depth[label] += 1
            try:
                result = inner(*args, **kwargs)
                return result
            finally:
                self.depth[label] -= 1
                self.totals[label] += clock() - t0
                self.counts[label] += 1
                if label == "read_sql" and not result:
                    self.counts["read_sql_empty"] += 1

        setattr(obj, name, timed)


def run_event_store(url: str, transactions: list[list[Row]]) -> float:
    """The library's event store alone: ``events.put`` (mapper, then recorder) of the ledger's
    events, decoded from its rows before the clock, one call per ledger transaction."""
    from eventsourcing.persistence import StoredEvent

    ledger = open_ledger(url)
    try:
        batches = [[ledger.mapper.to_domain_event(StoredEvent(o, v, t, s)) for o, v, t, s in rows]
                   for rows in transactions]
        put = ledger.events.put
        t0 = time.perf_counter()
        for events in batches:
            put(events)
        seconds = time.perf_counter() - t0
        assert (ledger.recorder.max_notification_id() or 0) == sum(map(len, batches))
        return seconds
    finally:
        ledger.close()


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def run_ledger(url: str, commands: list[Any], mode: str, batch: int, *, profile: bool = False) -> LedgerRun:
    ledger = open_ledger(url)
    try:
        probe = Probe(ledger) if profile else None
        results = []
        t0 = time.perf_counter()
        by_type: dict[str, list[float]] = {}  # type -> [count, seconds, reads, empty reads]
        if mode == "single" and probe is not None:
            clock, k = time.perf_counter, probe.counts
            for command in commands:
                t, reads, empty = clock(), k["read_sql"], k["read_sql_empty"]
                results.append(ledger.apply([command]))
                acc = by_type.setdefault(command.type, [0, 0.0, 0, 0])
                acc[0] += 1
                acc[1] += clock() - t
                acc[2] += k["read_sql"] - reads
                acc[3] += k["read_sql_empty"] - empty
        elif mode == "single":
            for command in commands:
                results.append(ledger.apply([command]))
        else:
            for chunk in _chunks(commands, batch):
                results.append(ledger.apply(chunk, atomic=True))
        seconds = time.perf_counter() - t0
        flat = [r for rs in results for r in rs]
        bad = [r for r in flat if r.status != "applied"]
        assert not bad, f"workload error: {bad[0]}"
        positions = [max(r.position for r in rs) for rs in results]  # type: ignore[type-var]
        groups = read_back(ledger, positions)
        prof = None
        if probe is not None:
            prof = {
                "seconds": seconds,
                "totals": dict(probe.totals),
                "counts": dict(probe.counts),
                "by_type": {
                    t: {
                        "commands": int(n),
                        "ms_per_command": secs / n * 1e3,
                        "reads_per_command": reads / n,
                        "empty_reads_per_command": empty / n,
                    }
                    for t, (n, secs, reads, empty) in by_type.items()
                },
            }
        return LedgerRun(seconds, groups, prof)
    finally:
        ledger.close()


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    dicts = flat(args.commands, seed=args.seed, draft_words=args.draft_words)
    t0 = time.perf_counter()
    commands = [parse_command(d) for d in dicts]
    parse_seconds = time.perf_counter() - t0
    workload = {
        "commands": len(commands),
        "by_type": {t: sum(1 for d in dicts if d["type"] == t) for t in dict.fromkeys(d["type"] for d in dicts)},
        "chapters": max((d.get("chapter", 0) for d in dicts), default=0),
        "draft_words": args.draft_words,
        "parse_us_per_command": round(parse_seconds / len(commands) * 1e6, 1),
        "batch_size": args.batch_size,
        "seed": args.seed,
    }

    stores, skipped = stores_for(args.stores, args.pg_url)
    info = machine_info(args.pg_url if any(s.kind == "postgres" for s in stores) else None)

    samples: dict[tuple[str, str, str], list[float]] = {}
    counts: dict[tuple[str, str], dict[str, int]] = {}
    profiles: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        for repeat in range(args.repeats):
            for store in stores:
                for mode in ("single", "batch"):
                    key = (store.kind, mode)
                    with store.fresh() as url:
                        run = run_ledger(url, commands, mode, args.batch_size)
                    counts[key] = {"transactions": len(run.transactions), "events": run.events}
                    samples.setdefault((*key, "ledger"), []).append(run.seconds)
                    variants: list[tuple[str, Callable[[str], float]]] = [
                        ("recorder", lambda u: run_recorder(u, run.transactions)),
                        ("event_store", lambda u: run_event_store(u, run.transactions)),
                    ]
                    if store.kind == "sqlite":
                        variants.append(("raw", lambda u: run_raw_sqlite(u, run.transactions)))
                    else:
                        variants.append(("raw", lambda u: run_raw_postgres(u, run.transactions, lock=False)))
                        variants.append(("raw_lock", lambda u: run_raw_postgres(u, run.transactions, lock=True)))
                    for name, fn in variants:
                        with store.fresh() as url:
                            samples.setdefault((*key, name), []).append(fn(url))
                    line = ", ".join(
                        f"{v} {len(commands) / samples[(*key, v)][-1]:,.0f}"
                        for v in ("ledger", "event_store", "recorder", "raw", "raw_lock")
                        if (*key, v) in samples
                    )
                    log(f"repeat {repeat + 1}/{args.repeats} {store.kind:8} {mode:6} cmd/s: {line}")
        if args.profile:
            for store in stores:
                for mode in ("single", "batch"):
                    with store.fresh() as url:
                        run = run_ledger(url, commands, mode, args.batch_size, profile=True)
                    profiles[(store.kind, mode)] = run.profile  # type: ignore[assignment]
                    log(f"profiled {store.kind} {mode}")
    finally:
        for store in stores:
            store.close()

    rows = []
    n = len(commands)
    for store in stores:
        for mode in ("single", "batch"):
            key = (store.kind, mode)
            c = counts[key]
            row: dict[str, Any] = {
                "store": store.kind,
                "mode": mode,
                "commands": n,
                "transactions": c["transactions"],
                "events": c["events"],
            }
            for variant in ("ledger", "event_store", "recorder", "raw", "raw_lock"):
                secs = samples.get((*key, variant))
                if not secs:
                    continue
                med = median(secs)
                row[variant] = {
                    "median_seconds": med,
                    "seconds": secs,
                    "commands_per_s": n / med,
                    "events_per_s": c["events"] / med,
                }
            ledger_s = row["ledger"]["median_seconds"]
            for variant in ("event_store", "recorder", "raw", "raw_lock"):
                if variant in row:
                    row[f"ratio_vs_{variant}"] = row[variant]["median_seconds"] / ledger_s
                    # Ledger and its baselines ran back to back in each repeat: paired ratios.
                    paired = [b / a for a, b in zip(row["ledger"]["seconds"], row[variant]["seconds"])]
                    row[f"ratio_vs_{variant}_per_repeat"] = paired
            if "recorder" in row:
                row["recorder_vs_raw"] = row["raw"]["median_seconds"] / row["recorder"]["median_seconds"]
            if "event_store" in row:
                row["event_store_vs_raw"] = row["raw"]["median_seconds"] / row["event_store"]["median_seconds"]
            prof = profiles.get(key)
            if prof:
                t, k = prof["totals"], prof["counts"]
                load, save = t["load"], t["save"]
                row["profile"] = {
                    "commands_per_s": n / prof["seconds"],
                    "ms_per_command": {
                        "total": prof["seconds"] / n * 1e3,
                        "load": load / n * 1e3,
                        "load_sql": t["read_sql"] / n * 1e3,
                        "save": save / n * 1e3,
                        "save_sql": t["write_sql"] / n * 1e3,
                        "decide_other": (prof["seconds"] - load - save) / n * 1e3,
                    },
                    "reads_per_command": k["read_sql"] / n,
                    "empty_reads_per_command": k["read_sql_empty"] / n,
                    "saves": k["save"],
                    "by_type": prof["by_type"],
                }
            rows.append(row)
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    return {"machine": info, "workload": workload, "repeats": args.repeats, "results": rows, "skipped": skipped}


# -- reporting -----------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def _ratio(row: dict[str, Any], variant: str, *, bold: bool = False) -> str:
    if f"ratio_vs_{variant}" not in row:
        return "-"
    med = f"{row[f'ratio_vs_{variant}']:.2f}x"
    paired = row[f"ratio_vs_{variant}_per_repeat"]
    spread = f" ({min(paired):.2f}-{max(paired):.2f})" if len(paired) > 1 else ""
    return (f"**{med}**" if bold else med) + spread


def _mode(row: dict[str, Any], batch: int) -> str:
    return "1 cmd/txn" if row["mode"] == "single" else f"{batch} cmd/txn"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m, w = report["machine"], report["workload"]
    batch = w["batch_size"]
    out = header("bench_apply.py", argv, m)
    types = ", ".join(f"{t} {k}" for t, k in w["by_type"].items())
    out += [
        f"- Workload: {w['commands']:,} commands on one story, {w['chapters']} chapters ({types}); "
        f"drafts of {w['draft_words']:,} words; seed {w['seed']}. Commands are parsed before timing "
        f"(parsing costs {w['parse_us_per_command']} us/command).",
        f"- Medians of {report['repeats']} repeats, a fresh store for every variant and repeat. "
        "Ratios are ledger throughput / baseline throughput; in brackets the range of per-repeat "
        "ratios (ledger run and its baselines run back to back).",
        "",
        "| Store | Mode | Txns | Events | Ledger cmd/s | Ledger events/s | Raw cmd/s | Raw events/s "
        "| Ledger/raw | Raw+LOCK cmd/s | Ledger/raw+LOCK | Recorder cmd/s | Recorder/raw | Ledger/recorder "
        "| Event store cmd/s | Event store/raw |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["results"]:
        led, raw = r["ledger"], r["raw"]
        cells = [
            r["store"],
            _mode(r, batch),
            _fmt(r["transactions"]),
            _fmt(r["events"]),
            _fmt(led["commands_per_s"]),
            _fmt(led["events_per_s"]),
            _fmt(raw["commands_per_s"]),
            _fmt(raw["events_per_s"]),
            _ratio(r, "raw", bold=True),
            _fmt(r["raw_lock"]["commands_per_s"]) if "raw_lock" in r else "-",
            _ratio(r, "raw_lock"),
            _fmt(r["recorder"]["commands_per_s"]),
            f"{r['recorder_vs_raw']:.2f}x",
            _ratio(r, "recorder"),
            _fmt(r["event_store"]["commands_per_s"]) if "event_store" in r else "-",
            f"{r['event_store_vs_raw']:.2f}x" if "event_store_vs_raw" in r else "-",
        ]
        out.append("| " + " | ".join(cells) + " |")
    profiled = [r for r in report["results"] if "profile" in r]
    if profiled:
        out += [
            "",
            "Where the ledger's time goes (one extra instrumented ledger run per row; ms per command):",
            "",
            "| Store | Mode | Instrumented cmd/s | Total | Loads (repository.get) | of which SQL | "
            "Save | of which SQL + commit | Decide + rest | Reads/cmd | of which empty |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for r in profiled:
            p, ms = r["profile"], r["profile"]["ms_per_command"]
            out.append(
                f"| {r['store']} | {_mode(r, batch)} | {_fmt(p['commands_per_s'])} | {ms['total']:.2f} "
                f"| {ms['load']:.2f} | {ms['load_sql']:.2f} | {ms['save']:.2f} | {ms['save_sql']:.2f} "
                f"| {ms['decide_other']:.2f} | {p['reads_per_command']:.2f} | {p['empty_reads_per_command']:.2f} |"
            )
        singles = [r for r in profiled if r["mode"] == "single" and r["profile"]["by_type"]]
        if singles:
            stores = [r["store"] for r in singles]
            out += [
                "",
                "Per command type, 1 cmd/txn (instrumented run; ms per command, SQL reads per command):",
                "",
                "| Command | Count | " + " | ".join(f"{s} ms | {s} reads (empty)" for s in stores) + " |",
                "|---|--:|" + "--:|--:|" * len(stores),
            ]
            for t in singles[0]["profile"]["by_type"]:
                cells = [t, str(singles[0]["profile"]["by_type"][t]["commands"])]
                for r in singles:
                    bt = r["profile"]["by_type"][t]
                    cells += [
                        f"{bt['ms_per_command']:.2f}",
                        f"{bt['reads_per_command']:.2f} ({bt['empty_reads_per_command']:.2f})",
                    ]
                out.append("| " + " | ".join(cells) + " |")
    for store, reason in report["skipped"].items():
        out += ["", f"Skipped {store}: {reason}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 commands, 1 repeat (smoke run)")
    parser.add_argument("--commands", type=int, help="commands in the story (default 2000; 300 with --quick)")
    parser.add_argument("--repeats", type=int, help="repeats, fresh store each (default 3; 1 with --quick)")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--stores", default="sqlite,postgres", help="comma list of sqlite,postgres")
    parser.add_argument("--draft-words", type=int, default=2000, help="words per submitted draft")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--no-profile", dest="profile", action="store_false", help="skip the instrumented run")
    add_common_options(parser)
    args = parser.parse_args(argv)
    args.commands = args.commands or (300 if args.quick else 2000)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = set(args.stores) - {"sqlite", "postgres"}
    if unknown or args.commands < 1 or args.repeats < 1 or args.batch_size < 1:
        parser.error(f"bad arguments (unknown stores: {sorted(unknown)})" if unknown else "counts must be >= 1")

    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
