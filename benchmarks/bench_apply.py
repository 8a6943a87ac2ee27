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
* ``raw``      - plain sqlite3 / psycopg INSERTs of exactly the rows the ledger wrote (read
                 back from its events table: originator_id, originator_version, topic,
                 state), one transaction per ledger transaction, into a fresh events table
                 created by the library (same shape: SQLite ``stored_events``, PostgreSQL
                 ``canonledger_events``);
* ``raw_lock`` - PostgreSQL only: ``raw`` plus ``LOCK TABLE ... IN EXCLUSIVE MODE`` in each
                 transaction, as the library does to keep commit order = position order.

Every variant gets a fresh store per repeat; the report gives medians over the repeats and
the ratio ledger/raw. One extra instrumented ledger run per store and mode (not part of the
medians) splits the time into loads (repository.get, of which SQL), save (of which the recorder's
insert + commit) and the rest (domain decisions, receipts, unit of work, ledger code).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

import psycopg
from psycopg import sql as pg_sql
from eventsourcing.persistence import StoredEvent
from sqlalchemy.engine import make_url

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.stores import open_ledger

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
STORY = "bench-story"
CANON_KINDS = ("character", "location", "thread", "item", "world_rule", "faction")
PG_INSERT = "INSERT INTO {} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)"
PG_LOCK = "LOCK TABLE {} IN EXCLUSIVE MODE"
SQLITE_INSERT = "INSERT INTO {} (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)"

Row = tuple[uuid.UUID, int, str, bytes]  # originator_id, originator_version, topic, state


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the workload ------------------------------------------------------------------------------
WORDS = (
    "lamp quay river salt night bell ledger wick guild flood shadow lantern ward ink brass "
    "harbour fog silver memory cost debt rope tide window stair coin letter candle ash smoke "
    "glass rain bridge market clock whisper oath stone iron thread map key door"
).split()


def _prose(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while len(out) < words:
        sentence = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        sentence[0] = sentence[0].capitalize()
        out.extend(sentence)
        out[-1] += "."
    return " ".join(out[:words])


def generate_story(n: int, *, seed: int = 2, draft_words: int = 2000) -> list[dict[str, Any]]:
    """``n`` valid commands for one story, in an authoring app's order: per chapter a plan, a
    few canon proposals each confirmed (some revising existing entries), three scene cards
    tagging confirmed keys (callbacks may name any kind), a draft, its acceptance, a summary."""
    rng = random.Random(seed)
    cmds: list[dict[str, Any]] = []

    def add(command_type: str, /, **fields: Any) -> None:
        cmds.append({"type": command_type, "command_id": f"bench-{len(cmds) + 1:06d}", "story_id": STORY, **fields})

    add(
        "start_story",
        title="The Benchmark Ledger",
        style_guardrails=["Close third person; past tense.", "No modern slang."],
        output_contract="Markdown prose, 1,800-2,400 words.",
        budgets={"writer": 12000},
    )
    confirmed: dict[str, list[str]] = {k: [] for k in CANON_KINDS}
    chapter = 0
    while len(cmds) < n:
        chapter += 1
        add("plan_chapter", chapter=chapter, volume=(chapter - 1) // 10 + 1, goals=[_prose(rng, 12), _prose(rng, 10)])
        kinds = ["character", "location"] if chapter == 1 else [rng.choice(CANON_KINDS) for _ in range(rng.randint(1, 3))]
        for i, kind in enumerate(kinds, start=1):
            revise = bool(confirmed[kind]) and rng.random() < 0.3
            key = rng.choice(confirmed[kind]) if revise else f"{kind}-{len(confirmed[kind]) + 1}"
            proposal = f"p-{chapter}-{i}"
            add(
                "propose_canon",
                proposal_id=proposal,
                kind=kind,
                key=key,
                name=key.replace("-", " ").title(),
                aliases=[],
                text=_prose(rng, 40),
                fields={"status": rng.choice(["open", "active", "hidden"])},
                valid_from=chapter,
                tags=[rng.choice(WORDS)],
            )
            add("confirm_canon", proposal_id=proposal)
            if not revise:
                confirmed[kind].append(key)
        everything = [key for keys in confirmed.values() for key in keys]
        for s in range(1, 4):

            def pick(kind: str, most: int) -> list[str]:
                keys = confirmed[kind]
                return rng.sample(keys, min(len(keys), rng.randint(0, most)))

            add(
                "add_scene_card",
                chapter=chapter,
                scene_id=f"s{s}",
                summary=_prose(rng, 30),
                characters=pick("character", 3) or confirmed["character"][:1],
                locations=pick("location", 1),
                threads=pick("thread", 1),
                items=pick("item", 1),
                callbacks=rng.sample(everything, min(len(everything), rng.randint(0, 1))),
            )
        add("submit_draft", chapter=chapter, draft_id=f"d{chapter}", text=_prose(rng, draft_words))
        add("accept_draft", draft_id=f"d{chapter}")
        add("record_chapter_summary", chapter=chapter, text=_prose(rng, 120))
    return cmds[:n]


# -- stores --------------------------------------------------------------------------------------
def _conninfo(url: str, database: str | None = None) -> str:
    u = make_url(url)
    parts: dict[str, Any] = {
        "host": u.host or "127.0.0.1",
        "port": u.port or 5432,
        "user": u.username or "postgres",
        "dbname": database or u.database or "postgres",
    }
    if u.password:
        parts["password"] = u.password
    return " ".join(f"{k}={v}" for k, v in parts.items())


class SQLiteStores:
    kind = "sqlite"

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="canon_bench_")

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        path = os.path.join(self.root, f"{uuid.uuid4().hex[:12]}.db")
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class PostgresStores:
    kind = "postgres"

    def __init__(self, admin_url: str) -> None:
        self.admin = admin_url
        with psycopg.connect(_conninfo(admin_url), connect_timeout=3):
            pass

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        name = f"canon_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_conninfo(self.admin), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(self.admin).set(database=name).render_as_string(hide_password=False)
        finally:
            assert name.startswith("canon_bench_")
            with psycopg.connect(_conninfo(self.admin), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        pass


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

    def __post_init__(self) -> None:
        self._wrap(self.ledger.repository, "get", "load")
        self._wrap(self.ledger.recorder, "select_events", "read_sql")
        self._wrap(self.ledger, "save", "save")
        self._wrap(self.ledger.recorder, "insert_events", "write_sql")
        self.counts["read_sql_empty"] = 0

    def _wrap(self, obj: Any, name: str, label: str) -> None:
        inner = getattr(obj, name)
        self.totals[label] = 0.0
        self.counts[label] = 0
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            result = None
            try:
                result = inner(*args, **kwargs)
                return result
            finally:
                self.totals[label] += clock() - t0
                self.counts[label] += 1
                if label == "read_sql" and not result:
                    self.counts["read_sql_empty"] += 1

        setattr(obj, name, timed)


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _read_back(ledger: CanonLedger, positions: list[int]) -> list[list[Row]]:
    """The ledger's stored_events rows, grouped by the transaction (position) that wrote them."""
    rows: list[tuple[int, Row]] = []
    start = 1
    while True:
        page = ledger.recorder.select_notifications(start, 1000)
        rows += [(n.id, (n.originator_id, n.originator_version, n.topic, n.state)) for n in page]
        if len(page) < 1000:
            break
        start = page[-1].id + 1
    groups: list[list[Row]] = []
    i = 0
    for position in positions:
        group: list[Row] = []
        while i < len(rows) and rows[i][0] <= position:
            group.append(rows[i][1])
            i += 1
        groups.append(group)
    assert i == len(rows), f"{len(rows) - i} rows after the last position"
    assert all(groups), "a transaction wrote no rows"
    return groups


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
        groups = _read_back(ledger, positions)
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


def _prepare_table(url: str) -> str:
    """Let the library create its events table (and WAL mode on SQLite); return its name.
    (SQLite: ``stored_events``; PostgreSQL: ``canonledger_events``, named after the app.)"""
    ledger = open_ledger(url)
    try:
        return ledger.recorder.events_table_name  # type: ignore[attr-defined,no-any-return]
    finally:
        ledger.close()


def run_recorder(url: str, transactions: list[list[Row]]) -> float:
    ledger = open_ledger(url)
    try:
        batches = [[StoredEvent(o, v, t, s) for o, v, t, s in rows] for rows in transactions]
        insert = ledger.recorder.insert_events
        t0 = time.perf_counter()
        for stored in batches:
            insert(stored)
        seconds = time.perf_counter() - t0
        assert (ledger.recorder.max_notification_id() or 0) == sum(map(len, batches))
        return seconds
    finally:
        ledger.close()


def run_raw_sqlite(url: str, transactions: list[list[Row]]) -> float:
    insert = SQLITE_INSERT.format(_prepare_table(url))
    path = make_url(url).database
    batches = [[(o.hex, v, t, s) for o, v, t, s in rows] for rows in transactions]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        t0 = time.perf_counter()
        for rows in batches:
            conn.execute("BEGIN")
            conn.executemany(insert, rows)
            conn.execute("COMMIT")
        seconds = time.perf_counter() - t0
        table = insert.split()[2]
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == sum(map(len, batches))
        return seconds
    finally:
        conn.close()


def run_raw_postgres(url: str, transactions: list[list[Row]], *, lock: bool) -> float:
    table = pg_sql.Identifier(_prepare_table(url))
    insert, lock_table = pg_sql.SQL(PG_INSERT).format(table), pg_sql.SQL(PG_LOCK).format(table)
    with psycopg.connect(_conninfo(url), autocommit=True) as conn, conn.cursor() as cur:
        t0 = time.perf_counter()
        for rows in transactions:
            with conn.transaction():
                if lock:
                    cur.execute(lock_table)
                cur.executemany(insert, rows)
        seconds = time.perf_counter() - t0
        cur.execute(pg_sql.SQL("SELECT count(*) FROM {}").format(table))
        assert cur.fetchone()[0] == sum(map(len, transactions))  # type: ignore[index]
        return seconds


# -- the benchmark -------------------------------------------------------------------------------
def machine_info(pg_admin: str | None) -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "-"

    cpu = "-"
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "loadavg_start": _loadavg(),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "eventsourcing": version("eventsourcing"),
        "psycopg": version("psycopg"),
        "sqlite": sqlite3.sqlite_version,
        "git_commit": "-",
    }
    with contextlib.suppress(Exception):
        here = os.path.dirname(os.path.abspath(__file__))
        info["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, check=True
        ).stdout.strip()
    with contextlib.suppress(Exception):
        conn = sqlite3.connect(":memory:")
        info["sqlite_synchronous"] = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            conn.execute("PRAGMA synchronous").fetchone()[0]
        ]
    if pg_admin:
        with contextlib.suppress(Exception), psycopg.connect(_conninfo(pg_admin), connect_timeout=3) as conn:
            settings = {}
            for name in ("server_version", "fsync", "synchronous_commit", "wal_sync_method", "shared_buffers"):
                settings[name] = conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            info["postgres"] = settings
    return info


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "-"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    dicts = generate_story(args.commands, seed=args.seed, draft_words=args.draft_words)
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

    stores: list[Any] = []
    skipped: dict[str, str] = {}
    for kind in args.stores:
        if kind == "sqlite":
            stores.append(SQLiteStores())
        elif kind == "postgres":
            try:
                stores.append(PostgresStores(args.pg_url))
            except psycopg.Error as e:
                skipped["postgres"] = f"no server at {make_url(args.pg_url).render_as_string()}: {e}"
                log(f"skipping PostgreSQL: {skipped['postgres']}")
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
                        for v in ("ledger", "recorder", "raw", "raw_lock")
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
            for variant in ("ledger", "recorder", "raw", "raw_lock"):
                secs = samples.get((*key, variant))
                if not secs:
                    continue
                med = _median(secs)
                row[variant] = {
                    "median_seconds": med,
                    "seconds": secs,
                    "commands_per_s": n / med,
                    "events_per_s": c["events"] / med,
                }
            ledger_s = row["ledger"]["median_seconds"]
            for variant in ("recorder", "raw", "raw_lock"):
                if variant in row:
                    row[f"ratio_vs_{variant}"] = row[variant]["median_seconds"] / ledger_s
                    # Ledger and its baselines ran back to back in each repeat: paired ratios.
                    paired = [b / a for a, b in zip(row["ledger"]["seconds"], row[variant]["seconds"])]
                    row[f"ratio_vs_{variant}_per_repeat"] = paired
            if "recorder" in row:
                row["recorder_vs_raw"] = row["raw"]["median_seconds"] / row["recorder"]["median_seconds"]
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
    info["loadavg_end"] = _loadavg()
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
    out = [
        f"- Command: `python benchmarks/bench_apply.py{' ' + ' '.join(argv) if argv else ''}`",
        f"- Date: {m['date']} (git {m['git_commit']}); wall time {m['wall_seconds']} s; "
        f"load average {m['loadavg_start']} at start, {m['loadavg_end']} at end",
        f"- Machine: {m['nproc']} CPUs ({m['cpu']}), {m['platform']}, Python {m['python']}, "
        f"eventsourcing {m['eventsourcing']}, psycopg {m['psycopg']}, SQLite {m['sqlite']} "
        f"(WAL, synchronous={m.get('sqlite_synchronous', '?')})",
    ]
    if "postgres" in m:
        p = m["postgres"]
        out.append(
            f"- PostgreSQL {p['server_version'].split()[0]} on 127.0.0.1 over TCP (fsync={p['fsync']}, "
            f"synchronous_commit={p['synchronous_commit']}, wal_sync_method={p['wal_sync_method']}, "
            f"shared_buffers={p['shared_buffers']})"
        )
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
        "| Ledger/raw | Raw+LOCK cmd/s | Ledger/raw+LOCK | Recorder cmd/s | Recorder/raw | Ledger/recorder |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
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


def emit(report: dict[str, Any], args: argparse.Namespace, text: str) -> None:
    """A benchmark's report: to ``--save-json`` if given, and on stdout as JSON or ``text``."""
    if args.save_json:
        with open(args.save_json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
    print(json.dumps(report, indent=2, default=str) if args.format == "json" else text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 commands, 1 repeat (smoke run)")
    parser.add_argument("--commands", type=int, help="commands in the story (default 2000; 300 with --quick)")
    parser.add_argument("--repeats", type=int, help="repeats, fresh store each (default 3; 1 with --quick)")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--stores", default="sqlite,postgres", help="comma list of sqlite,postgres")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("TEST_DATABASE_URL") or DEFAULT_SERVER,
        help="admin URL of a server whose user may create databases (default TEST_DATABASE_URL or local)",
    )
    parser.add_argument("--draft-words", type=int, default=2000, help="words per submitted draft")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--no-profile", dest="profile", action="store_false", help="skip the instrumented run")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--save-json", metavar="PATH", help="also write the JSON report to PATH")
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
