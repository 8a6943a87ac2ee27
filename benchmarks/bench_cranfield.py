#!/usr/bin/env python
"""Hybrid search quality on Cranfield, and search latency at 1,400 docs and at 50,000 chunks (issue 6).

    python benchmarks/bench_cranfield.py [--stores sqlite,postgres] [--embedder auto|minilm|hashing]
                                         [--scale 50000] [--scale-store sqlite] [--skip-scale]
                                         [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Data: ``../shared/data/cranfield`` (relative to the project root).

Quality. The 1,400 abstracts go through the real command path: one ``ingest_document`` per
abstract (collection ``cranfield``, document id = the ``.I`` number, title ``.T``, text ``.W``),
applied in atomic batches of 100; then the projections catch up (knowledge, keyword index,
vectors: each timed, that is the index build). Queries are numbered 1..225 by their order in
``cran.qry`` (the ``.I`` numbers skip: the judgements use the position). Judgements from
``cranqrel``: grade 1 (most relevant) .. 4 -> gain 4 .. 1; -1 is not relevant. Metrics over the
queries with at least one relevant document: NDCG@10 (linear gain, as trec_eval), MRR@10 and
Recall@100, on documents (a chunk counts as its abstract; the first chunk of a document
places it). Runs:

- keyword: the store's BM25 (FTS5 on SQLite, postings SQL on PostgreSQL), 300 hits;
- keyword+prf: RM3 pseudo-relevance feedback on that list (``feedback.expand``: Anserini's
  defaults, 10 feedback chunks, 10 terms, original query weight 0.5), 300 hits: a single
  retriever, so it counts for the "best single retriever" bar;
- dense: cosine over the vector index, 300 hits;
- dense+prf: Rocchio vector feedback on that list (``rocchio.expand_vector``: Li et al.'s
  setting, the mean of the top 5 chunk vectors, alpha 0.4, beta 0.6), 300 hits: a single
  retriever, so it counts for the "best single retriever" bar too;
- rrf: ``fusion.rrf`` (k 60) of keyword and dense; rrf+prf: of keyword+prf and dense;
- zscore, zscore+prf: ``rerank.zscore_order`` over those rrf candidates (every candidate of both
  lists);
- default: ``HybridSearch.search`` with its default fusion, rerank and selection (since issue
  21: z-score over every candidate of both 100-deep lists, a missing hit at the lowest z - 0.5
  sd, one place per section first) and ``feedback="alone"`` (no feedback beside a vector list:
  what a packet's L1 runs). What ``canon search --top 10`` returns since issue 21 is the
  default+hybrid-prf row (its default feedback is ``hybrid``). Top 10 chunks for NDCG/MRR, and top 100
  (wide 300) for Recall@100; default+prf: the same with ``feedback="always"`` (RM3 on the
  keyword list before fusion); default+hybrid-prf: the same with ``feedback="hybrid"`` (the
  fused first pass's top 10 chunks feed RM3 on the keyword side and its top 5 Rocchio on the
  vector side; the expanded lists go through the same fusion, rerank and selection);
- keyword-only default / keyword-only no-prf: ``HybridSearch`` without an embedder (what search
  does when no vector list can be made), with its RM3 (``feedback="alone"``) and without;
- two ablations of the default from the same 100-deep lists, to show what each step is worth:
  ``old-default`` = the pipeline before issue 6's follow-up (z-score on the pool's own scale,
  the first 10 chunks, so two chunks of one abstract take two places) and ``+one-per-section``
  = the same ranking with the default's selection rule. Recall@100 of both: their top 100
  (wide 300).

Also reported: the mean number of distinct abstracts in each run's first 10 results, each run's
NDCG@10 per query (JSON), and a paired randomisation test (two-sided, 10,000 sign flips of the
per-query differences, seeded) for what feedback changes: keyword+prf against keyword,
dense+prf against dense, default+prf and default+hybrid-prf against default, keyword-only
default against keyword-only no-prf, and default and default+hybrid-prf against the best
single retriever (the best of keyword, keyword+prf, dense and dense+prf); and, for
default+hybrid-prf, how many queries' ``feedback`` stage was done / skipped / error.

Latency. p50 / p90 of ``SearchService.search`` (catch-up check, snapshot, every stage) per
query, after one warm-up query, as the default runs (no RM3 beside a vector list), with RM3
forced on (``feedback="always"``) and with hybrid feedback (``feedback="hybrid"``) in the same
run, alternating per query, plus the
keyword step, the RM3 step (``feedback.expand`` after the keyword read) and the vector step alone. At 1,400 docs: the
Cranfield store above. At ``--scale`` chunks: War and Peace through the story commands
(accepted chapter text -> collection ``story:war-and-peace``), padded with documents made of
the novel's paragraphs in a seeded shuffle, ingested into the same collection. Embedding 50,000
chunks with MiniLM would take ~45 minutes here, so the scale store indexes vectors with the
384-dimension hashing embedder (the same matrix shape as MiniLM); the MiniLM query embedding
time measured on Cranfield is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import add_pg_option, git_commit, percentiles, scratch  # noqa: E402
from gen_story import NOVEL, novel_commands, read_novel  # noqa: E402

from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.application.retrieval.feedback import ALONE, ALWAYS, HYBRID, OFF, expand  # noqa: E402
from canon_ledger.application.retrieval.fusion import rrf, wide  # noqa: E402
from canon_ledger.application.retrieval.rerank import zscore_order  # noqa: E402
from canon_ledger.application.retrieval.rocchio import expand_vector  # noqa: E402
from canon_ledger.application.retrieval.search import HybridSearch, section_of  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CRANFIELD = DATA / "cranfield"
COLLECTION = "cranfield"
DEEP = 100
SINGLES = ("keyword", "keyword+prf", "dense", "dense+prf")  # single retrievers: the "best single" bar


# -- Cranfield ------------------------------------------------------------------------------------
def _fields(path: Path) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    field = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r"^\.([ITABW])\b\s*(.*)$", line)
        if m:
            field = m.group(1)
            if field == "I":
                records.append({"I": m.group(2).strip()})
            else:
                records[-1][field] = ""
            continue
        if field and field != "I":
            records[-1][field] += line + "\n"
    return records


def load_cranfield() -> tuple[list[dict[str, str]], list[str], dict[int, dict[str, int]]]:
    docs = _fields(CRANFIELD / "cran.all.1400")
    queries = [" ".join(q.get("W", "").split()) for q in _fields(CRANFIELD / "cran.qry")]
    qrels: dict[int, dict[str, int]] = {}
    for line in (CRANFIELD / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        q, d, grade = int(parts[0]), parts[1], int(parts[2])
        if 1 <= grade <= 4:
            qrels.setdefault(q, {})[d] = 5 - grade  # by position in cran.qry, 1-based
    return docs, queries, qrels


def ndcg10(ranking: list[str], gains: dict[str, int]) -> float:
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted(gains.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def mrr10(ranking: list[str], gains: dict[str, int]) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranking[:10]) if gains.get(d, 0) > 0), 0.0)


def recall100(ranking: list[str], gains: dict[str, int]) -> float:
    relevant = {d for d, g in gains.items() if g > 0}
    return len(relevant & set(ranking[:100])) / len(relevant) if relevant else 0.0


def documents(ids: list[str]) -> list[str]:
    """Chunk ids -> abstract numbers, first occurrence first. Only chunks are abstracts: a wiki
    page (``page:``) or a broad query's collection overview (``overview:``, which ``select`` puts
    before the ``top_k`` chunks, not in their place) is not a ranked abstract."""
    return list(dict.fromkeys(i.rsplit("#", 1)[0].partition("/")[2] for i in ids
                              if not i.startswith(("page:", "overview:"))))


def one_per_section(ids: list[str], top: int) -> list[str]:
    """The default's selection rule over a ranked list of chunk ids (``search._select``)."""
    seen: set[str] = set()
    first, waiting = [], []
    for i in ids:
        (waiting if section_of(i) in seen else first).append(i)
        seen.add(section_of(i))
    return (first[:top] + waiting)[:top]


def paired_p(a: list[float], b: list[float], rounds: int = 10_000, seed: int = 6) -> float:
    """Two-sided paired randomisation test of mean(a - b): the share of random sign flips of
    the per-query differences whose mean is at least as far from 0 as the observed one."""
    diffs = [x - y for x, y in zip(a, b)]
    observed = abs(statistics.fmean(diffs))
    rng = random.Random(seed)
    hits = sum(abs(statistics.fmean([d if rng.random() < 0.5 else -d for d in diffs])) >= observed - 1e-12
               for _ in range(rounds))
    return (hits + 1) / (rounds + 1)


def ingest_commands(docs: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One ``ingest_document`` per abstract (collection ``cranfield``, document id ``.I``)."""
    return [{"type": "ingest_document", "command_id": f"cran-{d['I']}", "collection_id": COLLECTION,
             "document_id": d["I"], "title": " ".join(d.get("T", "").split()) or f"Abstract {d['I']}",
             "text": d.get("W", "")} for d in docs]


def apply_all(services: Any, commands: list[dict[str, Any]], batch: int = 100) -> float:
    parsed = [parse_command(c) for c in commands]
    started = time.perf_counter()
    for i in range(0, len(parsed), batch):
        results = services.ledger.apply(parsed[i:i + batch], atomic=True)
        bad = [r.as_dict() for r in results if not r.ok]
        if bad:
            raise SystemExit(f"command rejected: {bad[0]}")
    return time.perf_counter() - started


def build(services: Any) -> dict[str, float]:
    goal = services.ledger.event_log.position()
    t0 = time.perf_counter()
    services.knowledge.catch_up_serving(goal)
    t1 = time.perf_counter()
    services.retrieval.catch_up_serving(goal)
    t2 = time.perf_counter()
    from canon_ledger.projections.retrieval import catch_up_vectors

    catch_up_vectors(services.vectors, goal)
    t3 = time.perf_counter()
    return {"knowledge_s": t1 - t0, "keyword_index_s": t2 - t1, "vector_index_s": t3 - t2}


def latency(services: Any, collections: list[str], queries: list[str], top_k: int = 10) -> dict[str, float]:
    service = services.search_service()
    service.search(collections, queries[0], top_k)  # warm-up: model load, matrix cache
    full, forced, hybrid, kw, prf, vec, emb = [], [], [], [], [], [], []
    for q in queries:
        for feedback, times in ((ALONE, full), (ALWAYS, forced), (HYBRID, hybrid)):
            service.pipeline.feedback = feedback
            t = time.perf_counter()
            service.search(collections, q, top_k)
            times.append(time.perf_counter() - t)
        service.pipeline.feedback = ALONE
        with services.retrieval_reader.snapshot() as snap:
            t = time.perf_counter()
            first = snap.keyword(q, collections, 100)
            kw.append(time.perf_counter() - t)
            t = time.perf_counter()
            expand(snap, collections, first, 100)
            prf.append(time.perf_counter() - t)
            t = time.perf_counter()
            [v] = services.embedder.embed([q])
            emb.append(time.perf_counter() - t)
            t = time.perf_counter()
            snap.vector(v, collections, 30)
            vec.append(time.perf_counter() - t)
    search, with_prf, with_hybrid = percentiles(full), percentiles(forced), percentiles(hybrid)
    return {"queries": len(queries), "search_p50_ms": search["p50"], "search_p90_ms": search["p90"],
            "search_prf_p50_ms": with_prf["p50"], "search_prf_p90_ms": with_prf["p90"],
            "search_hybrid_prf_p50_ms": with_hybrid["p50"], "search_hybrid_prf_p90_ms": with_hybrid["p90"],
            "keyword_p50_ms": percentiles(kw)["p50"], "prf_p50_ms": percentiles(prf)["p50"],
            "embed_p50_ms": percentiles(emb)["p50"], "vector_p50_ms": percentiles(vec)["p50"]}


def run_cranfield(kind: str, embedder: str, pg_url: str | None = None) -> dict[str, Any]:
    docs, queries, qrels = load_cranfield()
    url, cleanup = scratch(kind, pg_url)
    services = bootstrap(url, embedder=embedder)
    try:
        apply_s = apply_all(services, ingest_commands(docs))
        timings = build(services)
        with services.knowledge_reader.snapshot() as snap:
            chunks = sum(len(snap.topic_chunks(COLLECTION, t.topic_id)) for t in snap.topics(COLLECTION))
        pipeline = HybridSearch(services.embedder)
        runs: dict[str, list[list[str]]] = {k: [] for k in (
            "keyword", "keyword+prf", "dense", "dense+prf", "rrf", "zscore", "rrf+prf", "zscore+prf", "old-default",
            "+one-per-section", "default", "default+prf", "default+hybrid-prf", "keyword-only no-prf",
            "keyword-only default")}
        deep_runs: dict[str, list[list[str]]] = {k: [] for k in (
            "old-default", "+one-per-section", "default", "default+prf", "default+hybrid-prf", "keyword-only no-prf",
            "keyword-only default")}
        feedback_stages: dict[str, int] = {}
        keyword_only = HybridSearch(None)
        judged = [n for n in range(1, len(queries) + 1) if qrels.get(n)]
        with services.retrieval_reader.snapshot() as snap:
            for n in judged:
                q = queries[n - 1]
                first = snap.keyword(q, [COLLECTION], 3 * DEEP)
                kw = first.hits
                kw_prf = expand(snap, [COLLECTION], first, 3 * DEEP).hits
                [v] = services.embedder.embed([q])
                dense = snap.vector(v, [COLLECTION], 3 * DEEP)
                dense_prf = expand_vector(snap, [COLLECTION], v, dense, dense, 3 * DEEP).hits
                fused = rrf({"keyword": kw, "vector": dense})
                fused_prf = rrf({"keyword": kw_prf, "vector": dense})
                runs["keyword"].append(documents([h.id for h in kw]))
                runs["keyword+prf"].append(documents([h.id for h in kw_prf]))
                runs["dense"].append(documents([h.id for h in dense]))
                runs["dense+prf"].append(documents([h.id for h in dense_prf]))
                runs["rrf"].append(documents([c.id for c in fused]))
                runs["zscore"].append(documents([c.id for c in zscore_order(fused)]))
                runs["rrf+prf"].append(documents([c.id for c in fused_prf]))
                runs["zscore+prf"].append(documents([c.id for c in zscore_order(fused_prf)]))
                for top, store in ((10, runs), (DEEP, deep_runs)):
                    depth = max(DEEP, wide(top))  # as HybridSearch reads its lists
                    old = [c.id for c in zscore_order(rrf({"keyword": kw[:depth], "vector": dense[:depth]},
                                                           limit=wide(top)))]
                    store["old-default"].append(documents(old[:top]))
                    store["+one-per-section"].append(documents(one_per_section(old, top)))
                    for name, search, feedback in (("default", pipeline, ALONE), ("default+prf", pipeline, ALWAYS),
                                                   ("default+hybrid-prf", pipeline, HYBRID),
                                                   ("keyword-only no-prf", keyword_only, OFF),
                                                   ("keyword-only default", keyword_only, ALONE)):
                        result = search.search(snap, [COLLECTION], q, top, feedback=feedback)
                        store[name].append(documents([h.id for h in result.hits]))
                        if feedback == HYBRID and top == 10:
                            status = next((s.status for s in result.stages if s.step == "feedback"), "absent")
                            feedback_stages[status] = feedback_stages.get(status, 0) + 1
        scores = {}
        per_query: dict[str, list[float]] = {}
        for name, rankings in runs.items():
            gains = [qrels[n] for n in judged]
            deep = deep_runs.get(name, rankings)
            per_query[name] = [ndcg10(r, g) for r, g in zip(rankings, gains)]
            scores[name] = {
                "distinct_in_10": statistics.fmean(len(r[:10]) for r in rankings),
                "ndcg10": statistics.fmean(ndcg10(r, g) for r, g in zip(rankings, gains)),
                "mrr10": statistics.fmean(mrr10(r, g) for r, g in zip(rankings, gains)),
                "recall100": statistics.fmean(recall100(r, g) for r, g in zip(deep, gains)),
            }
        best = max(SINGLES, key=lambda name: scores[name]["ndcg10"])
        tests = {f"{a} vs {b}": paired_p(per_query[a], per_query[b])
                 for a, b in (("keyword+prf", "keyword"), ("dense+prf", "dense"), ("default+prf", "default"),
                              ("default+hybrid-prf", "default"), ("default+hybrid-prf", "default+prf"),
                              ("keyword-only default", "keyword-only no-prf"), ("default", best),
                              ("default+hybrid-prf", best))}
        lat = latency(services, [COLLECTION], [queries[n - 1] for n in judged[:100]])
        return {"store": kind, "embedder": services.embedder.name, "docs": len(docs), "chunks": chunks,
                "queries": len(judged), "apply_s": apply_s, **timings, "scores": scores, "paired_p": tests,
                "best_single": best, "hybrid_prf_feedback_stage": feedback_stages,
                "ndcg10_per_query": per_query, "latency": lat}
    finally:
        services.close()
        cleanup()


# -- scale ----------------------------------------------------------------------------------------
SCALE_QUERIES = [
    "Pierre at the battle of Borodino", "Natasha's first ball", "Prince Andrew wounded at Austerlitz",
    "the burning of Moscow", "Kutuzov and the council at Fili", "Nicholas Rostov gambling debt to Dolokhov",
    "Princess Mary and her father at Bald Hills", "the freemasons initiate Pierre", "Anatole tries to elope with Natasha",
    "Platon Karataev in captivity", "Napoleon crosses the Niemen", "wolf hunt with the borzois",
    "Speranski and the reforms", "Petya killed in the partisan raid", "the retreat of the French army in winter",
    "Helene's salon in Petersburg", "old Count Rostov's finances", "Denisov and the requisitioned provisions",
    "what does history say about free will", "Andrew sees the sky at Austerlitz",
]


def run_scale(kind: str, target_chunks: int, pg_url: str | None = None) -> dict[str, Any]:
    from canon_ledger.infrastructure.providers.offline import HashingEmbedder

    url, cleanup = scratch(kind, pg_url)
    services = bootstrap(url, embedder=HashingEmbedder(384))
    try:
        books = read_novel(NOVEL)
        apply_s = apply_all(services, novel_commands(books, None))
        story = "story:war-and-peace"
        services.knowledge.catch_up_serving()
        with services.knowledge_reader.snapshot() as snap:
            novel_chunks = sum(len(snap.topic_chunks(story, t.topic_id)) for t in snap.topics(story))
        paragraphs = [" ".join(para.split()) for b in books for c in b.chapters for para in c.text.split("\n\n")
                      if len(para.split()) > 20]
        rng = random.Random(6)
        pad_commands, made, n = [], novel_chunks, 0
        per_doc = 100  # ~ chunks per padding document
        while made < target_chunks:
            n += 1
            take = min(per_doc, target_chunks - made)
            body = "\n\n".join(" ".join(rng.sample(paragraphs, 2)) for _ in range(take))
            text = "\n\n".join(f"## Part {i}\n\n{para}" for i, para in enumerate(body.split("\n\n"), start=1))
            pad_commands.append({"type": "ingest_document", "command_id": f"pad-{n}", "collection_id": story,
                                 "document_id": f"padding-{n:04d}.md", "title": f"Padding {n}", "text": text})
            made += take
        apply_s += apply_all(services, pad_commands, batch=10)
        timings = build(services)
        with services.knowledge_reader.snapshot() as snap:
            chunks = sum(len(snap.topic_chunks(story, t.topic_id)) for t in snap.topics(story))
        lat = latency(services, [story], SCALE_QUERIES * 5)
        return {"store": kind, "embedder": services.embedder.name, "novel_chunks": novel_chunks, "chunks": chunks,
                "apply_s": apply_s, **timings, "latency": lat}
    finally:
        services.close()
        cleanup()


# -- report ---------------------------------------------------------------------------------------
def markdown(report: dict[str, Any]) -> str:
    out = [f"- Command: `{report['command']}`", f"- Date: {report['date']}; git {report['git']}; "
           f"{report['machine']}", ""]
    out += ["| Store | Run | NDCG@10 | MRR@10 | Recall@100 | abstracts in top 10 |", "|---|---|--:|--:|--:|--:|"]
    for r in report["cranfield"]:
        for name, s in r["scores"].items():
            out.append(f"| {r['store']} | {name} | {s['ndcg10']:.4f} | {s['mrr10']:.4f} | {s['recall100']:.4f} | "
                       f"{s['distinct_in_10']:.2f} |")
        best = max(r["scores"][single]["ndcg10"] for single in SINGLES)
        for name in ("default", "default+prf", "default+hybrid-prf"):
            out.append(f"| {r['store']} | {name} / best single | {r['scores'][name]['ndcg10'] / best:.3f}x | | | |")
        for pair, pvalue in r.get("paired_p", {}).items():
            shown = "< 0.001" if pvalue < 0.001 else f"{pvalue:.3f}"
            out.append(f"| {r['store']} | paired randomisation p, {pair} | {shown} | | | |")
        if r.get("hybrid_prf_feedback_stage"):
            out.append(f"| {r['store']} | default+hybrid-prf feedback stage | {r['hybrid_prf_feedback_stage']} | | | |")
    out += ["", "| Store | Embedder | Docs | Chunks | Apply | Knowledge | Keyword index | Vector index | "
                "search p50 | p90 | +prf p50 | +prf p90 | +hybrid-prf p50 | +hybrid-prf p90 | keyword p50 | prf p50 | "
                "embed p50 | vector p50 |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["cranfield"] + report.get("scale", []):
        lat = r["latency"]
        out.append(f"| {r['store']} | {r['embedder']} | {r.get('docs', '-')} | {r['chunks']} | {r['apply_s']:.1f} s | "
                   f"{r['knowledge_s']:.1f} s | {r['keyword_index_s']:.1f} s | {r['vector_index_s']:.1f} s | "
                   f"{lat['search_p50_ms']:.1f} ms | {lat['search_p90_ms']:.1f} ms | "
                   f"{lat['search_prf_p50_ms']:.1f} ms | {lat['search_prf_p90_ms']:.1f} ms | "
                   f"{lat.get('search_hybrid_prf_p50_ms', float('nan')):.1f} ms | "
                   f"{lat.get('search_hybrid_prf_p90_ms', float('nan')):.1f} ms | "
                   f"{lat['keyword_p50_ms']:.1f} ms | {lat['prf_p50_ms']:.1f} ms | "
                   f"{lat['embed_p50_ms']:.1f} ms | {lat['vector_p50_ms']:.1f} ms |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--embedder", default="auto")
    ap.add_argument("--scale", type=int, default=50_000)
    ap.add_argument("--scale-stores", default="sqlite")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--format", choices=("markdown", "json"), default="markdown")
    ap.add_argument("--save-json")
    add_pg_option(ap)
    args = ap.parse_args(argv)
    report: dict[str, Any] = {
        "command": "python benchmarks/bench_cranfield.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git": git_commit(),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}",
        "cranfield": [], "scale": []}
    for kind in filter(None, args.stores.split(",")):
        report["cranfield"].append(run_cranfield(kind, args.embedder, args.pg_url))
        print(json.dumps(report["cranfield"][-1]), file=sys.stderr)
    if not args.skip_scale:
        for kind in filter(None, args.scale_stores.split(",")):
            report["scale"].append(run_scale(kind, args.scale, args.pg_url))
            print(json.dumps(report["scale"][-1]), file=sys.stderr)
    if args.save_json:
        Path(args.save_json).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2) if args.format == "json" else markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
