"""What the benchmark scripts share: stores, loading a story, machine info, percentiles, the
report header, the common options and the report's output.

Not part of the pytest run, and not a package: each script puts ``benchmarks/`` first on
``sys.path`` and imports ``common`` (and ``gen_story``, the one story generator). No script
imports another script's helpers from here on, with three domain harnesses as the exceptions:
``bench_http`` (the served store: ``Server``, ``catch_up``) for ``bench_viewer`` and
``bench_mcp``, and ``bench_cranfield`` (the Cranfield corpus and its metrics) for
``cv_cranfield``.

Stores: a temp SQLite file, or a scratch PostgreSQL database ``canon_bench_<hex>`` created on
the admin URL's server (``--pg-url``; default ``TEST_DATABASE_URL``, else ``BENCH_PG``, else
the local server) and dropped after. Only the standard library is imported at module level,
so loading this module costs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE)):  # the checkout's canon_ledger and tests/; the sibling scripts
    if _path not in sys.path:
        sys.path.insert(0, _path)

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
BIN = os.path.dirname(os.path.abspath(sys.executable))
CANON = os.path.join(BIN, "canon")  # the checkout's CLI, as installed in this interpreter's environment

Row = tuple[uuid.UUID, int, str, bytes]  # a stored event: originator_id, originator_version, topic, state


def log(message: str) -> None:
    """Progress, on stderr (stdout is the report)."""
    print(message, file=sys.stderr, flush=True)


# -- options and output ---------------------------------------------------------------------------
def default_pg_url() -> str:
    return os.environ.get("TEST_DATABASE_URL") or os.environ.get("BENCH_PG") or DEFAULT_SERVER


def add_pg_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pg-url", "--pg", dest="pg_url", default=default_pg_url(),
                        help="admin URL of a PostgreSQL server whose user may create databases "
                             "(default TEST_DATABASE_URL, else BENCH_PG, else the local server)")


def add_output_options(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    """``--format markdown|json`` (when the script prints markdown) and ``--save-json PATH``."""
    if formats:
        parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--save-json", metavar="PATH", help="also write the JSON report to PATH")


def add_common_options(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    """``--pg-url``, ``--format`` and ``--save-json``: what every store benchmark takes."""
    add_pg_option(parser)
    add_output_options(parser, formats=formats)


def story_options(parser: argparse.ArgumentParser) -> None:
    """The generated serial's options (``story_sized`` fills their defaults): chapters, entries,
    seed, load batch size, and the PostgreSQL admin URL."""
    import gen_story

    parser.add_argument("--chapters", type=int, help="chapters in the story (default 1000; 200 with --quick); "
                                                     "the packet is the last chapter's")
    parser.add_argument("--entries", type=int, help="canon entries (default 10 per chapter)")
    parser.add_argument("--seed", type=int, default=gen_story.DEFAULT_SEED)
    parser.add_argument("--batch-size", type=int, default=100, help="commands per atomic batch when loading")
    add_pg_option(parser)


def story_sized(args: argparse.Namespace) -> None:
    """``--chapters`` and ``--entries`` defaults: 1,000 chapters (200 with ``--quick``), 10 entries each."""
    import gen_story

    args.chapters = args.chapters or (200 if args.quick else gen_story.CHAPTERS)
    args.entries = args.entries or args.chapters * gen_story.ENTRIES // gen_story.CHAPTERS


def emit(report: dict[str, Any], args: argparse.Namespace, text: str) -> None:
    """A benchmark's report: to ``--save-json`` if given, and on stdout as JSON or ``text``."""
    if getattr(args, "save_json", None):
        with open(args.save_json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
    print(json.dumps(report, indent=2, default=str) if getattr(args, "format", "markdown") == "json" else text)


# -- machine ---------------------------------------------------------------------------------------
def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "-"


def git_commit() -> str:
    with contextlib.suppress(Exception):
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    return "-"


def machine_info(pg_admin: str | None = None) -> dict[str, Any]:
    """Date, load, CPU, versions and git commit; the PostgreSQL server's durability settings when
    ``pg_admin`` is given. Scripts add ``loadavg_end`` and ``wall_seconds`` at the end."""
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
        "loadavg_start": loadavg(),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "eventsourcing": version("eventsourcing"),
        "psycopg": version("psycopg"),
        "sqlite": sqlite3.sqlite_version,
        "git_commit": git_commit(),
    }
    with contextlib.suppress(Exception):
        conn = sqlite3.connect(":memory:")
        info["sqlite_synchronous"] = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            conn.execute("PRAGMA synchronous").fetchone()[0]
        ]
    if pg_admin:
        with contextlib.suppress(Exception):
            import psycopg

            with psycopg.connect(conninfo(pg_admin), connect_timeout=3) as conn:
                settings = {}
                for name in ("server_version", "fsync", "synchronous_commit", "wal_sync_method", "shared_buffers"):
                    settings[name] = conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                info["postgres"] = settings
    return info


def header(script: str, argv: Sequence[str], m: dict[str, Any]) -> list[str]:
    """The report's first lines: the command, date, git commit, wall time and load, the machine and,
    when measured, the PostgreSQL server's settings."""
    wall = f"; wall time {m['wall_seconds']} s" if "wall_seconds" in m else ""
    out = [
        f"- Command: `python benchmarks/{script}{' ' + ' '.join(argv) if argv else ''}`",
        f"- Date: {m.get('date', '-')} (git {m.get('git_commit', '-')}){wall}; "
        f"load average {m.get('loadavg_start', '-')} at start, {m.get('loadavg_end', '-')} at end",
        f"- Machine: {m.get('nproc')} CPUs ({m.get('cpu', '-')}), {m.get('platform', '-')}, Python {m.get('python')}, "
        f"eventsourcing {m.get('eventsourcing', '-')}, psycopg {m.get('psycopg', '-')}, SQLite {m.get('sqlite', '-')} "
        f"(WAL, synchronous={m.get('sqlite_synchronous', '?')})",
    ]
    if "postgres" in m:
        p = m["postgres"]
        out.append(f"- PostgreSQL {p['server_version'].split()[0]} on 127.0.0.1 over TCP (fsync={p['fsync']}, "
                   f"synchronous_commit={p['synchronous_commit']}, wal_sync_method={p['wal_sync_method']}, "
                   f"shared_buffers={p['shared_buffers']})")
    return out


def rss_mb() -> float:
    """Peak RSS of this process image: VmHWM. (``ru_maxrss`` is the fallback only: on Linux it keeps
    the parent's high-water mark across fork + exec.)"""
    with contextlib.suppress(OSError):
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    return ru_maxrss_mb()


def ru_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (MB) of a process, from /proc/<pid>/status."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- statistics ------------------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentiles(values: Sequence[float], scale: float = 1e3) -> dict[str, float]:
    """Seconds in, ms out (``scale``): p50 (the median), p90, p95, p99 (linear interpolation between
    the closest ranks: ``statistics.quantiles(method="inclusive")``), mean, min, max and n."""
    if not values:
        nan = float("nan")
        return {"p50": nan, "p90": nan, "p95": nan, "p99": nan, "mean": nan, "min": nan, "max": nan, "n": 0}
    ms = sorted(v * scale for v in values)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    return {"p50": statistics.median(ms), "p90": q[89], "p95": q[94], "p99": q[98], "mean": statistics.fmean(ms),
            "min": ms[0], "max": ms[-1], "n": len(ms)}


# -- stores ----------------------------------------------------------------------------------------
def conninfo(url: str, database: str | None = None) -> str:
    """A libpq conninfo string for a SQLAlchemy-style PostgreSQL URL (``stores.server_conninfo``)."""
    from canon_ledger.infrastructure.stores import server_conninfo

    return server_conninfo(url, database)


class SQLiteStores:
    """Fresh SQLite files (WAL, as the product opens them) in one temp folder."""

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
    """Scratch databases ``canon_bench_<hex>`` on the admin URL's server: created (empty, or copied
    from a template), then dropped. The constructor fails at once when no server answers."""

    kind = "postgres"

    def __init__(self, admin_url: str | None = None) -> None:
        import psycopg

        self.admin = admin_url or default_pg_url()
        self.made: list[str] = []
        with psycopg.connect(conninfo(self.admin), connect_timeout=3):
            pass

    def execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(conninfo(self.admin), autocommit=True) as conn:
            conn.execute(statement)

    def url(self, name: str) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.admin).set(database=name).render_as_string(hide_password=False)

    def create(self, template: str | None = None, suffix: str = "") -> str:
        """A new database's name (a copy of ``template`` when given)."""
        name = f"canon_bench_{uuid.uuid4().hex[:12]}{suffix}"
        self.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        self.made.append(name)
        return name

    def drop(self, name: str) -> None:
        assert name.startswith("canon_bench_")
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self.made:
            self.made.remove(name)

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        name = self.create()
        try:
            yield self.url(name)
        finally:
            self.drop(name)

    def close(self) -> None:
        for name in list(self.made):
            with contextlib.suppress(Exception):
                self.drop(name)


def stores_for(kinds: Sequence[str], pg_url: str | None = None) -> tuple[list[Any], dict[str, str]]:
    """One store factory per kind ("sqlite", "postgres"), and the kinds skipped with the reason (no
    PostgreSQL server answers: reported, not fatal)."""
    stores: list[Any] = []
    skipped: dict[str, str] = {}
    for kind in kinds:
        if kind == "sqlite":
            stores.append(SQLiteStores())
        elif kind == "postgres":
            try:
                stores.append(PostgresStores(pg_url))
            except Exception as e:  # noqa: BLE001 - reported in the report
                skipped["postgres"] = f"no server at {pg_url or default_pg_url()}: {e}"
                log(f"skipping PostgreSQL: {skipped['postgres']}")
        else:
            raise ValueError(f"unknown store {kind!r}")
    return stores, skipped


def chapters_measured(last: int) -> list[int]:
    """The chapters a per-chapter benchmark measures: 10, 100 and 1,000 where the story is
    longer, and its last."""
    return sorted({c for c in (10, 100, 1000) if c < last} | {last})


@contextlib.contextmanager
def bench_stores(args: argparse.Namespace, started: float) -> Iterator[tuple[list[Any], dict[str, str], dict[str, Any]]]:
    """The stores ``args.store`` names (``both``: SQLite, then PostgreSQL), the kinds skipped
    (``stores_for``) and the machine's description (``machine_info``). On the way out every
    store is closed and the description gets the load at the end and the wall seconds since
    ``started``."""
    stores, skipped = stores_for(["sqlite", "postgres"] if args.store == "both" else [args.store], args.pg_url)
    info = machine_info(args.pg_url if any(s.kind == "postgres" for s in stores) else None)
    try:
        yield stores, skipped, info
    finally:
        for store in stores:
            store.close()
        info["loadavg_end"] = loadavg()
        info["wall_seconds"] = round(time.perf_counter() - started, 1)


def scratch(kind: str, pg_url: str | None = None) -> tuple[str, Callable[[], None]]:
    """(url, cleanup) of one fresh store, for code that cannot hold a ``with`` block open."""
    stack = contextlib.ExitStack()
    factory = SQLiteStores() if kind == "sqlite" else PostgresStores(pg_url)
    stack.callback(factory.close)
    url = stack.enter_context(factory.fresh())
    return url, stack.close


# -- loading a story -------------------------------------------------------------------------------
def applied_batches(ledger: Any, commands: list[Any], batch: int, kind: str) -> Iterator[list[Any]]:
    """Each ``batch`` of ``commands`` applied in one transaction (``atomic``), its results; a
    command not ``applied`` stops the run, naming the first refusal."""
    for i in range(0, len(commands), batch):
        results = ledger.apply(commands[i: i + batch], atomic=True)
        bad = [r for r in results if r.status != "applied"]
        if bad:
            first = next((r for r in bad if r.status != "not_applied"), bad[0])
            raise RuntimeError(f"{kind}: batch at command {i + 1} not applied: {first.as_dict()}")
        yield results


def load_story(url: str, kind: str, commands: list[Any], batch: int) -> dict[str, Any]:
    """Parsed ``commands`` through the command path, ``ledger.apply(batch, atomic=True)``; every
    command must come back ``applied``. Progress every 10 s on stderr."""
    from canon_ledger.infrastructure.stores import open_ledger

    ledger = open_ledger(url)
    try:
        t0 = last = time.perf_counter()
        applied = 0
        for results in applied_batches(ledger, commands, batch, kind):
            applied += len(results)
            now = time.perf_counter()
            if now - last >= 10 or applied == len(commands):
                last = now
                rate = applied / (now - t0)
                log(f"{kind}: loaded {applied:,}/{len(commands):,} commands ({100 * applied / len(commands):.0f}%), "
                    f"log position {results[-1].position:,}, {rate:,.0f} cmd/s, {now - t0:.0f} s elapsed, "
                    f"~{(len(commands) - applied) / rate:.0f} s to go")
        seconds = time.perf_counter() - t0
        events = ledger.event_log.position()
    finally:
        ledger.close()
    return {"seconds": seconds, "commands": len(commands), "events": events, "transactions": -(-len(commands) // batch),
            "commands_per_s": len(commands) / seconds, "events_per_s": events / seconds,
            "loader_peak_rss_mb": rss_mb()}


def story_commands(args: argparse.Namespace) -> tuple[dict[str, Any], list[Any]]:
    """The generated serial's totals and its parsed commands (``--seed``, ``--chapters``, ``--entries``)."""
    import gen_story

    from canon_ledger.domain.commands import parse_command

    t0 = time.perf_counter()
    dicts = gen_story.generate(seed=args.seed, chapters=args.chapters, entries=args.entries)
    generated = time.perf_counter() - t0
    story = gen_story.totals(dicts)
    t0 = time.perf_counter()
    commands = [parse_command(d) for d in dicts]
    parsed = time.perf_counter() - t0
    del dicts
    story.update(seed=args.seed, generate_seconds=round(generated, 2), parse_seconds=round(parsed, 2))
    log(f"story: {story['commands']:,} commands, {story['events']:,} events expected, {story['chapters']:,} chapters, "
        f"{story['canon_entries']:,} canon entries (generated in {generated:.1f} s, parsed in {parsed:.1f} s)")
    return story, commands


def run_worker(cfg: dict[str, Any], mode: str, script: str) -> dict[str, Any]:
    """Run ``script MODE CFG`` in a fresh interpreter (so the parent's heap is not in its memory);
    its last stdout line is the JSON result."""
    proc = subprocess.run([sys.executable, os.path.abspath(script), mode, json.dumps(cfg)],
                          stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg.get('kind', '')} {mode} failed with exit status {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- raw baselines: the rows a ledger wrote, inserted again without it -------------------------------
PG_INSERT = "INSERT INTO {} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)"
PG_LOCK = "LOCK TABLE {} IN EXCLUSIVE MODE"
PG_COPY = "COPY {} (originator_id, originator_version, topic, state) FROM STDIN (FORMAT BINARY)"
SQLITE_INSERT = "INSERT INTO {} (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)"


def read_back(ledger: Any, positions: list[int]) -> list[list[Row]]:
    """The ledger's stored event rows, grouped by the transaction (its last position) that wrote them."""
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


def prepare_table(url: str) -> str:
    """Let the library create its events table (and WAL mode on SQLite); return its name.
    (SQLite: ``stored_events``; PostgreSQL: ``canonledger_events``, named after the app.)"""
    from canon_ledger.infrastructure.stores import open_ledger

    ledger = open_ledger(url)
    try:
        return ledger.recorder.events_table_name  # type: ignore[no-any-return]
    finally:
        ledger.close()


def run_recorder(url: str, transactions: list[list[Row]]) -> float:
    """The library alone: ``recorder.insert_events`` of the same rows, one call per transaction."""
    from eventsourcing.persistence import StoredEvent

    from canon_ledger.infrastructure.stores import open_ledger

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
    """``sqlite3`` ``BEGIN`` / ``executemany`` / ``COMMIT`` of the same rows (WAL)."""
    from sqlalchemy.engine import make_url

    insert = SQLITE_INSERT.format(prepare_table(url))
    path = make_url(url).database
    batches = [[(o.hex, v, t, s) for o, v, t, s in rows] for rows in transactions]
    conn = sqlite3.connect(path, isolation_level=None)  # type: ignore[arg-type]
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
    """``psycopg`` ``executemany`` of a plain INSERT per transaction (with ``lock``: the library's
    ``LOCK TABLE ... IN EXCLUSIVE MODE`` first)."""
    import psycopg
    from psycopg import sql as pg_sql

    table = pg_sql.Identifier(prepare_table(url))
    insert, lock_table = pg_sql.SQL(PG_INSERT).format(table), pg_sql.SQL(PG_LOCK).format(table)
    with psycopg.connect(conninfo(url), autocommit=True) as conn, conn.cursor() as cur:
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


def run_copy_postgres(url: str, transactions: list[list[Row]]) -> float:
    """``COPY ... FROM STDIN (FORMAT BINARY)`` of the same rows, one transaction each."""
    import psycopg
    from psycopg import sql as pg_sql

    table = pg_sql.Identifier(prepare_table(url))
    copy_sql = pg_sql.SQL(PG_COPY).format(table)
    with psycopg.connect(conninfo(url), autocommit=True) as conn, conn.cursor() as cur:
        t0 = time.perf_counter()
        for rows in transactions:
            with conn.transaction(), cur.copy(copy_sql) as copy:
                copy.set_types(["uuid", "int8", "text", "bytea"])
                for row in rows:
                    copy.write_row(row)
        seconds = time.perf_counter() - t0
        cur.execute(pg_sql.SQL("SELECT count(*) FROM {}").format(table))
        assert cur.fetchone()[0] == sum(map(len, transactions))  # type: ignore[index]
        return seconds


# -- old code beside new ----------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]


def old_worktree(ref: str, folder: Path) -> bool:
    """The old code of an old-against-new benchmark at ``folder``, a git worktree of this checkout at
    ``ref`` (made if missing; refused if it is something else). True when this call made it: the
    caller removes it after."""
    wanted = subprocess.run(["git", "rev-parse", ref], cwd=REPO, check=True, capture_output=True,
                            text=True).stdout.strip()
    if folder.exists():
        there = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()
        if there != wanted:
            raise SystemExit(f"{folder} exists and is not a worktree at {ref} ({wanted[:10]}): remove it or pass "
                             f"--old-dir")
        return False
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), wanted], cwd=REPO, check=True,
                   capture_output=True)
    return True
