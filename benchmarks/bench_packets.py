#!/usr/bin/env python
"""Writer-packet latency on a synthetic 1,000-chapter serial, against "the limit" (issue 3).

    python benchmarks/bench_packets.py [--store sqlite|postgres|both] [--quick] [--samples N]
                                       [--format markdown|json] [--save-json PATH]

Not part of the pytest run. The story comes from ``benchmarks/gen_story.py`` (seeded: 1,000
chapters in 10 volumes, 10,000 confirmed canon entries, ~41,000 commands, ~100,000 events).
For each store (a temp SQLite file; a scratch PostgreSQL database ``canon_bench_<hex>``,
created and dropped here) the script:

1. **loads** the story through the command path, ``ledger.apply(batch, atomic=True)`` per 100
   commands (parsing is done before, and timed apart), in this process;
2. starts a **worker subprocess** (a fresh interpreter, so generating and loading the story do
   not count in its memory) that calls ``bootstrap(url)``, catches the canon projection up
   over the whole log (timed: events/s), then, for writer packets at chapters 10, 100 and
   1,000, interleaves N samples (``--samples``, default 200, after ``--warmup`` calls) of:
   * the **packet**: ``packets.packet(Request(story, "writer", chapter), record=False)``;
   * **the limit**: for that same packet, a raw fetch (plain ``sqlite3`` / ``psycopg``, one
     read transaction, prepared statements, primary-key lookups resolved beforehand) of
     exactly the read-model rows its included and trimmed items came from, plus one tiktoken
     encoding (``token_counter().count``) of the packet's final text: the included item texts
     joined by blank lines. The script checks once that the fetched rows hold the items' texts;
   * the packet's own SELECTs (captured at the cursor) replayed with the raw driver: the cost of
     the current query shapes with no Python above the driver (a diagnostic, not a target).
   On PostgreSQL the worker first samples the last chapter after the catch-up (which ends with
   the product's own ``ANALYZE`` of the read-model tables when it covered >= 5,000 events), then
   runs a database-wide ``VACUUM ANALYZE`` once (as autovacuum would: the vacuum sets the
   visibility map that index-only scans need; the local server runs with
   autovacuum off);
3. then ``record=True`` (``--secondary-samples``, default N/2, also used in step 4): the same
   request again (the first call records ``PacketIssued``; the rest hit the "already issued"
   path) and a **new** packet every time (budget lowered by one token per sample so each packet
   is distinct and gets recorded);
4. **command-to-packet**: apply one ``record_chapter_summary`` on chapter 999 (a new
   ``command_id`` and a unique marker each time), then at once
   ``packet(Request(story, "writer", 1000), after=result.position)``; the packet must include
   the new summary text (checked every sample). With record=True (the service default) and
   record=False;
5. an instrumented run (wrapped reader methods: ms, rows returned) and a cProfile run of the
   chapter-1,000 packet, for where the time goes (not part of the latency numbers);
6. **peak RSS** of the worker: ``VmHWM`` from /proc/self/status, read after step 4 (interpreter,
   imports, bootstrap, the full catch-up and every latency loop; not the profiler) and again at
   the end. ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is reported too but not used: on Linux
   it keeps the parent's high-water mark across fork + exec (the loader holding the story).

``--quick``: a 200-chapter story at the same density (2,000 entries), chapters 10, 100, 200,
30 samples: a smoke run, not comparable with the full run.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sqlite3
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (add_output_options, bench_stores, chapters_measured, conninfo, emit, header, load_story,  # noqa: E402
                    log, percentiles, rss_mb, ru_maxrss_mb, run_worker, story_commands, story_options,
                    story_sized)

TARGETS = {
    "p50_ms_last": 10.0,  # p50 at chapter 1,000
    "packet_vs_limit": 2.0,  # p50 packet / p50 limit at chapter 1,000
    "growth": 1.5,  # p50(ch 1,000) / p50(ch 10)
    "c2p_p50_ms": 15.0,
    "rss_mb": 400.0,
}


# -- the limit -----------------------------------------------------------------------------------
@dataclass
class LimitPlan:
    statements: list[tuple[str, tuple[Any, ...]]]
    text: str  # the packet's final text: included item texts joined by blank lines
    rows: int
    expected: dict[tuple[Any, ...], str]  # row identity -> the item text it must hold (checked once)


CANON_ITEM_KINDS = {"character", "location", "world_rule", "item", "faction", "thread", "timeline_event",
                    "development_chain", "history"}


class RawReader:
    """Plain sqlite3 / psycopg access to the canon read model (no SQLAlchemy)."""

    def __init__(self, kind: str, url: str) -> None:
        from canon_ledger.infrastructure.stores import store_config

        self.kind = kind
        if kind == "sqlite":
            self.conn: Any = sqlite3.connect(store_config(url).env["SQLITE_DBNAME"], isolation_level=None,
                                             check_same_thread=False)
        else:
            import psycopg

            self.conn = psycopg.connect(conninfo(url))
            self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ

    def sql(self, text: str) -> str:
        return text if self.kind == "sqlite" else text.replace("?", "%s")

    def query(self, text: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            return self.conn.execute(text, params).fetchall()
        with self.conn.cursor() as cur:
            cur.execute(text, params)
            rows = cur.fetchall()
        self.conn.commit()
        return rows

    def fetch(self, plan: LimitPlan) -> list[list[tuple[Any, ...]]]:
        """One read transaction, every statement of the plan."""
        if self.kind == "sqlite":
            c = self.conn
            c.execute("BEGIN")
            out = [c.execute(s, p).fetchall() for s, p in plan.statements]
            c.execute("COMMIT")
            return out
        out = []
        with self.conn.transaction(), self.conn.cursor() as cur:
            for s, p in plan.statements:
                cur.execute(s, p)
                out.append(cur.fetchall())
        return out

    def replay(self, statements: list[tuple[str, Any]]) -> int:
        """The packet's own SELECTs (as SQLAlchemy sent them to the driver), in one read transaction."""
        n = 0
        if self.kind == "sqlite":
            c = self.conn
            c.execute("BEGIN")
            for s, p in statements:
                n += len(c.execute(s, p).fetchall())
            c.execute("COMMIT")
            return n
        with self.conn.transaction(), self.conn.cursor() as cur:
            for s, p in statements:
                cur.execute(s, p)
                n += len(cur.fetchall())
        return n

    def close(self) -> None:
        self.conn.close()


def _pk_lookup(raw: RawReader, table: str, alias: str, cols: tuple[str, str, str], types: tuple[str, str, str],
               pks: list[tuple[Any, ...]], story: str) -> tuple[str, tuple[Any, ...]]:
    """One statement that reads exactly ``pks`` (story_id + three key columns) by primary-key lookups.

    SQLite: a VALUES CTE joined to the table (plan: one PK SEARCH per row). PostgreSQL: unnest()
    arrays with a LATERAL subquery (plan: one PK index scan per row); the plain VALUES join there
    hashes the whole story's rows instead."""
    a, b, c = cols
    select = f"SELECT {alias}.{a}, {alias}.{b}, {alias}.{c}, {alias}.text"
    if raw.kind == "sqlite":
        values = ", ".join(["(?, ?, ?)"] * len(pks))
        return (f"WITH w({a}, {b}, {c}) AS (VALUES {values}) {select} FROM w JOIN {table} AS {alias} "
                f"ON {alias}.story_id = ? AND {alias}.{a} = w.{a} AND {alias}.{b} = w.{b} AND {alias}.{c} = w.{c}",
                (*[v for pk in pks for v in pk], story))
    ta, tb, tc = types
    return (f"{select} FROM unnest(%s::{ta}[], %s::{tb}[], %s::{tc}[]) AS w({a}, {b}, {c}) CROSS JOIN LATERAL "
            f"(SELECT {a}, {b}, {c}, text FROM {table} AS t WHERE t.story_id = %s AND t.{a} = w.{a} "
            f"AND t.{b} = w.{b} AND t.{c} = w.{c} OFFSET 0) AS {alias}",
            ([pk[0] for pk in pks], [pk[1] for pk in pks], [pk[2] for pk in pks], story))


def serving_build(services: Any) -> tuple[Any, Any]:
    """(runner, tables) of the canon build that serves packets."""
    canon = services.canon
    if hasattr(canon, "active"):  # ReadModels: blue/green builds with tagged tables
        build = canon.active()
        return canon.runner(build), canon.tables(build)
    return canon, canon.projection.tables  # a single ProjectionRunner


def table_names(tables: Any) -> dict[str, str]:
    """The canon read model's table names (they carry a version / build tag)."""
    return {b: getattr(tables, b).name for b in ("stories", "chapters", "scene_cards", "volumes", "canon", "chain_nodes")}


def limit_plan(raw: RawReader, T: dict[str, str], packet: Any, story: str) -> LimitPlan:
    """Primary keys of exactly the rows the packet's kept items came from (resolved here, untimed)."""
    kept = [i for i in packet.items if i.status != "dropped"]
    story_cols: set[str] = set()
    chapters: dict[int, set[str]] = {}
    scenes: list[str] = []
    volumes: list[int] = []
    canon_sources: dict[int, Any] = {}
    node_items: dict[tuple[int, str], Any] = {}
    for i in kept:
        if i.kind in ("style_guardrails", "output_contract"):
            story_cols.add("guardrails_text" if i.kind == "style_guardrails" else "contract_text")
        elif i.kind == "scene_card":
            scenes.append(i.key)
        elif i.kind == "chapter_goals":
            chapters.setdefault(int(i.key), set()).add("goals_text")
        elif i.kind == "chapter_summary":
            chapters.setdefault(int(i.key), set()).add("summary_text")
        elif i.kind == "chapter_ending":  # the end of chapter K-1's accepted text (compiler 7 on)
            chapters.setdefault(int(i.key), set()).add("text")
        elif i.kind == "volume_summary":
            volumes.append(int(i.key))
        elif i.kind == "development_chain" and i.tier == "P4":
            chain, node_id = i.key.split("/", 1)
            node_items[(i.sources[0], node_id)] = (chain, i)
        elif i.kind in CANON_ITEM_KINDS:
            canon_sources[i.sources[0]] = i
        else:
            raise ValueError(f"no read-model row known for a {i.kind} item")
    statements: list[tuple[str, tuple[Any, ...]]] = []
    expected: dict[tuple[Any, ...], str] = {}
    rows = 0
    if story_cols:
        statements.append((raw.sql(f"SELECT guardrails_text, contract_text FROM {T['stories']} WHERE story_id = ?"), (story,)))
        rows += 1
    if chapters:
        nums = sorted(chapters)
        statements.append((raw.sql(f"SELECT chapter, goals_text, summary_text, text FROM {T['chapters']} WHERE story_id = ? "
                                   f"AND chapter IN ({', '.join('?' * len(nums))})"), (story, *nums)))
        rows += len(nums)
    if scenes:
        statements.append((raw.sql(f"SELECT scene_id, text FROM {T['scene_cards']} WHERE story_id = ? AND chapter = ? "
                                   f"AND scene_id IN ({', '.join('?' * len(scenes))})"), (story, packet.chapter, *scenes)))
        rows += len(scenes)
        for i in kept:
            if i.kind == "scene_card":
                expected[("scene", i.key)] = i.text
    if volumes:
        statements.append((raw.sql(f"SELECT volume, summary_text FROM {T['volumes']} WHERE story_id = ? "
                                   f"AND volume IN ({', '.join('?' * len(volumes))})"), (story, *volumes)))
        rows += len(volumes)
        for i in kept:
            if i.kind == "volume_summary":
                expected[("volume", int(i.key))] = i.text
    if canon_sources:
        srcs = sorted(canon_sources)
        found = raw.query(raw.sql(f"SELECT source, kind, key, step FROM {T['canon']} WHERE story_id = ? "
                                  f"AND source IN ({', '.join('?' * len(srcs))})"), (story, *srcs))
        pks = sorted((k, key, step) for _, k, key, step in found)
        assert len(pks) == len(srcs), (len(pks), len(srcs))
        for source, k, key, step in found:
            expected[("canon", k, key, step)] = canon_sources[source].text
        statements.append(_pk_lookup(raw, T["canon"], "c", ("kind", "key", "step"), ("text", "text", "int"), pks, story))
        rows += len(pks)
    if node_items:
        srcs = sorted({s for s, _ in node_items})
        found = raw.query(raw.sql(f"SELECT source, node_id, chain, step, ordinal FROM {T['chain_nodes']} "
                                  f"WHERE story_id = ? AND source IN ({', '.join('?' * len(srcs))})"), (story, *srcs))
        pks = []
        for source, node_id, chain, step, ordinal in found:
            hit = node_items.get((source, node_id))
            if hit and hit[0] == chain:
                pks.append((chain, step, ordinal))
                expected[("node", chain, step, ordinal)] = hit[1].text
        assert len(pks) == len(node_items), (len(pks), len(node_items))
        pks.sort()
        statements.append(_pk_lookup(raw, T["chain_nodes"], "n", ("chain", "step", "ordinal"), ("text", "int", "int"), pks,
                                     story))
        rows += len(pks)
    for i in kept:
        if i.kind == "chapter_goals":
            expected[("goals", int(i.key))] = i.text
        elif i.kind == "chapter_summary":
            expected[("summary", int(i.key))] = i.text
        elif i.kind == "chapter_ending":  # its last words end the chapter's text
            expected[("ending", int(i.key))] = i.text
        elif i.kind == "style_guardrails":
            expected[("guardrails",)] = i.text
        elif i.kind == "output_contract":
            expected[("contract",)] = i.text
    text = "\n\n".join(i.text for i in kept)
    return LimitPlan(statements, text, rows, expected)


def check_limit(raw: RawReader, T: dict[str, str], plan: LimitPlan) -> None:
    """The fetched rows hold every kept item's text (a trimmed item: its untrimmed start)."""
    got: dict[tuple[Any, ...], str] = {}
    for (sql, _), rows in zip(plan.statements, raw.fetch(plan)):
        table = next(b for b, name in T.items() if f" {name} " in f" {sql} ")
        for r in rows:
            if table == "stories":
                got[("guardrails",)], got[("contract",)] = r[0], r[1]
            elif table == "chapters":
                got[("goals", r[0])], got[("summary", r[0])], got[("ending", r[0])] = r[1], r[2], r[3]
            elif table == "scene_cards":
                got[("scene", r[0])] = r[1]
            elif table == "volumes":
                got[("volume", r[0])] = r[1]
            elif table == "canon":
                got[("canon", r[0], r[1], r[2])] = r[3]
            elif table == "chain_nodes":
                got[("node", r[0], r[1], r[2])] = r[3]
    fetched_rows = sum(len(rows) for rows in raw.fetch(plan))
    assert fetched_rows == plan.rows, (fetched_rows, plan.rows)
    for key, text in plan.expected.items():
        row_text = got.get(key)
        assert row_text is not None, f"limit fetched no row for {key}"
        ok = row_text == text or (text.endswith(" …") and row_text.startswith(text[:-2].rstrip()[:20])) or (
            key[0] == "ending" and row_text.rstrip().endswith(text.rstrip()[-20:]))
        assert ok, f"row {key} does not hold the item's text"


# -- the worker (a fresh process per store) ----------------------------------------------------------
class Instrument:
    """Wraps the reader's snapshot methods and the compiler's steps: ms and rows per call."""

    def __init__(self, services: Any) -> None:
        from canon_ledger.application.packets import compiler, packet as packet_mod
        from canon_ledger.projections import canon_view

        self.totals: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._undo: list[tuple[Any, str, Any]] = []
        cls = canon_view.SqlCanonSnapshot
        for name in ("prefetch", "story", "chapter", "scenes", "entries_by_key", "active_entries", "entries_since",
                     "entries_page", "superseded_steps", "chapter_summaries", "volume_summaries", "chain_nodes",
                     "texts"):
            self._wrap(cls, name, name)
        for step in ("add", "finish"):  # compiler 3 fills in steps; finish fetches the packed texts
            self._wrap(compiler.Packing, step, "fill (budget)")
        self._wrap(packet_mod.Packet, "sealed", "seal (JSON + sha256)")
        self._wrap(services.canon, "ensure_reflects", "read-your-writes check")

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        own = name in vars(owner)
        inner = vars(owner)[name] if own and isinstance(owner, type) else getattr(owner, name)
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            result = inner(*args, **kwargs)
            key = label
            if name in ("active_entries", "entries_since", "entries_page"):
                key = f"{name}({args[3]})"  # (snapshot, story, chapter, kind, ...)
            self.totals[key] += clock() - t0
            self.calls[key] += 1
            if isinstance(result, list):
                self.rows[key] += len(result)
            elif isinstance(result, dict):  # texts: ref -> text; superseded_steps: key -> [steps]
                self.rows[key] += sum(len(v) if isinstance(v, list) else 1 for v in result.values())
            return result

        self._undo.append((owner, name, inner if own else None))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, inner in reversed(self._undo):
            if inner is None:
                delattr(owner, name)  # it was inherited (or a class attribute): uncover it again
            else:
                setattr(owner, name, inner)
        self._undo.clear()


def _area(file: str, name: str) -> str:
    if file == "~":
        low = name.lower()
        if "sqlite3" in low or "psycopg" in low or "pq" in low:
            return "DB driver (C: execute, fetch, socket wait)"
        if "_json" in low or "sha256" in low or "hexdigest" in low or "hashlib" in low:
            return "seal: canonical JSON + sha256"
        if "corebpe" in low or "tiktoken" in low:
            return "tiktoken"
        return "builtins (dataclass init, dict/list ops, ...)"
    f = file.replace("\\", "/")
    if "/sqlalchemy/" in f:
        return "SQLAlchemy (compile, execute, result rows)"
    if "/psycopg/" in f or "psycopg_binary" in f or "psycopg_pool" in f:
        return "DB driver (psycopg Python)"
    if "/eventsourcing/" in f:
        return "eventsourcing (ledger.position)"
    if "/canon_ledger/application/packets/" in f:
        return "compiler + recipes (Python)"
    if "/canon_ledger/projections/" in f:
        return "reader: canon_view (Python)"
    if "/tiktoken/" in f:
        return "tiktoken"
    if f.endswith("json/encoder.py") or f.endswith("json/__init__.py") or "hashlib" in f:
        return "seal: canonical JSON + sha256"
    return "stdlib / other Python"


def profile_packets(services: Any, request: Any, n: int) -> dict[str, Any]:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        services.packets.packet(request, record=False)
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())  # tottime
    areas: Counter[str] = Counter()
    funcs = []
    for (file, line, name), (_cc, ncalls, tottime, cumtime, _callers) in st.stats.items():
        areas[_area(file, name)] += tottime
        short = name if file == "~" else f"{'/'.join(file.split('/')[-2:])}:{line}({name})"
        funcs.append({"function": short, "calls_per_packet": ncalls / n, "tottime_ms": tottime / n * 1e3,
                      "cumtime_ms": cumtime / n * 1e3})
    ours = [f for f in funcs if any(p in f["function"] for p in ("packets/", "projections/", "application/"))]
    return {
        "packets": n,
        "profiled_ms_per_packet": total / n * 1e3,
        "areas": [{"area": a, "ms_per_packet": t / n * 1e3, "share": t / total} for a, t in areas.most_common()],
        "top_tottime": sorted(funcs, key=lambda f: -f["tottime_ms"])[:15],
        "top_cumtime_ours": sorted(ours, key=lambda f: -f["cumtime_ms"])[:15],
    }


def capture_statements(services: Any, request: Any) -> tuple[dict[str, int], list[tuple[str, Any]]]:
    """SQL one packet call sends to the driver (but the ledger's own position query), and its
    SELECTs with their driver-level parameters, for the raw replay. SQLite: as SQLAlchemy sends
    it. PostgreSQL: at psycopg's cursor, since the reader runs most of its SQL there itself
    (``projections/driver_sql.py``); transaction commands (BEGIN, COMMIT) are not counted."""
    statements: list[tuple[str, Any]] = []
    if services.packets.reader.engine.dialect.name == "postgresql":
        import psycopg

        real = psycopg.Cursor.execute

        def execute(cursor, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
            sql = query if isinstance(query, str) else query.as_string(cursor)
            if "canonledger_" not in sql:  # the ledger's position query
                statements.append((sql, params))
            return real(cursor, query, params, **kwargs)

        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        try:
            services.packets.packet(request, record=False)
        finally:
            psycopg.Cursor.execute = real  # type: ignore[method-assign]
    else:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        def on_execute(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            statements.append((statement, parameters))

        event.listen(Engine, "before_cursor_execute", on_execute)
        try:
            services.packets.packet(request, record=False)
        finally:
            event.remove(Engine, "before_cursor_execute", on_execute)
    selects = [(s, p) for s, p in statements if s.lstrip().upper().startswith("SELECT")]
    return ({"statements": len(statements), "selects": len(selects), "ledger_position_queries": 1,
             "other": len(statements) - len(selects)}, selects)


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.tokenizer import token_counter

    kind, story, chapters = cfg["kind"], cfg["story_id"], cfg["chapters"]
    samples, warmup, secondary = cfg["samples"], cfg["warmup"], cfg["secondary_samples"]
    out: dict[str, Any] = {"store": kind}
    rss = {"after_imports_mb": rss_mb(), "ru_maxrss_at_start_mb": ru_maxrss_mb()}
    services = bootstrap(cfg["url"])
    rss["after_bootstrap_mb"] = rss_mb()
    try:
        # -- catch-up over the whole log ------------------------------------------------------
        runner, tables = serving_build(services)
        projection = runner.projection
        inner_ops, projected = projection.ops, [0]

        def counting_ops(events: list[Any], *rest: Any) -> Any:
            projected[0] += len(events)
            return inner_ops(events, *rest)

        projection.ops = counting_ops  # type: ignore[method-assign]
        goal = services.ledger.event_log.position()
        t0 = time.perf_counter()
        last = [t0]

        def progress(reached: int, target: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= 10 or reached >= target:
                last[0] = now
                log(f"{kind}: canon projection at {reached:,}/{target:,} ({reached / (now - t0):,.0f} events/s)")

        runner.catch_up(goal, progress=progress)
        seconds = time.perf_counter() - t0
        del projection.ops
        out["catch_up"] = {"log_events": goal, "projected_events": projected[0], "seconds": seconds,
                           "log_events_per_s": goal / seconds, "projected_events_per_s": projected[0] / seconds}
        rss["after_catch_up_mb"] = rss_mb()

        tokens = token_counter()
        raw = RawReader(kind, cfg["url"])
        names = table_names(tables)
        out["read_model_tables"] = names
        packets = services.packets
        # Issue 3's targets are for L0 (structured recall): L1 retrieval is measured on its own below.
        l1, packets.retriever = packets.retriever, None
        if kind == "postgres":
            # This server may run with autovacuum off: sample once after the catch-up (and the
            # product's own ANALYZE of the read-model tables), then VACUUM ANALYZE the whole
            # database, as autovacuum would: index-only scans need the visibility map.
            req = Request(story, "writer", chapters[-1])
            for _ in range(warmup):
                packets.packet(req, record=False)
            before = []
            for _ in range(max(10, samples // 4)):
                t = time.perf_counter()
                packets.packet(req, record=False)
                before.append(time.perf_counter() - t)
            autovacuum = raw.query("SELECT setting FROM pg_settings WHERE name = 'autovacuum'", ())[0][0]
            raw.conn.autocommit = True
            t = time.perf_counter()
            raw.conn.execute("VACUUM ANALYZE")
            raw.conn.autocommit = False
            out["analyze"] = {"autovacuum": autovacuum, "seconds": time.perf_counter() - t,
                              "packet_before_analyze": {"chapter": chapters[-1], **percentiles(before)}}
            log(f"{kind}: autovacuum={autovacuum}; chapter {chapters[-1]} packet p50 before VACUUM ANALYZE "
                f"{out['analyze']['packet_before_analyze']['p50']:.2f} ms; VACUUM ANALYZE took {out['analyze']['seconds']:.1f} s")
        # -- latency: packet (record=False) interleaved with the limit ------------------------------
        rows_out = []
        for ch in chapters:
            req = Request(story, "writer", ch)
            for _ in range(warmup):
                packets.packet(req, record=False)
            packet = packets.packet(req, record=False)
            plan = limit_plan(raw, names, packet, story)
            check_limit(raw, names, plan)
            sql_counts, selects = capture_statements(services, req)
            replay_rows = raw.replay(selects)
            for _ in range(warmup):
                raw.fetch(plan)
                tokens.count(plan.text)
                raw.replay(selects)
            pk, lim, fetch, enc, rep = [], [], [], [], []
            clock = time.perf_counter
            for _ in range(samples):
                t = clock()
                p = packets.packet(req, record=False)
                pk.append(clock() - t)
                t = clock()
                raw.fetch(plan)
                t1 = clock()
                tokens.count(plan.text)
                t2 = clock()
                lim.append(t2 - t)
                fetch.append(t1 - t)
                enc.append(t2 - t1)
                t = clock()
                raw.replay(selects)
                rep.append(clock() - t)
                assert p.hash == packet.hash
            statuses = Counter(i.status for i in packet.items)
            row = {
                "chapter": ch,
                "packet": percentiles(pk),
                "limit": percentiles(lim),
                "limit_fetch": percentiles(fetch),
                "limit_encode": percentiles(enc),
                "replay": percentiles(rep),
                "replay_rows": replay_rows,
                "items": {"candidates": len(packet.items), **{s: statuses[s] for s in ("included", "trimmed", "dropped")}},
                "items_by_tier": {t: dict(Counter(i.status for i in packet.items if i.tier == t))
                                  for t in ("P0", "P1", "P2", "P3", "P4")},
                "used_tokens": packet.used_tokens,
                "budget": packet.budget,
                "final_text_tokens": tokens.count(plan.text),
                "limit_rows": plan.rows,
                "limit_statements": len(plan.statements),
                "sql": sql_counts,
            }
            row["ratio_packet_vs_limit"] = row["packet"]["p50"] / row["limit"]["p50"]
            rows_out.append(row)
            log(f"{kind}: chapter {ch:>5}: packet p50 {row['packet']['p50']:.2f} ms p95 {row['packet']['p95']:.2f} ms; "
                f"limit p50 {row['limit']['p50']:.2f} ms ({row['ratio_packet_vs_limit']:.1f}x; fetch "
                f"{row['limit_fetch']['p50']:.2f}, encode {row['limit_encode']['p50']:.2f}); "
                f"replay of its SQL {row['replay']['p50']:.2f} ms; "
                f"{row['items']['included']}+{row['items']['trimmed']} kept of {row['items']['candidates']} candidates")
        # -- the same packets round-robin: each chapter's request between the others' -----------
        # The loop above repeats one request, so its caches (CPU, allocator, statement and page
        # caches) stay warm for it; a service sees mixed requests. Here every chapter's p50 comes
        # from the same loop, under the same machine load, so their ratio is the growth of one
        # workload, not of three runs at different moments.
        mixed: dict[int, list[float]] = {ch: [] for ch in chapters}
        requests = [Request(story, "writer", ch) for ch in chapters]
        for i in range(warmup + samples):
            for req in requests:
                t = time.perf_counter()
                packets.packet(req, record=False)
                if i >= warmup:
                    mixed[req.chapter].append(time.perf_counter() - t)
        for row in rows_out:
            row["packet_round_robin"] = percentiles(mixed[row["chapter"]])
        log(f"{kind}: round-robin over chapters " + ", ".join(
            f"{row['chapter']}: p50 {row['packet_round_robin']['p50']:.2f} ms" for row in rows_out))
        # -- record=True ------------------------------------------------------------------------
        for row in rows_out:
            ch = row["chapter"]
            req = Request(story, "writer", ch)
            again = []
            for i in range(warmup + secondary):
                t = time.perf_counter()
                packets.packet(req, record=True)
                if i >= warmup:
                    again.append(time.perf_counter() - t)
            new, base = [], packets.packet(req, record=False).budget
            for i in range(warmup + secondary):
                t = time.perf_counter()
                packets.packet(Request(story, "writer", ch, budget=base - 1 - i), record=True)
                if i >= warmup:
                    new.append(time.perf_counter() - t)
            row["record_reissue"] = percentiles(again)
            row["record_new"] = percentiles(new)
            log(f"{kind}: chapter {ch:>5}: record=True new packet p50 {row['record_new']['p50']:.2f} ms, "
                f"re-issue p50 {row['record_reissue']['p50']:.2f} ms")
        out["chapters"] = rows_out
        # -- command-to-packet --------------------------------------------------------------------
        last_ch = chapters[-1]
        c2p = {}
        body = gen_story.prose(60)
        run = uuid.uuid4().hex[:8]
        for record in (True, False):
            times, applies, failures = [], [], 0
            for i in range(warmup + secondary):
                marker = f"C2P-{run}-{int(record)}-{i:05d}"
                cmd = {"type": "record_chapter_summary", "command_id": f"c2p-{run}-{int(record)}-{i}",
                       "story_id": story, "chapter": last_ch - 1, "text": f"{marker} {body}"}
                t = time.perf_counter()
                [result] = services.ledger.apply([parse_command(cmd)])
                applied = time.perf_counter()
                packet = packets.packet(Request(story, "writer", last_ch), after=result.position, record=record)
                dt = time.perf_counter() - t
                ok = result.status == "applied" and any(
                    it.kind == "chapter_summary" and it.key == str(last_ch - 1) and it.status != "dropped"
                    and marker in it.text and it.sources[0] <= result.position for it in packet.items)
                failures += not ok
                if i >= warmup:
                    times.append(dt)
                    applies.append(applied - t)
            # The apply alone (one command, one commit) and what follows it: read-your-writes
            # catch-up plus the packet (plus recording it when record=True).
            c2p["record_true" if record else "record_false"] = {
                **percentiles(times), "failures": failures, "apply": percentiles(applies),
                "after_apply": percentiles([a - b for a, b in zip(times, applies)])}
            log(f"{kind}: command-to-packet (record={record}) p50 {c2p['record_true' if record else 'record_false']['p50']:.2f} ms, "
                f"{failures} failures")
        # The same, step by step: what each part of command-to-packet costs (for the next round).
        from canon_ledger.application.packets.service import issued

        parts: dict[str, list[float]] = {"apply": [], "catch_up": [], "compile": [], "record": []}
        for i in range(warmup + secondary):
            cmd = {"type": "record_chapter_summary", "command_id": f"c2p-{run}-split-{i}", "story_id": story,
                   "chapter": last_ch - 1, "text": f"C2P-{run}-split-{i:05d} {body}"}
            t0 = time.perf_counter()
            [result] = services.ledger.apply([parse_command(cmd)])
            t1 = time.perf_counter()
            services.canon.ensure_reflects(result.position)
            t2 = time.perf_counter()
            packet = packets.packet(Request(story, "writer", last_ch), after=result.position, record=False)
            t3 = time.perf_counter()
            services.ledger.packet_records.record(issued(packet))
            t4 = time.perf_counter()
            if i >= warmup:
                for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    parts[name].append(dt)
        c2p["split"] = {name: percentiles(v) for name, v in parts.items()}
        log(f"{kind}: command-to-packet step by step, p50: " + ", ".join(
            f"{name} {c2p['split'][name]['p50']:.2f} ms" for name in parts))
        out["command_to_packet"] = c2p
        rss["peak_after_latency_loops_mb"] = rss_mb()
        # -- with L1 retrieval (the product default) ------------------------------------------------
        packets.retriever = l1
        t0 = time.perf_counter()
        services.catch_up_retrieval()
        out["l1_index"] = {"seconds": time.perf_counter() - t0, "embedder": services.embedder.name}
        log(f"{kind}: knowledge, keyword and vector indexes of the story built in {out['l1_index']['seconds']:.1f} s "
            f"({services.embedder.name})")
        for row in rows_out:
            req = Request(story, "writer", row["chapter"])
            for _ in range(warmup):
                packets.packet(req, record=False)
            with_l1, cold = [], []
            for _ in range(max(20, samples // 4)):
                t = time.perf_counter()
                p = packets.packet(req, record=False)  # the query's vector is remembered: no embedding
                with_l1.append(time.perf_counter() - t)
                l1.pipeline._vectors.clear()  # a first request for this chapter embeds its query
                t = time.perf_counter()
                packets.packet(req, record=False)
                cold.append(time.perf_counter() - t)
            row["with_l1"] = {**percentiles(with_l1), "cold": percentiles(cold),
                              "l1_items": sum(i.kind in ("chunk", "wiki_page") for i in p.items),
                              "stages": {st.step: st.detail for st in p.stages}}
            log(f"{kind}: chapter {row['chapter']:>5}: with L1 p50 {row['with_l1']['p50']:.2f} ms "
                f"(first request, embedding the query: {row['with_l1']['cold']['p50']:.2f} ms)")
        packets.retriever = None
        rss["peak_with_l1_mb"] = rss_mb()  # the embedding model and the vector index loaded
        # -- where the time goes ------------------------------------------------------------------
        breakdown = {}
        for ch in (chapters[0], last_ch):
            req = Request(story, "writer", ch)
            inst = Instrument(services)
            n = max(20, samples // 4)
            t0 = time.perf_counter()
            try:
                for _ in range(n):
                    packets.packet(req, record=False)
            finally:
                inst.restore()
            total = (time.perf_counter() - t0) / n * 1e3
            parts = {k: {"ms": v / n * 1e3, "calls": inst.calls[k] / n, "rows": inst.rows[k] / n}
                     for k, v in inst.totals.most_common()}
            if "texts" in parts and "fill (budget)" in parts:  # fill calls texts: count that time once
                fill = parts.pop("fill (budget)")
                parts["fill (budget, excl. texts)"] = {**fill, "ms": fill["ms"] - parts["texts"]["ms"]}
            breakdown[str(ch)] = {"packets": n, "total_ms": total, "parts": parts,
                                  "other_ms": total - sum(p["ms"] for p in parts.values())}
        out["breakdown"] = breakdown
        out["profile"] = profile_packets(services, Request(story, "writer", last_ch), max(30, samples // 2))
        rss["peak_end_mb"] = rss_mb()
        rss["ru_maxrss_end_mb"] = ru_maxrss_mb()
        out["rss"] = rss
        raw.close()
    finally:
        services.close()
    return out


# -- the benchmark ---------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    story, commands = story_commands(args)
    chapters = chapters_measured(args.chapters)

    results = []
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                t0 = time.perf_counter()
                loaded = load_story(url, store.kind, commands, args.batch_size)
                if loaded["events"] != story["events"]:
                    log(f"{store.kind}: WARNING log holds {loaded['events']:,} events, expected {story['events']:,}")
                cfg = {"kind": store.kind, "url": url, "story_id": gen_story.STORY, "chapters": chapters,
                       "samples": args.samples, "warmup": args.warmup, "secondary_samples": args.secondary_samples}
                measured = run_worker(cfg, "--worker", __file__)
                results.append({"store": store.kind, "load": loaded, **measured,
                                "store_seconds": time.perf_counter() - t0})
    return {"machine": info, "story": story, "chapters": chapters, "samples": args.samples, "warmup": args.warmup,
            "secondary_samples": args.secondary_samples,
            "targets": TARGETS, "results": results, "skipped": skipped, "verdicts": verdicts(results, chapters)}


def verdicts(results: list[dict[str, Any]], chapters: list[int]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        rows = {row["chapter"]: row for row in r["chapters"]}
        first, last = rows[chapters[0]], rows[chapters[-1]]
        checks = [
            (f"p50 writer packet at chapter {chapters[-1]:,}", last["packet"]["p50"], TARGETS["p50_ms_last"], "ms"),
            (f"packet / limit (p50) at chapter {chapters[-1]:,}", last["ratio_packet_vs_limit"], TARGETS["packet_vs_limit"], "x"),
            (f"growth p50 chapter {chapters[0]} -> {chapters[-1]:,}", last["packet"]["p50"] / first["packet"]["p50"],
             TARGETS["growth"], "x"),
            (f"growth p50 chapter {chapters[0]} -> {chapters[-1]:,}, round-robin",
             last["packet_round_robin"]["p50"] / first["packet_round_robin"]["p50"], TARGETS["growth"], "x"),
            ("command-to-packet p50 (record=True)", r["command_to_packet"]["record_true"]["p50"], TARGETS["c2p_p50_ms"], "ms"),
            ("peak RSS of the worker", r["rss"]["peak_after_latency_loops_mb"], TARGETS["rss_mb"], "MB"),
        ]
        for name, value, target, unit in checks:
            out.append({"store": r["store"], "target": name, "value": value, "limit": target, "unit": unit,
                        "pass": value <= target, "over_by": value / target})
    return out


# -- reporting -------------------------------------------------------------------------------------
def _ms(p: dict[str, float]) -> str:
    return f"{p['p50']:.2f} / {p['p95']:.2f}"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m, s = report["machine"], report["story"]
    out = header("bench_packets.py", argv, m)
    kinds = ", ".join(f"{k} {n:,}" for k, n in s["canon_entries_by_kind"].items())
    out += [
        f"- Story (seed {s['seed']}): {s['commands']:,} commands, {s['events']:,} events, {s['chapters']:,} chapters in "
        f"{s['volumes']} volumes, {s['canon_entries']:,} canon entries ({kinds}), {s['revisions']:,} revisions, "
        f"{s['retirements']:,} retirements, {s['scene_cards']:,} scene cards, {s['rejected_proposals']:,} rejected "
        f"proposals, {s['rejected_drafts']:,} rejected drafts.",
        f"- Samples: {report['samples']} per latency measurement (packet, limit and replay interleaved), "
        f"{report['secondary_samples']} for record=True and command-to-packet, each after {report['warmup']} warmup; "
        "times in ms as p50 / p95.",
        "",
        "Loading (command path, this process) and catch-up (worker):",
        "",
        "| Store | Commands | Txns | Events | Load s | cmd/s | events/s | Catch-up s | log events/s | projected events/s |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["results"]:
        ld, cu = r["load"], r["catch_up"]
        out.append(f"| {r['store']} | {ld['commands']:,} | {ld['transactions']:,} | {ld['events']:,} | {ld['seconds']:.0f} "
                   f"| {ld['commands_per_s']:,.0f} | {ld['events_per_s']:,.0f} | {cu['seconds']:.1f} "
                   f"| {cu['log_events_per_s']:,.0f} | {cu['projected_events_per_s']:,.0f} ({cu['projected_events']:,}) |")
    out += [
        "",
        "Writer packets (record=False unless stated) and the limit:",
        "",
        "| Store | Chapter | Packet | Packet, round-robin | Limit | of which fetch | of which encode | Packet/limit "
        "| Packet's SQL, raw replay | record=True, new | record=True, re-issue | Kept/candidates | Tokens "
        "| Rows: limit / packet's SQL | SQL per packet |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["results"]:
        for row in r["chapters"]:
            it = row["items"]
            out.append(
                f"| {r['store']} | {row['chapter']:,} | {_ms(row['packet'])} | {_ms(row['packet_round_robin'])} "
                f"| {_ms(row['limit'])} "
                f"| {_ms(row['limit_fetch'])} | {_ms(row['limit_encode'])} "
                f"| {row['ratio_packet_vs_limit']:.1f}x | {_ms(row['replay'])} | {_ms(row['record_new'])} | {_ms(row['record_reissue'])} "
                f"| {it['included'] + it['trimmed']}/{it['candidates']} | {row['used_tokens']:,} "
                f"| {row['limit_rows']} / {row['replay_rows']:,} "
                f"| {row['sql']['statements'] + row['sql']['ledger_position_queries']} |")
    out += ["", "With L1 retrieval (the product default; the table above is L0 only, issue 3's targets):", "",
            "| Store | Chapter | Packet with L1, repeated | first request (embeds the query) | L0 only | L1 items "
            "| Index build (embedder) | Worker peak RSS with L1 | Keyword stage |",
            "|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in report["results"]:
        for row in r["chapters"]:
            w = row.get("with_l1")
            if w:
                out.append(f"| {r['store']} | {row['chapter']:,} | {_ms(w)} | {_ms(w['cold'])} | {_ms(row['packet'])} | {w['l1_items']} "
                           f"| {r['l1_index']['seconds']:.0f} s ({r['l1_index']['embedder']}) "
                           f"| {r['rss'].get('peak_with_l1_mb', 0):.0f} MB "
                           f"| {w['stages'].get('keyword', '')[:90]} |")
    for r in report["results"]:
        if "analyze" in r:
            a = r["analyze"]
            out += ["", f"{r['store']}: autovacuum={a['autovacuum']} on this server, so the worker ran VACUUM ANALYZE once after "
                    f"catch-up ({a['seconds']:.1f} s). Before it, the chapter-{a['packet_before_analyze']['chapter']:,} "
                    f"packet took {_ms(a['packet_before_analyze'])} ms ({a['packet_before_analyze']['n']} samples)."]
    out += ["", "| Store | Command-to-packet, record=True | of which apply | after the apply | record=False "
            "| of which apply | after the apply | Failures | Worker RSS after bootstrap "
            "| after catch-up | peak (latency loops) | peak (incl. profiler) |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        c, rs = r["command_to_packet"], r["rss"]
        t, f = c["record_true"], c["record_false"]
        out.append(f"| {r['store']} | {_ms(t)} | {_ms(t['apply'])} | {_ms(t['after_apply'])} | {_ms(f)} "
                   f"| {_ms(f['apply'])} | {_ms(f['after_apply'])} "
                   f"| {c['record_true']['failures'] + c['record_false']['failures']} | {rs['after_bootstrap_mb']:.0f} MB "
                   f"| {rs['after_catch_up_mb']:.0f} MB | {rs['peak_after_latency_loops_mb']:.0f} MB | {rs['peak_end_mb']:.0f} MB |")
    out += ["", "Command-to-packet step by step (record=True's parts, timed one by one; p50 / p95 ms):", "",
            "| Store | apply | read-your-writes catch-up | compile | record (`PacketIssued`) |", "|---|--:|--:|--:|--:|"]
    for r in report["results"]:
        sp = r["command_to_packet"]["split"]
        out.append(f"| {r['store']} | {_ms(sp['apply'])} | {_ms(sp['catch_up'])} | {_ms(sp['compile'])} "
                   f"| {_ms(sp['record'])} |")
    out += ["", "Targets:", "", "| Store | Target | Measured | Limit | Verdict |", "|---|---|--:|--:|---|"]
    for v in report["verdicts"]:
        verdict = "pass" if v["pass"] else f"**miss** ({v['over_by']:.1f}x the target)"
        out.append(f"| {v['store']} | {v['target']} | {v['value']:.2f} {v['unit']} | {v['limit']:g} {v['unit']} | {verdict} |")
    for r in report["results"]:
        out += ["", f"Where the time goes, {r['store']} (instrumented run, ms per packet; rows returned per packet):", "",
                "| Part | " + " | ".join(f"ch {ch} ms | rows" for ch in r["breakdown"]) + " |",
                "|---|" + "--:|--:|" * len(r["breakdown"])]
        parts = list(dict.fromkeys(k for b in r["breakdown"].values() for k in b["parts"]))
        for part in parts:
            cells = []
            for b in r["breakdown"].values():
                p = b["parts"].get(part)
                cells += [f"{p['ms']:.2f}" if p else "-", f"{p['rows']:.0f}" if p and p["rows"] else "-"]
            out.append(f"| {part} | " + " | ".join(cells) + " |")
        out.append("| other (transaction, recipe Python, stages) | "
                   + " | ".join(f"{b['other_ms']:.2f} | -" for b in r["breakdown"].values()) + " |")
        out.append("| **total** | " + " | ".join(f"**{b['total_ms']:.2f}** | -" for b in r["breakdown"].values()) + " |")
        pr = r["profile"]
        out += ["", f"cProfile, {r['store']}, chapter {report['chapters'][-1]:,} ({pr['packets']} packets, "
                f"{pr['profiled_ms_per_packet']:.1f} ms/packet under the profiler), own time by area:", ""]
        out += [f"- {a['area']}: {a['ms_per_packet']:.2f} ms ({100 * a['share']:.0f}%)" for a in pr["areas"][:8]]
    for store, reason in report["skipped"].items():
        out += ["", f"Skipped {store}: {reason}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        print(json.dumps(worker(json.loads(argv[1])), default=str))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200-chapter story, 30 samples (smoke run)")
    parser.add_argument("--samples", type=int, help="samples per measurement (default 200; 30 with --quick)")
    parser.add_argument("--secondary-samples", type=int,
                        help="samples for the record=True and command-to-packet loops (default: half of --samples)")
    parser.add_argument("--warmup", type=int, help="warmup calls before each measurement (default 20; 5 with --quick)")
    story_options(parser)
    add_output_options(parser)
    args = parser.parse_args(argv)
    args.samples = args.samples or (30 if args.quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (5 if args.quick else 20)
    args.secondary_samples = args.secondary_samples or max(10, args.samples // 2)
    story_sized(args)
    if args.samples < 2 or args.chapters < 1 or args.batch_size < 1 or args.warmup < 0:
        parser.error("samples must be >= 2; chapters and batch size >= 1")
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
