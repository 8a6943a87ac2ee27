#!/usr/bin/env python
"""Live projection workers (``canon worker``): projection lag, scale-out, packets during a catch-up (issue 18).

    python benchmarks/bench_worker.py [--quick] [--store sqlite|postgres|both] [--seconds S] [--rate R]
                                      [--stories N] [--chapters C] [--repeats R] [--markdown] [--save-json PATH]

Not part of the pytest run. Every worker is a real ``canon --db URL --format json worker``
subprocess with ``CANON_EMBEDDER=hashing`` (never an in-process ``ProjectionWorker``), so the
worker has its own interpreter, connections and GIL, as it has in production. Three parts:

1. **Steady state** (PostgreSQL and SQLite, a fresh store each): ``gen_story.flat``
   (seed 2, drafts of ``--draft-words`` 300): per chapter ``plan_chapter``, 1-3 ``propose_canon`` +
   ``confirm_canon`` pairs, three scene cards, ``submit_draft`` + ``accept_draft`` (the chapter
   text the knowledge, keyword and vector models index) and ``record_chapter_summary``. The first
   ``--preload`` commands are loaded in atomic batches of 100 and caught up by one ``canon worker
   --once`` (set-up, timed); then a following ``canon worker`` is started and waited for (a
   ``caught_up`` JSON line per model). The writer (this process's main thread, its own
   ``open_ledger``) applies the rest one command per transaction on a schedule paced at ``--rate``
   (50/s) for ``--seconds`` (60; 15 with ``--quick``), noting ``time.monotonic()`` when each
   ``apply`` returns and the position it answers. A **poller subprocess** reads the serving
   builds' tracking rows of canon and vectors (``rm_projections`` joined to ``rm_tracking``, one
   statement, its own autocommit connection) every ``--poll-ms`` (2 ms) and keeps each change with
   its monotonic time. **Lag "commit to row"** of a command = the first poll that saw the model's
   tracking row at or past the command's position, minus the apply's return. It is counted only
   for commands that carry one of the model's events (read from the log afterwards with the
   model's topics): a command with none is reflected with no write, and the row stays where it is
   (``runner.QUIET_GAP``). For canon that is every command but ``propose_canon`` and
   ``submit_draft``; for vectors only ``accept_draft`` (``Chapter.TextAccepted``). A **status
   subprocess** calls ``services.status()`` once a second (the embedding backlog:
   ``status()["vectors"].texts``, and each model's pending count). After the writer stops, the run
   waits for both rows to pass the last command, then SIGTERMs the worker.
2. **Scale-out** (PostgreSQL): ``--stories`` (4) disjoint stories from ``gen_story.generate``
   (``--chapters`` 250 each, 10 entries per chapter: ~25,000 events each; ``--quick``: 30
   chapters, ~3,000), story ids and command ids rewritten as in ``tests/e2e/test_worker.py``,
   loaded once into a template database ``canon_bench_<hex>_tpl`` (read model tables empty, then
   ``VACUUM ANALYZE``, as the server runs with autovacuum off). Each run copies it (``CREATE
   DATABASE ... TEMPLATE``, not timed) and catches every read model up from empty with one
   ``canon worker --once`` or two started together; the run ends when every worker has exited and
   ``services.status()`` shows 0 pending for every model. Throughput = log events / seconds from
   the launch (interpreter start-up included; it is measured apart, on a caught-up copy). Order
   one, two, one, two, ... (``--repeats`` 2), a fresh copy each time; medians; ratio two / one.
   Each worker's CPU time (``os.wait4``), the machine's CPU use over the run (``/proc/stat``), and
   each worker's per-model ``caught_up`` lines (seconds per model) are kept. Nothing else runs in
   these timed runs. Then one more one-worker catch-up with the status subprocess sampling
   ``services.status()`` every ``--status-every`` (2 s; 0: no such run): the backlog over time
   and what a status read costs during a catch-up. ``--per-model`` (a diagnostic): each read model
   alone (``--projection NAME``), one worker then two, one run each.
3. **Packets during a catch-up** (``--packet-runs``, 1: one-worker catch-ups after the timed
   runs, so the timed runs carry no side load): a thread of this process times
   ``services.packet(Request("story-1", "writer", chapter), record=False)`` every ``--packet-ms``
   (100 ms, start to start; back to back when a packet takes longer) with
   ``bootstrap(url, indexed_by_worker=True, embedder="hashing")`` (as ``canon serve`` does when a
   worker feeds it). No ``after``, so each packet reflects the log's end. Timing starts once canon's tracking
   row has reached the log's end: **canon is current** for every timed packet (otherwise the first
   packet would catch canon up itself, read your writes, doing the worker's canon work), and the
   knowledge, keyword and vector models are catching up; each packet notes whether a stage said an
   index is behind ("not yet indexed / embedded"). Then the same packet ``--idle-packets`` (40)
   times, 100 ms apart, once everything is caught up (idle, same process, same services).

``--quick``: 15 s steady state, 3,000-event stories, 2 repeats: a smoke run, not comparable.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (CANON, PostgresStores, SQLiteStores, add_pg_option, conninfo, header, load_story,  # noqa: E402
                    loadavg, log, machine_info, median, percentiles)

MODELS = ("canon", "authoring", "knowledge", "retrieval", "vectors")
TARGETS = {"canon_lag_p99_ms": 250.0, "scale_out_ratio": 1.6}
SCRIPT = os.path.abspath(__file__)
CHILDREN: list[subprocess.Popen[Any]] = []  # every process started here: ended on the way out, whatever happens


def _end_children() -> None:
    """SIGTERM to each child still running (a ``--once`` worker whose database is dropped would
    retry for ever), then SIGKILL after 10 s."""
    for proc in CHILDREN:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in CHILDREN:
        with contextlib.suppress(Exception):
            proc.wait(max(0.1, deadline - time.monotonic()))
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()


def _env() -> dict[str, str]:
    env = {**os.environ, "CANON_EMBEDDER": "hashing"}
    env.pop("CANON_DATABASE_URL", None)
    return env


def _cpu_stat() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of the machine's CPU time (all cores) that was busy between two /proc/stat reads."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else float("nan")


# -- processes ------------------------------------------------------------------------------------
class Worker:
    """``canon --db URL --format json worker [--once]``: its JSON lines (with the monotonic time
    each arrived) collected by a thread; stderr to a log file."""

    def __init__(self, url: str, log_path: str, *extra: str) -> None:
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in finish()
        self.started = time.monotonic()
        self.proc = subprocess.Popen([CANON, "--db", url, "--format", "json", "worker", *extra],
                                     stdout=subprocess.PIPE, stderr=self._log, env=_env(), text=True)
        CHILDREN.append(self.proc)
        self.rusage: Any = None
        self.exited: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append((time.monotonic(), json.loads(line)))

    def caught_up(self) -> set[str]:
        return {body["model"] for _, body in self.lines if body.get("status") == "caught_up"}

    def faults(self) -> list[str]:
        return [body.get("error", "") for _, body in self.lines if body.get("status") == "fault"]

    def poll_exit(self) -> bool:
        """Reap the process if it has exited (keeping its rusage); True once it has."""
        if self.exited is not None:
            return True
        pid, status, rusage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.exited = time.monotonic()
        self.rusage = rusage
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return True

    def stop(self, timeout: float = 60.0) -> None:
        if not self.poll_exit():
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            killed = False
            while not self.poll_exit():
                if not killed and time.monotonic() > deadline:
                    self.proc.kill()
                    killed = True
                time.sleep(0.02)
        self._reader.join(5)
        self._log.close()

    def summary(self) -> dict[str, Any]:
        models: dict[str, Any] = {}
        for t, body in self.lines:
            if body.get("status") == "caught_up":
                models.setdefault(body["model"], []).append(
                    {"at": round(t - self.started, 3), "seconds": body["seconds"], "positions": body["positions"]})
        out: dict[str, Any] = {"returncode": self.proc.returncode, "faults": self.faults(), "caught_up": models,
                               "wall_seconds": round((self.exited or time.monotonic()) - self.started, 3)}
        if self.rusage is not None:
            out["cpu_seconds"] = round(self.rusage.ru_utime + self.rusage.ru_stime, 3)
        with contextlib.suppress(OSError):
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            out["tracebacks"] = text.count("Traceback (most recent call last)")
        return out


class Observer:
    """This script as a subprocess (``--poll`` or ``--status``) until a stop file appears; its
    result is the JSON it writes to a file."""

    def __init__(self, mode: str, cfg: dict[str, Any], workdir: str) -> None:
        tag = uuid.uuid4().hex[:8]
        self.stop_file = os.path.join(workdir, f"{mode[2:]}_{tag}.stop")
        self.out_file = os.path.join(workdir, f"{mode[2:]}_{tag}.json")
        cfg = {**cfg, "stop": self.stop_file, "out": self.out_file}
        self.proc = subprocess.Popen([sys.executable, SCRIPT, mode, json.dumps(cfg)], stdout=subprocess.PIPE,
                                     env=_env(), text=True)
        CHILDREN.append(self.proc)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready.startswith("ready"):
            raise RuntimeError(f"{mode} did not start: {ready!r}")

    def finish(self, timeout: float = 120.0) -> dict[str, Any]:
        with open(self.stop_file, "w", encoding="ascii"):
            pass
        self.proc.wait(timeout)
        with open(self.out_file, encoding="utf-8") as f:
            return json.load(f)


def poll_main(cfg: dict[str, Any]) -> None:
    """Read the serving builds' tracking rows of ``cfg['names']`` every ``interval`` seconds and keep
    each change: [monotonic time, position of each name]."""
    names, interval, stop = cfg["names"], cfg["interval"], cfg["stop"]
    sql = ("SELECT r.projection, t.position FROM rm_projections r JOIN rm_tracking t "
           "ON t.projection = r.projection || ':' || r.active_tag WHERE r.projection IN ({})")
    if cfg["kind"] == "postgres":
        import psycopg

        conn: Any = psycopg.connect(conninfo(cfg["url"]), autocommit=True)
        statement = sql.format(", ".join(["%s"] * len(names)))

        def read() -> dict[str, int]:
            return dict(conn.execute(statement, names, prepare=True).fetchall())
    else:
        conn = sqlite3.connect(cfg["url"].removeprefix("sqlite:///"), isolation_level=None)
        statement = sql.format(", ".join(["?"] * len(names)))

        def read() -> dict[str, int]:
            return dict(conn.execute(statement, names).fetchall())

    series: list[list[float]] = []
    gaps: list[float] = []
    last: tuple[int, ...] | None = None
    polls = 0
    print("ready", flush=True)
    clock = time.monotonic
    previous = clock()
    while not (polls % 50 == 0 and os.path.exists(stop)):
        now = clock()
        rows = read()
        polls += 1
        seen = tuple(rows.get(n, 0) for n in names)
        if seen != last:
            series.append([now, *seen])
            last = seen
        gaps.append(now - previous)
        previous = now
        time.sleep(interval)
    conn.close()
    gap = percentiles(gaps[1:]) if len(gaps) > 1 else {}
    with open(cfg["out"], "w", encoding="utf-8") as f:
        json.dump({"names": names, "series": series, "polls": polls, "poll_gap_ms": gap}, f)


def status_main(cfg: dict[str, Any]) -> None:
    """``services.status()`` every ``interval`` seconds (start to start): each model's pending
    count and the retrieval and vector models' text backlog, with what the call took."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(cfg["url"], indexed_by_worker=True, embedder="hashing")
    samples: list[dict[str, Any]] = []
    print("ready", flush=True)
    clock = time.monotonic
    t0 = clock()
    i = 0
    try:
        while not os.path.exists(cfg["stop"]):
            start = clock()
            try:
                st = services.status()
            except Exception as e:  # noqa: BLE001 - a sample lost, said so
                samples.append({"t": round(start, 3), "error": f"{type(e).__name__}: {e}"[:200]})
            else:
                samples.append({"t": round(start, 3), "call_ms": round((clock() - start) * 1e3, 1),
                                "pending": {n: s.pending for n, s in st.items()},
                                "capped": [n for n, s in st.items() if s.capped],
                                "texts": {n: s.texts for n, s in st.items() if s.texts is not None}})
            i += 1
            due = t0 + i * cfg["interval"]
            while clock() < due and not os.path.exists(cfg["stop"]):
                time.sleep(min(0.05, max(0.0, due - clock())))
    finally:
        services.close()
    with open(cfg["out"], "w", encoding="utf-8") as f:
        json.dump({"samples": samples}, f)


def tracking_now(url: str, names: list[str]) -> dict[str, int]:
    """The serving builds' tracking positions of ``names``, read once."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT r.projection, t.position FROM rm_projections r JOIN rm_tracking t "
                "ON t.projection = r.projection || ':' || r.active_tag")).all()
        return {n: p for n, p in rows if n in names}
    finally:
        engine.dispose()


# -- part 1: steady state -------------------------------------------------------------------------
def model_positions(services: Any, name: str, start: int, stop: int) -> list[int]:
    """Positions in [start, stop] holding an event of read model ``name``'s topics."""
    models = services.read_models[name]
    topics = models.runner(models.active()).projection.topics
    out: list[int] = []
    while start <= stop:
        page = services.ledger.event_log.records(start, 5000, stop, topics)
        out += [r.id for r in page]
        if len(page) < 5000:
            break
        start = page[-1].id + 1
    return out


def lags(applied: list[dict[str, Any]], first: int, relevant: list[int], series: list[list[float]], column: int,
         ) -> dict[str, Any]:
    """Per command carrying one of the model's events: (first poll with the row at or past its
    position) - (the apply's return), in seconds; and how many the polls never saw reflected."""
    times = [row[0] for row in series]
    reached = [row[column] for row in series]
    for a, b in zip(reached, reached[1:]):
        if b < a:
            raise AssertionError(f"a tracking row moved back: {a} -> {b}")
    values: list[float] = []
    by_type: dict[str, list[float]] = {}
    unseen = 0
    before = first
    for a in applied:
        position = a["position"]
        i = bisect.bisect_left(relevant, before + 1)
        carries = i < len(relevant) and relevant[i] <= position
        before = position
        if not carries:
            continue
        j = bisect.bisect_left(reached, position)
        if j == len(reached):
            unseen += 1
            continue
        lag = times[j] - a["returned"]
        values.append(lag)
        by_type.setdefault(a["type"], []).append(lag)
    out = percentiles(values)
    out["unseen"] = unseen
    out["negative"] = sum(1 for v in values if v < 0)
    out["over_250ms"] = sum(1 for v in values if v > 0.25)
    out["by_type_p50_ms"] = {t: round(statistics.median(v) * 1e3, 2) for t, v in sorted(by_type.items())}
    out["by_type_n"] = {t: len(v) for t, v in sorted(by_type.items())}
    return out


def steady(kind: str, url: str, args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.stores import open_ledger

    live_n = int(args.rate * args.seconds)
    dicts = gen_story.flat(args.preload + live_n, seed=2, draft_words=args.draft_words)
    commands = [parse_command(d) for d in dicts]
    pre, live = commands[:args.preload], commands[args.preload:]
    out: dict[str, Any] = {"store": kind, "preload": load_story(url, f"{kind} preload", pre, 100)}
    log(f"{kind} steady: preloaded {len(pre):,} commands ({out['preload']['events']:,} events) in "
        f"{out['preload']['seconds']:.1f} s; catching up with canon worker --once")
    setup = Worker(url, os.path.join(workdir, f"steady_{kind}_setup.log"), "--once")
    while not setup.poll_exit():
        time.sleep(0.05)
    setup.stop()
    out["setup_worker"] = setup.summary()
    if setup.proc.returncode != 0:
        raise RuntimeError(f"{kind}: set-up worker failed: {out['setup_worker']}")

    services = bootstrap(url, indexed_by_worker=True, embedder="hashing")
    names = [services.canon.spec.name, services.vectors.spec.name]
    worker = Worker(url, os.path.join(workdir, f"steady_{kind}_worker.log"))
    deadline = time.monotonic() + 120
    while worker.caught_up() != set(MODELS):
        if worker.poll_exit() or time.monotonic() > deadline:
            raise RuntimeError(f"{kind}: the worker did not come up: {worker.summary()}")
        time.sleep(0.05)
    out["worker_ready_seconds"] = round(time.monotonic() - worker.started, 2)
    poller = Observer("--poll", {"kind": kind, "url": url, "names": names, "interval": args.poll_ms / 1e3}, workdir)
    status = Observer("--status", {"url": url, "interval": 1.0}, workdir)
    ledger = open_ledger(url)
    first = ledger.event_log.position()
    applied: list[dict[str, Any]] = []
    log(f"{kind} steady: worker up in {out['worker_ready_seconds']:.1f} s; writing {len(live):,} commands at "
        f"{args.rate:g}/s for {args.seconds:g} s")
    clock = time.monotonic
    load_before, cpu_before = loadavg(), _cpu_stat()
    t0 = clock() + 0.1
    try:
        for i, command in enumerate(live):
            due = t0 + i / args.rate
            wait = due - clock()
            if wait > 0:
                time.sleep(wait)
            start = clock()
            [result] = ledger.apply([command])
            returned = clock()
            if result.status != "applied":
                raise RuntimeError(f"{kind}: command {i} not applied: {result.as_dict()}")
            applied.append({"type": command.type, "due": due, "start": start, "returned": returned,
                            "position": result.position})
        window = clock() - t0
        last = applied[-1]["position"]
        canon_at = model_positions(services, "canon", first + 1, last)
        vector_at = model_positions(services, "vectors", first + 1, last)
        goals = {names[0]: canon_at[-1] if canon_at else 0, names[1]: vector_at[-1] if vector_at else 0}
        drain_start = clock()
        while True:
            now = tracking_now(url, names)
            if all(now.get(n, 0) >= g for n, g in goals.items()) or clock() - drain_start > 60:
                break
            time.sleep(0.05)
        out["drain_seconds"] = round(clock() - drain_start, 2)
        cpu_after = _cpu_stat()
    finally:
        ledger.close()
        polled = poller.finish()
        sampled = status.finish()
        worker.stop()
        services.close()
    behind = [a["start"] - a["due"] for a in applied]
    out.update(
        commands=len(applied), window_seconds=round(window, 2), applied_per_s=round(len(applied) / window, 2),
        events=last - first, apply_ms=percentiles([a["returned"] - a["start"] for a in applied]),
        writer_behind_schedule_ms=percentiles([max(0.0, b) for b in behind]),
        by_type={t: sum(1 for a in applied if a["type"] == t) for t in dict.fromkeys(a["type"] for a in applied)},
        canon=lags(applied, first, canon_at, polled["series"], 1),
        vectors=lags(applied, first, vector_at, polled["series"], 2),
        poll={"polls": polled["polls"], "changes": len(polled["series"]), "gap_ms": polled["poll_gap_ms"]},
        worker=worker.summary(), loadavg_before=load_before, loadavg_after=loadavg(),
        cpu_busy_share=round(_busy_share(cpu_before, cpu_after), 3),
    )
    samples = [s for s in sampled["samples"] if t0 <= s["t"] <= t0 + window + out["drain_seconds"] and "error" not in s]
    out["backlog"] = {
        "t": [round(s["t"] - t0, 1) for s in samples],
        "vector_texts": [s["texts"].get("vectors") for s in samples],
        "vector_pending": [s["pending"]["vectors"] for s in samples],
        "canon_pending": [s["pending"]["canon"] for s in samples],
        "status_call_ms": percentiles([s["call_ms"] / 1e3 for s in samples]) if samples else {},
        "errors": [s["error"] for s in sampled["samples"] if "error" in s],
    }
    c, v = out["canon"], out["vectors"]
    log(f"{kind} steady: {out['applied_per_s']:.1f} cmd/s applied; canon lag p50 {c['p50']:.1f} / p99 "
        f"{c['p99']:.1f} ms (n {c['n']}); vectors p50 {v['p50']:.1f} / p99 {v['p99']:.1f} ms (n {v['n']}); "
        f"vector backlog max {max((x or 0) for x in out['backlog']['vector_texts']) if samples else '-'} texts")
    return out


# -- parts 2 and 3: scale-out and packets during a catch-up -----------------------------------------
class PacketTimer:
    """Writer packets every ``interval`` seconds (start to start) in a thread of this process,
    from the moment canon's tracking row reaches the log's end (checked every 20 ms, untimed): a
    packet never catches canon up itself (read your writes would otherwise have the first packet
    do the worker's canon work), so what it meets is the other models catching up."""

    def __init__(self, services: Any, request: Any, interval: float) -> None:
        self.services, self.request, self.interval = services, request, interval
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.end = services.ledger.event_log.position()
        self.canon_current_at: float | None = None

    def one(self) -> dict[str, Any]:
        clock = time.monotonic
        canon_current = self.story_position() >= self.end  # untimed: a tracking-row read
        start = clock()
        packet = self.services.packet(self.request, record=False)
        seconds = clock() - start
        lagging = [s.step for s in packet.stages if "not yet" in s.detail]
        return {"t": start, "seconds": seconds, "canon_current": canon_current, "lagging": lagging,
                "hash": packet.hash}

    def _run(self) -> None:
        while not self._stop.is_set() and self.story_position() < self.end:
            self._stop.wait(0.02)
        self.canon_current_at = time.monotonic()
        t0 = time.monotonic()
        i = 0
        while not self._stop.is_set():
            self.samples.append(self.one())
            i += 1
            self._stop.wait(max(0.0, t0 + i * self.interval - time.monotonic()))

    def story_position(self) -> int:
        """Where the packet's story stands in canon (the build's row, or the story's own when
        split workers have taken it further)."""
        with self.services.canon.read_engine.begin() as conn:
            return self.services.canon.serving(conn, self.request.story_id)[1]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def idle(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            t = time.monotonic()
            out.append(self.one())
            time.sleep(max(0.0, t + self.interval - time.monotonic()))
        return out


def pending(services: Any, names: Any) -> int:
    """Entries the read models ``names`` have yet to project (each counted up to ``SCAN``)."""
    from canon_ledger.projections.model_status import model_status

    end = services.ledger.event_log.position()
    return sum(model_status(n, services.read_models[n], services.ledger.event_log, end).pending for n in names)


def catch_up_run(dbs: PostgresStores, template: str, mode: str, index: int, args: argparse.Namespace,
                 workdir: str, *, packets: bool = False, backlog: bool = False,
                 projection: str | None = None) -> dict[str, Any]:
    """One catch-up from empty read models, on a fresh copy of ``template``. ``packets``: with the
    packet thread running (part 3); ``backlog``: with the status subprocess sampling; else nothing
    but the workers.
    ``projection``: that read model only (``canon worker --projection``; a diagnostic)."""
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.infrastructure.bootstrap import bootstrap

    name = dbs.create(template, "_run")
    url = dbs.url(name)
    workers_n = 1 if mode == "one" else 2
    split = ("--split",) if mode.endswith("-split") else ()
    timer: PacketTimer | None = None
    sampled: dict[str, Any] = {"samples": []}
    startup: list[float] | None = None
    try:
        services = bootstrap(url, indexed_by_worker=True, embedder="hashing")
        end = services.ledger.event_log.position()
        status = Observer("--status", {"url": url, "interval": args.status_every}, workdir) if backlog else None
        if packets:
            timer = PacketTimer(services, Request("story-1", "writer", args.packet_chapter), args.packet_ms / 1e3)
        cpu_before, load_before = _cpu_stat(), loadavg()
        t0 = time.monotonic()
        extra = ("--projection", projection) if projection else ()
        names = [projection] if projection else list(MODELS)
        tag = f"run{index}_{mode}{'_packets' if packets else ''}{'_status' if backlog else ''}"
        workers = [Worker(url, os.path.join(workdir, f"{tag}_w{k}.log"), "--once", *split, *extra)
                   for k in range(workers_n)]
        if timer is not None:
            timer.start()
        while not all(w.poll_exit() for w in workers):
            time.sleep(0.02)
        exited = time.monotonic()
        extra_polls = 0
        while pending(services, names):  # --once exited with work left?
            extra_polls += 1
            if time.monotonic() - exited > 300:
                raise RuntimeError(f"run {index}: models still behind 300 s after the workers exited")
            time.sleep(0.1)
        done = time.monotonic()
        cpu_after = _cpu_stat()
        for w in workers:
            w.stop()
        if timer is not None:
            timer.stop()
            idle = timer.idle(args.idle_packets)
        if status is not None:
            sampled = status.finish()
        if index == args.repeats * 2 - 1 and projection is None:
            # the last timed run: what a worker costs before it projects anything
            startup = []
            for _ in range(2):
                w = Worker(url, os.path.join(workdir, "startup.log"), "--once")
                while not w.poll_exit():
                    time.sleep(0.01)
                w.stop()
                startup.append(w.summary()["wall_seconds"])
        services.close()
    finally:
        dbs.drop(name)
    seconds = done - t0
    out: dict[str, Any] = {
        "run": index, "mode": mode, "workers": workers_n, "with_packets": packets, "with_status": backlog,
        "projection": projection,
        "events": end,
        "seconds": round(seconds, 3), "events_per_s": round(end / seconds, 1),
        "exit_to_done_seconds": round(done - exited, 3), "status_polls_after_exit": extra_polls,
        "cpu_busy_share": round(_busy_share(cpu_before, cpu_after), 3),
        "loadavg_before": load_before, "loadavg_after": loadavg(), "worker": [w.summary() for w in workers],
    }
    if timer is not None:
        during = [s for s in timer.samples if s["t"] < done]
        out.update(canon_current_after_s=round(timer.canon_current_at - t0, 3) if timer.canon_current_at else None,
                   packets_during=_packet_summary(during), packets_idle=_packet_summary(idle),
                   packet_hashes_idle=len({s["hash"] for s in idle}),
                   packets_during_series=[[round(s["t"] - t0, 2), round(s["seconds"] * 1e3, 1), s["lagging"]]
                                          for s in during])
    if status is not None:
        out.update(backlog=[{"t": round(s["t"] - t0, 1), "call_ms": s["call_ms"], "pending": s["pending"],
                             "vector_texts": s["texts"].get("vectors"), "capped": s["capped"]}
                            for s in sampled["samples"] if "error" not in s and s["t"] <= done],
                   status_errors=[s["error"] for s in sampled["samples"] if "error" in s])
    if startup is not None:
        out["startup_seconds"] = startup
    cpu = sum(w.get("cpu_seconds", 0.0) for w in out["worker"])
    out["worker_cpu_seconds"] = round(cpu, 2)
    note = ""
    if timer is not None:
        note = (f"; packets p50 {out['packets_during']['all']['p50']:.1f} ms during (n "
                f"{out['packets_during']['all']['n']}), {out['packets_idle']['all']['p50']:.1f} ms idle")
    log(f"run {index} ({mode} worker{'s' if workers_n > 1 else ''}{', with packets' if packets else ''}"
        f"{', with status() sampling' if backlog else ''}"
        f"{', --projection ' + projection if projection else ''}): {end:,} "
        f"events in {seconds:.1f} s = {end / seconds:,.0f} events/s; worker CPU {cpu:.1f} s; machine busy "
        f"{out['cpu_busy_share']:.0%}{note}")
    return out


def _packet_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"all": percentiles([s["seconds"] for s in samples]),
            "with_lag_note": percentiles([s["seconds"] for s in samples if s["lagging"]]),
            "without_lag_note": percentiles([s["seconds"] for s in samples if not s["lagging"]]),
            "canon_behind": sum(1 for s in samples if not s["canon_current"]),
            "first_ms": round(samples[0]["seconds"] * 1e3, 1) if samples else None}


def scale_out(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap

    dbs = PostgresStores(args.pg_url)
    try:
        template = dbs.create(suffix="_tpl")
        url = dbs.url(template)
        services = bootstrap(url, indexed_by_worker=True, embedder="hashing")  # the read models' tables, empty
        services.close()
        loaded: list[dict[str, Any]] = []
        for k in range(1, args.stories + 1):
            story = f"story-{k}"
            dicts = gen_story.for_story(story, chapters=args.chapters, seed=args.seed + k,
                                        entries=args.chapters * gen_story.ENTRIES // gen_story.CHAPTERS)
            stats = load_story(url, f"load {story}", [parse_command(d) for d in dicts], 100)
            loaded.append({"story": story, **stats})
            log(f"scale-out: {story} loaded ({stats['commands']:,} commands) in {stats['seconds']:.1f} s; "
                f"log at {stats['events']:,}")
        import psycopg

        with psycopg.connect(conninfo(url), autocommit=True) as conn:
            autovacuum = conn.execute("SELECT setting FROM pg_settings WHERE name = 'autovacuum'").fetchone()[0]
            t0 = time.perf_counter()
            conn.execute("VACUUM ANALYZE")
            vacuum = time.perf_counter() - t0
        runs = [catch_up_run(dbs, template, mode, i, args, workdir)
                for i, mode in enumerate(args.modes.split(",") * args.repeats)]
        packet_runs = [catch_up_run(dbs, template, mode, len(runs) + i, args, workdir, packets=True)
                       for i, mode in enumerate(args.packet_modes.split(",") * args.packet_runs)]
        backlog_runs = [catch_up_run(dbs, template, "one", len(runs) + len(packet_runs), args, workdir, backlog=True)
                        ] if args.status_every > 0 else []
        per_model = []
        if args.per_model:
            for model in MODELS:
                for mode in ("one", "two"):
                    per_model.append(catch_up_run(dbs, template, mode,
                                                  len(runs) + len(packet_runs) + len(backlog_runs) + len(per_model),
                                                  args, workdir, projection=model))
    finally:
        dbs.close()
    one = [r["events_per_s"] for r in runs if r["mode"] == "one"]
    two = [r["events_per_s"] for r in runs if r["mode"] == "two"] or [float("nan")]
    split = [r["events_per_s"] for r in runs if r["mode"] == "two-split"] or [float("nan")]
    during = [r["packets_during"]["all"]["p50"] for r in packet_runs if r["mode"] == "one"] or [float("nan")]
    idle = [r["packets_idle"]["all"]["p50"] for r in packet_runs if r["mode"] == "one"] or [float("nan")]
    split_during = [r["packets_during"]["all"]["p50"] for r in packet_runs if r["mode"] == "two-split"]
    split_idle = [r["packets_idle"]["all"]["p50"] for r in packet_runs if r["mode"] == "two-split"]
    startup = next((r["startup_seconds"] for r in runs if "startup_seconds" in r), [])
    summary = {
        "one_events_per_s": median(one), "two_events_per_s": median(two),
        "ratio_two_vs_one": median(two) / median(one),
        "two_split_events_per_s": median(split), "ratio_two_split_vs_one": median(split) / median(one),
        "two_split_seconds": median([r["seconds"] for r in runs if r["mode"] == "two-split"] or [float("nan")]),
        "packet_p50_during_split_ms": median(split_during) if split_during else None,
        "packet_p50_idle_split_ms": median(split_idle) if split_idle else None,
        "packet_ratio_during_split_vs_idle": median(split_during) / median(split_idle) if split_during else None,
        "one_seconds": median([r["seconds"] for r in runs if r["mode"] == "one"]),
        "two_seconds": median([r["seconds"] for r in runs if r["mode"] == "two"]),
        "startup_seconds": min(startup) if startup else None,
        "packet_p50_during_ms": median(during), "packet_p50_idle_ms": median(idle),
        "packet_ratio_during_vs_idle": median(during) / median(idle) if packet_runs else float("nan"),
        "packet_p95_during_ms": median([r["packets_during"]["all"]["p95"] for r in packet_runs]),
        "packet_p95_idle_ms": median([r["packets_idle"]["all"]["p95"] for r in packet_runs]),
        "packet_run_events_per_s": median([r["events_per_s"] for r in packet_runs]),
    }
    log(f"scale-out: one worker {summary['one_events_per_s']:,.0f} events/s, two {summary['two_events_per_s']:,.0f} "
        f"events/s: {summary['ratio_two_vs_one']:.2f}x; two --split {summary['two_split_events_per_s']:,.0f} events/s: "
        f"{summary['ratio_two_split_vs_one']:.2f}x; split packets p50 {summary['packet_p50_during_split_ms']} ms during "
        f"vs {summary['packet_p50_idle_split_ms']} idle; packets p50 {summary['packet_p50_during_ms']:.1f} ms "
        f"during a one-worker catch-up vs {summary['packet_p50_idle_ms']:.1f} ms idle")
    return {"stories": loaded, "events": loaded[-1]["events"] if loaded else 0, "autovacuum": autovacuum,
            "vacuum_analyze_seconds": round(vacuum, 2), "runs": runs, "packet_runs": packet_runs,
            "backlog_runs": backlog_runs,
            "per_model": per_model,
            "summary": summary}


# -- the benchmark --------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    info = machine_info(args.pg_url if args.store != "sqlite" else None)
    with contextlib.suppress(Exception):
        info["git_dirty"] = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                           cwd=os.path.dirname(SCRIPT), capture_output=True, text=True,
                                           check=True).stdout.split("\n")[:10]
    workdir = tempfile.mkdtemp(prefix="bench_worker_logs_")
    report: dict[str, Any] = {"machine": info, "args": vars(args), "targets": TARGETS, "steady": [], "logs": workdir}
    if args.store in ("postgres", "both") and not args.no_steady:
        dbs = PostgresStores(args.pg_url)
        try:
            name = dbs.create(suffix="_steady")
            report["steady"].append(steady("postgres", dbs.url(name), args, workdir))
        finally:
            dbs.close()
        _save(report, args)
    if args.store in ("sqlite", "both") and not args.no_steady:
        with contextlib.closing(SQLiteStores()) as stores, stores.fresh() as url:
            report["steady"].append(steady("sqlite", url, args, workdir))
        _save(report, args)
    if args.store in ("postgres", "both") and not args.no_scale_out:
        report["scale_out"] = scale_out(args, workdir)
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    report["verdicts"] = verdicts(report)
    return report


def _save(report: dict[str, Any], args: argparse.Namespace) -> None:
    """The report so far, to ``--save-json`` (a run cut short keeps its finished parts)."""
    if args.save_json:
        with open(args.save_json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)


def verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for s in report["steady"]:
        p99 = s["canon"]["p99"]
        out.append({"target": f"{s['store']}: canon lag, commit to row, p99"
                    + ("" if s["store"] == "postgres" else " (the goal is set for PostgreSQL)"),
                    "value": p99, "limit": TARGETS["canon_lag_p99_ms"], "unit": "ms",
                    "pass": p99 <= TARGETS["canon_lag_p99_ms"]})
    if "scale_out" in report:
        r = report["scale_out"]["summary"]["ratio_two_vs_one"]
        out.append({"target": "postgres: scale-out, two workers / one (events/s)", "value": r,
                    "limit": TARGETS["scale_out_ratio"], "unit": "x", "pass": r >= TARGETS["scale_out_ratio"]})
    return out


# -- reporting ------------------------------------------------------------------------------------
def _q(p: dict[str, Any], *keys: str) -> str:
    return " / ".join(f"{p[k]:.1f}" if p.get("n") else "-" for k in keys)


def _series(values: list[Any]) -> str:
    return " ".join("-" if v is None else str(v) for v in values)


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m = report["machine"]
    dirty = [x.strip() for x in m.get("git_dirty") or [] if x.strip()]
    out = header("bench_worker.py", argv, m)
    if dirty:
        out.append(f"- Working tree modified at git {m['git_commit']}: {', '.join(dirty)}")
    if report["steady"]:
        out += ["", "Steady state: one command per transaction, paced; one `canon worker` subprocess following; lag "
                "= first 2 ms poll of the tracking row at or past the command's position - the apply's return "
                "(commands carrying one of the model's events only); p50 / p95 / p99 / max ms:", "",
                "| Store | commands/s applied (offered) | apply p50 / p99 | canon lag p50 / p95 / p99 / max (n) "
                "| canon > 250 ms | vectors lag p50 / p95 / p99 / max (n) | vector backlog, texts: max / mean "
                "| poll gap p50 / p99 | worker CPU s / wall s | machine CPU busy |",
                "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for s in report["steady"]:
            c, v, b = s["canon"], s["vectors"], s["backlog"]
            texts = [x or 0 for x in b["vector_texts"]]
            out.append(f"| {s['store']} | {s['applied_per_s']:.1f} ({report['args']['rate']:g}) "
                       f"| {_q(s['apply_ms'], 'p50', 'p99')} | {_q(c, 'p50', 'p95', 'p99', 'max')} ({c['n']}) "
                       f"| {c['over_250ms']} | {_q(v, 'p50', 'p95', 'p99', 'max')} ({v['n']}) "
                       f"| {max(texts) if texts else '-'} / {statistics.fmean(texts) if texts else float('nan'):.2f} "
                       f"| {_q(s['poll']['gap_ms'], 'p50', 'p99')} "
                       f"| {s['worker'].get('cpu_seconds', float('nan')):.1f} / "
                       f"{s['worker']['wall_seconds']:.1f} | {s['cpu_busy_share']:.0%} |")
        out += ["", "Canon lag p50 by command type (ms): "
                + "; ".join(f"{s['store']}: " + ", ".join(f"{t} {ms}" for t, ms in s["canon"]["by_type_p50_ms"].items())
                            for s in report["steady"])]
        for s in report["steady"]:
            b = s["backlog"]
            out += ["", f"{s['store']}: embedding backlog (`status()['vectors'].texts`), one sample a second from the "
                    f"writer's start: {_series(b['vector_texts'])}",
                    f"{s['store']}: vectors pending entries: {_series(b['vector_pending'])}; status() call p50 "
                    f"{b['status_call_ms'].get('p50', float('nan')):.1f} ms"]
    so = report.get("scale_out")
    if so:
        sm = so["summary"]
        out += ["", f"Scale-out: {len(so['stories'])} stories, {so['events']:,} events, every read model from empty; "
                "runs alternated, a fresh copy of the loaded database each (`CREATE DATABASE ... TEMPLATE`); seconds "
                "from the launch to every worker gone and 0 pending (start-up included):", "",
                "| Run | Workers | seconds | events/s | worker CPU s | machine CPU busy "
                "| per worker: seconds per model "
                "(canon / authoring / knowledge / retrieval / vectors) |", "|--:|--:|--:|--:|--:|--:|---|"]
        for r in [*so["runs"], *so["packet_runs"], *so["backlog_runs"]]:
            per = []
            for w in r["worker"]:
                cu = w["caught_up"]
                per.append(" / ".join(f"{cu[mdl][-1]['seconds']:.1f}" if mdl in cu else "-" for mdl in MODELS))
            label = f"{r['run'] + 1}" + (" (packets)" if r["with_packets"] else "") + (
                " (status() sampled)" if r["with_status"] else "")
            out.append(f"| {label} | {r['workers']} | {r['seconds']:.1f} | {r['events_per_s']:,.0f} "
                       f"| {r['worker_cpu_seconds']:.1f} | {r['cpu_busy_share']:.0%} | {'; '.join(per)} |")
        out += ["", f"Medians of the timed runs: one worker {sm['one_events_per_s']:,.0f} events/s "
                f"({sm['one_seconds']:.1f} s), two {sm['two_events_per_s']:,.0f} events/s ({sm['two_seconds']:.1f} s): "
                f"**{sm['ratio_two_vs_one']:.2f}x**. A worker's start-up alone (`--once` on a caught-up copy): "
                f"{sm['startup_seconds'] if sm['startup_seconds'] is not None else float('nan'):.2f} s."]
        if so.get("per_model"):
            start = sm["startup_seconds"] or 0.0
            out += ["", "Diagnostic, one read model at a time (`canon worker --once --projection NAME`, one run each; "
                    f"seconds include the ~{start:.1f} s start-up; worker CPU summed over the workers):", "",
                    "| Model | one worker s (CPU s) | two workers s (CPU s) | two / one events/s |",
                    "|---|--:|--:|--:|"]
            by = {(r["projection"], r["mode"]): r for r in so["per_model"]}
            for mdl in MODELS:
                a, b = by.get((mdl, "one")), by.get((mdl, "two"))
                if a and b:
                    out.append(f"| {mdl} | {a['seconds']:.1f} ({a['worker_cpu_seconds']:.1f}) | {b['seconds']:.1f} "
                               f"({b['worker_cpu_seconds']:.1f}) | {a['seconds'] / b['seconds']:.2f}x |")
        for r in so["packet_runs"]:
            pd, pi = r["packets_during"], r["packets_idle"]
            out += ["", f"Packets, run {r['run'] + 1} (writer, story-1, chapter {report['args']['packet_chapter']}, "
                    f"record=false, no `after`; timed from {r['canon_current_after_s']:.1f} s after the launch, when "
                    "canon had reached the log's end; p50 / p95 / max ms (n)):", "",
                    "| When | p50 / p95 / max (n) | p50 vs idle |", "|---|--:|--:|",
                    f"| idle, after the catch-up | {_q(pi['all'], 'p50', 'p95', 'max')} ({pi['all']['n']}) | 1.00x |",
                    f"| during the catch-up, all | {_q(pd['all'], 'p50', 'p95', 'max')} ({pd['all']['n']}) "
                    f"| {pd['all']['p50'] / pi['all']['p50']:.2f}x |",
                    f"| during, a stage said an index is behind | {_q(pd['with_lag_note'], 'p50', 'p95', 'max')} "
                    f"({pd['with_lag_note']['n']}) | "
                    + (f"{pd['with_lag_note']['p50'] / pi['all']['p50']:.2f}x |" if pd["with_lag_note"]["n"]
                       else "- |"),
                    f"| during, no stage said so | {_q(pd['without_lag_note'], 'p50', 'p95', 'max')} "
                    f"({pd['without_lag_note']['n']}) | "
                    + (f"{pd['without_lag_note']['p50'] / pi['all']['p50']:.2f}x |" if pd["without_lag_note"]["n"]
                       else "- |")]
        for r in so["backlog_runs"]:
            if r.get("backlog"):
                out += ["", f"Run {r['run'] + 1} (one worker, no packets), status() every "
                        f"{report['args']['status_every']:g} s (t: seconds after the launch; vector texts waiting; "
                        "pending entries of canon / knowledge / vectors, "
                        "'+' when capped at 2,000; the status() call's ms):", "",
                        "| t | vector texts | pending c / k / v | status() ms |", "|--:|--:|--:|--:|"]
                for b in r["backlog"]:
                    cap = set(b["capped"])
                    pend = " / ".join(f"{b['pending'][mdl]}{'+' if mdl in cap else ''}"
                                      for mdl in ("canon", "knowledge", "vectors"))
                    out.append(f"| {b['t']:.0f} | {b['vector_texts']} | {pend} | {b['call_ms']:.0f} |")
    out += ["", "| Goal | Measured | Limit | Verdict |", "|---|--:|--:|---|"]
    for v in report["verdicts"]:
        out.append(f"| {v['target']} | {v['value']:.2f} {v['unit']} | {v['limit']:g} {v['unit']} "
                   f"| {'met' if v['pass'] else '**missed**'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--poll"], ["--status"]):
        (poll_main if argv[0] == "--poll" else status_main)(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="15 s steady state, ~3,000-event stories (smoke run)")
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both",
                        help="steady state on these stores (scale-out and packets: PostgreSQL only)")
    parser.add_argument("--seconds", type=float, help="steady-state writer seconds (default 60; 15 with --quick)")
    parser.add_argument("--rate", type=float, default=50.0, help="steady-state commands/s")
    parser.add_argument("--preload", type=int, help="commands loaded before the steady state (default 2000; 500 quick)")
    parser.add_argument("--draft-words", type=int, default=300, help="words per accepted draft in the steady state")
    parser.add_argument("--poll-ms", type=float, default=2.0, help="tracking-row poll interval")
    parser.add_argument("--stories", type=int, default=4, help="disjoint stories in the scale-out store")
    parser.add_argument("--chapters", type=int, help="chapters per story (default 250: ~25k events; 30 with --quick)")
    parser.add_argument("--seed", type=int, default=gen_story.DEFAULT_SEED)
    parser.add_argument("--repeats", type=int, default=2, help="one-worker / two-worker pairs (alternated)")
    parser.add_argument("--packet-ms", type=float, default=100.0, help="packet interval during the catch-up")
    parser.add_argument("--packet-chapter", type=int, help="writer packet chapter (default 100; 20 with --quick)")
    parser.add_argument("--idle-packets", type=int, default=40, help="packets timed once caught up")
    parser.add_argument("--status-every", type=float, default=2.0,
                        help="status() interval in one extra one-worker catch-up that samples the backlog "
                             "(0: no such run)")
    parser.add_argument("--packet-runs", type=int, default=1,
                        help="one-worker catch-ups with the packet thread, after the timed runs")
    parser.add_argument("--no-scale-out", action="store_true", help="steady state only")
    parser.add_argument("--modes", default="one,two,two-split",
                        help="timed scale-out runs, alternated: one (a worker), two (two workers, whole models), "
                             "two-split (two `canon worker --split`)")
    parser.add_argument("--packet-modes", default="one,two-split",
                        help="catch-ups during which packets are timed (same names as --modes)")
    parser.add_argument("--no-steady", action="store_true", help="scale-out and packets only")
    parser.add_argument("--per-model", action="store_true",
                        help="diagnostic: each read model alone (--projection), one worker and two, one run each")
    add_pg_option(parser)
    parser.add_argument("--markdown", action="store_true", help="also print the markdown table rows (before the JSON)")
    parser.add_argument("--save-json", metavar="PATH", help="also write the JSON report to PATH")
    args = parser.parse_args(argv)
    q = args.quick
    args.seconds = args.seconds or (15.0 if q else 60.0)
    args.preload = args.preload if args.preload is not None else (500 if q else 2000)
    args.chapters = args.chapters or (30 if q else 250)
    args.packet_chapter = args.packet_chapter or (20 if q else 100)
    if args.repeats < 1 or args.rate <= 0 or args.seconds <= 0 or args.stories < 1:
        parser.error("repeats >= 1; rate, seconds and stories > 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: scratch databases dropped, children ended
    try:
        report = benchmark(args)
    finally:
        _end_children()
    _save(report, args)
    if args.markdown:
        print(markdown(report, argv))
        print()
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
