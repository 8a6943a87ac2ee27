#!/usr/bin/env python
"""The writer packet with L1 retrieval against the same packet with L0 alone, at chapters 10,
100 and 1,000 of the synthetic serial, with a floor measured in the same run; old and new code
alternated when ``--old`` names a checkout of the old code (its ``canon_ledger`` put first on
the worker's path; each run reports the package it imported).

    python benchmarks/bench_l1.py [--store sqlite|postgres|both] [--quick] [--samples N] [--warmup N]
                                  [--embedder minilm|hashing] [--old DIR] [--rounds N] [--pg-url URL]
                                  [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Goal: the L1 packet (a repeated request) p50 <= 2x the L0-only
packet at every chapter measured, on both stores.

**Per store** (a temp SQLite file; a scratch PostgreSQL database): ``gen_story``'s serial
(seed 3, 1,000 chapters; 200 with ``--quick``) through the command path; then fresh worker
processes: ``prepare`` (canon, knowledge, keyword index and vectors caught up, with the
embedder named; PostgreSQL then ``VACUUM ANALYZE``), and per round one ``measure`` per code
(new, and the ``--old`` checkout through ``PYTHONPATH``), their order swapped every round.

``measure``, per chapter: ``--warmup`` packets of each kind, then ``--samples`` pairs, L0-only
and L1 alternated (``record=False``, the same request each time: the query's vector is
remembered); p50 of each and the median of the pairs' ratios. Then the **first request** of an
L1 packet (the query's vector forgotten before each: it is embedded again) and, new code only,
the **floor**: the L0 packet's p50 plus the p50 of the same hybrid search (same query, same
chunks before the chapter, same fusion and selection) over an in-memory snapshot that holds the
collection's keyword index, vector matrix and texts already read (no SQL at all). Each
packet's hash is reported so the parent can say whether old and new code built the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (bench_stores, load_story, log, percentiles, run_worker, story_commands)  # noqa: E402

GOAL = 2.0
STORY = "synthetic-serial"
# The old code's checkout (``--old``), ahead of the one ``common`` put first on the path: a
# worker imports canon_ledger only inside its functions, after this line.
if os.environ.get("BENCH_L1_CODE"):
    sys.path.insert(0, os.environ["BENCH_L1_CODE"])


def _services(url: str, embedder: str) -> Any:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    return bootstrap(url, embedder=embedder)


def prepare(cfg: dict[str, Any]) -> dict[str, Any]:
    services = _services(cfg["url"], cfg["embedder"])
    try:
        t0 = time.perf_counter()
        services.canon.catch_up_serving()
        canon_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        services.catch_up_retrieval()
        index_s = time.perf_counter() - t0
        if cfg["kind"] == "postgres":
            from sqlalchemy import text

            with services.canon.write_engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
        return {"canon_s": canon_s, "index_s": index_s, "embedder": services.embedder.name}
    finally:
        services.close()


class MemorySnapshot:
    """A retrieval snapshot over what one search of the live reader read, held in memory: the
    collection's keyword index, its vector matrix and the texts (the floor's search)."""

    def __init__(self, live: Any, collection: str, query: str, chapter: int) -> None:
        from canon_ledger.application.retrieval.earlier_chapters import EarlierChapters
        from canon_ledger.projections.keyword_memory import KeywordMemory

        reader = live.reader
        self.vector_model = reader.vector_model
        self.collection = collection
        with reader.snapshot() as snap:
            b = snap.builds
            memory = KeywordMemory()
            scope = None if b.keyword.postings is None else [collection]
            # A collection's first query goes to SQL: the second reads it into memory.
            self.held = memory._current(snap.conn, b.keyword.docs.name, scope) or memory._current(
                snap.conn, b.keyword.docs.name, scope)
            self.fts = b.keyword.fts
            if b.keyword.fts is not None:
                from canon_ledger.projections.keyword_memory import fts5_totals

                self.totals = fts5_totals(snap.conn, b.keyword.fts)
            self.postgres = b.keyword.postings is not None
            self.matrix = reader.matrix(snap.conn, b.vectors, collection) if b.vectors is not None else None
            self._docs = snap.docs(self.held[collection].ids)  # every text the search could want
        self.inner = EarlierChapters(self, chapter)

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int, below: str | None = None) -> Any:
        from canon_ledger.application.retrieval.ports import KeywordResult
        from canon_ledger.projections.keyword_memory import bm25
        from canon_ledger.projections.retrieval_text import query_terms

        terms = query_terms(query)
        totals = None if self.postgres else self.totals
        return KeywordResult(bm25(self.held, [self.collection], terms, limit, below, totals), terms, "memory")

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> Any:
        import numpy as np

        from canon_ledger.application.retrieval.ports import Hit

        m = self.matrix
        if m is None or not m.ids:
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        q /= float(np.linalg.norm(q))
        scores = m.matrix @ q
        ids = m.ids
        if below is not None:
            keep = m.plain_ids < below
            ids = [i for i, k in zip(m.ids, keep) if k]
            scores = scores[keep]
        k = min(limit, len(ids))
        if not k:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), ids[i]))
        return [Hit(ids[i], float(scores[i])) for i in order]

    def docs(self, ids: Sequence[str]) -> dict[str, Any]:
        return {i: self._docs[i] for i in ids if i in self._docs}

    def keyword_weighted(self, weights: Mapping[str, float], collection_ids: Sequence[str], limit: int,
                         below: str | None = None) -> Any:
        raise NotImplementedError("packets run no feedback")

    def term_stats(self, doc_ids: Sequence[str], collection_ids: Sequence[str]) -> Any:
        raise NotImplementedError("packets run no feedback")

    def vectors(self, ids: Sequence[str], collection_ids: Sequence[str]) -> dict[str, list[float]]:
        return {}

    def overview(self, collection_id: str) -> Any:
        return None


def _floor_search(packets: Any, request: Any, samples: int) -> float | None:
    """p50 ms of the packet's hybrid search over a ``MemorySnapshot`` (None: L1 found nothing)."""
    from canon_ledger.application.packets.recipes import Request  # noqa: F401 - the request's type
    from canon_ledger.domain.chunking import story_collection

    live = packets.retriever
    asked = packet_query(packets, request)
    if asked is None:
        return None
    query, top_k = asked
    snap = MemorySnapshot(live, story_collection(request.story_id), query, request.chapter)
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        live.pipeline.search(snap.inner, [snap.collection], query, top_k or live.top_k, feedback=live.feedback)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def packet_query(packets: Any, request: Any) -> tuple[str, int | None] | None:
    """(query, top_k) the compiler searched with, read off its retriever (the last ``recall``)."""
    live = packets.retriever
    seen: list[tuple[str, int | None]] = []
    inner = live.recall

    def spy(story_id: str, chapter: int, query: str, top_k: int | None = None) -> Any:
        seen.append((query, top_k))
        return inner(story_id, chapter, query, top_k)

    live.recall = spy
    try:
        packets.packet(request, record=False)
    finally:
        del live.recall
    return seen[-1] if seen else None


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    from canon_ledger.application.packets.recipes import Request

    services = _services(cfg["url"], cfg["embedder"])
    try:
        packets = services.packets
        l1 = packets.retriever
        import canon_ledger

        out: dict[str, Any] = {"code": cfg["code"], "chapters": {}, "package": os.path.dirname(canon_ledger.__file__)}
        for chapter in cfg["chapters"]:
            req = Request(STORY, "writer", chapter)
            for _ in range(cfg["warmup"]):
                packets.retriever = None
                packets.packet(req, record=False)
                packets.retriever = l1
                packets.packet(req, record=False)
            times: dict[str, list[float]] = {"l0": [], "l1": []}
            hashes: dict[str, str] = {}
            for i in range(cfg["samples"]):
                for kind in (("l0", "l1") if i % 2 == 0 else ("l1", "l0")):
                    packets.retriever = None if kind == "l0" else l1
                    t = time.perf_counter()
                    p = packets.packet(req, record=False)
                    times[kind].append(time.perf_counter() - t)
                    hashes[kind] = p.hash
            packets.retriever = l1
            l1_items = sum(i.kind in ("chunk", "wiki_page") for i in p.items) if kind == "l1" else None
            cold = []
            for _ in range(max(5, cfg["samples"] // 10)):
                l1.pipeline._vectors.clear()
                t = time.perf_counter()
                packets.packet(req, record=False)
                cold.append(time.perf_counter() - t)
            row: dict[str, Any] = {
                "l0": percentiles(times["l0"]), "l1": percentiles(times["l1"]),
                "paired": statistics.median(a / b for a, b in zip(times["l1"], times["l0"])),
                "first_l1": percentiles(cold), "hashes": hashes,
                "l1_items": sum(i.kind in ("chunk", "wiki_page") for i in packets.packet(req, record=False).items)}
            row["ratio"] = row["l1"]["p50"] / row["l0"]["p50"]
            if cfg["code"] == "new":
                search = _floor_search(packets, req, cfg["samples"])
                row["floor_search_ms"] = search
                row["floor_ms"] = row["l0"]["p50"] + (search or 0.0)
                row["floor_ratio"] = row["floor_ms"] / row["l0"]["p50"]
            del l1_items
            out["chapters"][str(chapter)] = row
            log(f"{cfg['kind']} {cfg['code']} ch {chapter}: L0 {row['l0']['p50']:.2f} ms, L1 {row['l1']['p50']:.2f} ms "
                f"({row['ratio']:.2f}x, paired {row['paired']:.2f}x), first L1 {row['first_l1']['p50']:.1f} ms"
                + (f", floor {row['floor_ms']:.2f} ms ({row['floor_ratio']:.2f}x)" if "floor_ms" in row else ""))
        return out
    finally:
        services.close()


WORKERS = {"prepare": prepare, "measure": measure}


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    story, commands = story_commands(args)
    chapters = [c for c in (10, 100, 1000) if c <= args.chapters]
    results = []
    codes = [("new", None)] + ([("old", os.path.abspath(args.old))] if args.old else [])
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                loaded = load_story(url, store.kind, commands, 100)
                cfg = {"kind": store.kind, "url": url, "embedder": args.embedder, "chapters": chapters,
                       "samples": args.samples, "warmup": args.warmup}
                r: dict[str, Any] = {"store": store.kind, "load_s": loaded["seconds"], "events": loaded["events"]}
                r["prepare"] = run_worker(cfg, "prepare", __file__)
                log(f"{store.kind}: indexes built in {r['prepare']['index_s']:.1f} s ({r['prepare']['embedder']})")
                runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in codes}
                for round_ in range(args.rounds):
                    order = codes if round_ % 2 == 0 else list(reversed(codes))
                    for name, path in order:
                        if path:
                            os.environ["BENCH_L1_CODE"] = path
                        try:
                            runs[name].append(run_worker({**cfg, "code": name}, "measure", __file__))
                        finally:
                            os.environ.pop("BENCH_L1_CODE", None)
                r["runs"] = runs
                results.append(r)
    return {"machine": info, "story": story, "goal": GOAL, "results": results, "skipped": skipped,
            "args": {k: v for k, v in vars(args).items() if k != "format"}}


def _med(values: list[float]) -> float:
    return statistics.median(values)


def markdown(report: dict[str, Any]) -> str:
    out = ["| Store | Chapter | Code | L0 p50 ms | L1 p50 ms | L1 / L0 (paired) | first L1 ms | floor ms (x L0) "
           "| L1 items | same bytes as old | goal <= 2x |", "|---|--:|---|--:|--:|--:|--:|--:|--:|---|---|"]
    for r in report["results"]:
        runs = r["runs"]
        for chapter in sorted({c for run in runs["new"] for c in run["chapters"]}, key=int):
            for code, code_runs in runs.items():
                rows = [run["chapters"][chapter] for run in code_runs]
                l0, l1 = _med([x["l0"]["p50"] for x in rows]), _med([x["l1"]["p50"] for x in rows])
                paired = _med([x["paired"] for x in rows])
                first = _med([x["first_l1"]["p50"] for x in rows])
                floor = (f"{_med([x['floor_ms'] for x in rows]):.2f} ({_med([x['floor_ratio'] for x in rows]):.2f}x)"
                         if "floor_ms" in rows[0] else "-")
                same = "-"
                if code == "new" and "old" in runs:
                    old_hash = runs["old"][0]["chapters"][chapter]["hashes"]
                    same = "yes" if rows[0]["hashes"] == old_hash else "NO"
                met = ("met" if paired <= report["goal"] else "missed") if code == "new" else ""
                out.append(f"| {r['store']} | {int(chapter):,} | {code} | {l0:.2f} | {l1:.2f} | {l1 / l0:.2f}x "
                           f"({paired:.2f}x) | {first:.1f} | {floor} | {rows[0]['l1_items']} | {same} | {met} |")
    m = report["machine"]
    out += ["", f"{report['story']['chapters']:,} chapters, {report['args']['samples']} samples per kind, "
                f"{report['args']['rounds']} round(s), embedder {report['args']['embedder']}; "
                f"load {m.get('loadavg_start')} -> {m.get('loadavg_end')}; {m['wall_seconds']} s."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    if len(sys.argv) >= 3 and sys.argv[1] in WORKERS:
        print(json.dumps(WORKERS[sys.argv[1]](json.loads(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200 chapters, 40 samples")
    parser.add_argument("--samples", type=int, help="pairs per chapter (default 200; 40 with --quick)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--chapters", type=int, help="chapters of the serial (default 1,000; 200 with --quick)")
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--embedder", default="minilm", help="minilm (the product default) or hashing")
    parser.add_argument("--old", help="a checkout of the old code, measured alternately with this one")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (new, old), the order swapped each round")
    parser.add_argument("--pg-url")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--save-json")
    args = parser.parse_args(argv)
    args.samples = args.samples or (40 if args.quick else 200)
    args.chapters = args.chapters or (200 if args.quick else 1000)
    if args.entries is None:
        import gen_story

        args.entries = gen_story.ENTRIES if args.chapters == gen_story.CHAPTERS else max(
            50, gen_story.ENTRIES * args.chapters // gen_story.CHAPTERS)
    report = benchmark(args)
    if args.save_json:
        with open(args.save_json, "w") as f:
            json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1) if args.format == "json" else markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
