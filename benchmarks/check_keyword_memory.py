#!/usr/bin/env python
"""The keyword index in memory against the store's SQL on Cranfield: every query's BM25 list and
every default search's hits, compared, on both stores, with the time of each.

    python benchmarks/check_keyword_memory.py [--stores sqlite,postgres] [--depth N] [--pg-url URL]
                                              [--format markdown|json]

Not part of the pytest run. Cranfield's 1,400 abstracts go in through ``ingest_document`` (as
``bench_cranfield.py`` does; the hashing embedder: the vector list is the same code either way,
so only the keyword list can differ). Then for each of the 225 queries: the keyword list
``--depth`` deep (default 100, the pipeline's list depth) from memory and from SQL, and the
default search (``HybridSearch``'s defaults: z-score fusion, hybrid feedback, one place per
section, top 10) with the memory on and off. The report counts queries whose lists or hits
differ: ids in order, scores (SQLite: equal floats; PostgreSQL: equal to 1e-12, and an order
that differs only between scores equal to that), and the final hits with their fused scores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_cranfield import COLLECTION, apply_all, build, ingest_commands, load_cranfield  # noqa: E402
from common import log, stores_for  # noqa: E402


def _same(memory: list[Any], sql: list[Any], postgres: bool) -> bool:
    if len(memory) != len(sql):
        return False
    if not postgres:
        return [(h.id, h.score) for h in memory] == [(h.id, h.score) for h in sql]
    by_id = {h.id: h.score for h in sql}
    return all(m.id in by_id and math.isclose(m.score, by_id[m.id], rel_tol=1e-12)
               and (m.id == s.id or math.isclose(m.score, s.score, rel_tol=1e-12)) for m, s in zip(memory, sql))


def check(kind: str, url: str, depth: int) -> dict[str, Any]:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    docs, queries, _ = load_cranfield()
    services = bootstrap(url, embedder="hashing")
    try:
        apply_all(services, ingest_commands(docs))
        build(services)
        reader = services.retrieval_reader
        held = reader.keywords
        postgres = services.config.is_postgres
        lists_differ, times = 0, {"memory": [], "sql": []}
        with reader.snapshot() as snap:
            snap.keyword(queries[0], [COLLECTION], depth)  # the collection's first query goes to SQL
            for q in queries:
                reader.keywords = held
                t = time.perf_counter()
                memory = snap.keyword(q, [COLLECTION], depth).hits
                times["memory"].append(time.perf_counter() - t)
                reader.keywords = None
                t = time.perf_counter()
                sql = snap.keyword(q, [COLLECTION], depth).hits
                times["sql"].append(time.perf_counter() - t)
                lists_differ += not _same(memory, sql, postgres)
        hits_differ = 0
        search = services.search_service()
        for q in queries:
            reader.keywords = held
            a = search.search([COLLECTION], q, 10)
            reader.keywords = None
            b = search.search([COLLECTION], q, 10)
            hits_differ += [(h.id, h.score) for h in a.hits] != [(h.id, h.score) for h in b.hits]
        reader.keywords = held
        out = {"store": kind, "queries": len(queries), "depth": depth, "lists_differ": lists_differ,
               "searches_differ": hits_differ,
               "keyword_p50_ms": {k: statistics.median(v) * 1e3 for k, v in times.items()}}
        log(f"{kind}: {out}")
        return out
    finally:
        services.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--pg-url")
    ap.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = ap.parse_args(argv)
    stores, skipped = stores_for(args.stores.split(","), args.pg_url)
    results = []
    try:
        for store in stores:
            with store.fresh() as url:
                results.append(check(store.kind, url, args.depth))
    finally:
        for store in stores:
            store.close()
    if args.format == "json":
        print(json.dumps({"results": results, "skipped": skipped}, indent=1))
    else:
        print("| Store | Queries | Keyword lists that differ | Default searches that differ | keyword p50 memory / SQL |")
        print("|---|--:|--:|--:|--:|")
        for r in results:
            t = r["keyword_p50_ms"]
            print(f"| {r['store']} | {r['queries']} | {r['lists_differ']} | {r['searches_differ']} | "
                  f"{t['memory']:.2f} / {t['sql']:.2f} ms |")
    return 0 if all(r["lists_differ"] == 0 and r["searches_differ"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
