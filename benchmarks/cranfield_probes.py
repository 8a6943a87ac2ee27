#!/usr/bin/env python
"""Two probes of the issue-6 gap on Cranfield (not part of the pytest run; SQLite store, MiniLM).

    python benchmarks/cranfield_probes.py [--db PATH] [--format markdown|json]

The default hybrid must beat the best single retriever (dense + Rocchio, NDCG@10 0.4007) by
10%: 0.4408. Two questions, each answered on the same lists as ``bench_cranfield.py``:

1. **How far can the fusion weight go?** The z-score reranker sums each list's z with weight
   1. Here the keyword list's z is weighted w (the vector list's 1), for the default's lists
   and for the hybrid-feedback lists, w in a grid. The best w is chosen *on the 225 test
   queries themselves*: an upper bound of what any fusion weight could give, not a result.
   At w = 1 the replica below must reproduce the pipeline's own NDCG@10 (checked and printed).
2. **Does MiniLM lose what lies past its training length?** all-MiniLM-L6-v2 was trained on
   128 word pieces; the index embeds each chunk whole (up to 256). Here every chunk is also
   embedded in windows of 126 word pieces (stride 63) and scored by its best window (MaxP),
   as a dense retriever alone and inside the default's fusion.

``--db``: reuse (or create) the Cranfield store at PATH; by default a temporary one (the
vector index takes ~30-150 s to build here, the windows about as long).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cranfield import (COLLECTION, apply_all, build, documents, load_cranfield, ndcg10,  # noqa: E402
                             one_per_section, paired_p)

from canon_ledger.application.retrieval.feedback import HYBRID  # noqa: E402
from canon_ledger.application.retrieval.fusion import rrf, wide  # noqa: E402
from canon_ledger.application.retrieval.ports import Hit  # noqa: E402
from canon_ledger.application.retrieval.rerank import MISSING_PENALTY  # noqa: E402
from canon_ledger.application.retrieval.search import LIST_DEPTH, HybridSearch  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

WEIGHTS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5)
WINDOW, STRIDE = 126, 63  # word pieces; 128 with [CLS] and [SEP]


def weighted_z(lists: dict[str, list[Hit]], weights: dict[str, float], top: int = 10) -> list[str]:
    """The default's fusion with a weight per list: RRF to the wide pool, z on each list's own
    scale, a missing candidate at the list's lowest z minus ``MISSING_PENALTY``, summed with
    the weights, then one place per section first (``bench_cranfield.one_per_section``)."""
    pool = rrf(lists, limit=wide(top))
    totals = {c.id: 0.0 for c in pool}
    for name, hits in lists.items():
        scores = [h.score for h in hits]
        mu, sigma = statistics.fmean(scores), statistics.pstdev(scores)
        floor = (min(scores) - mu) / sigma - MISSING_PENALTY
        for c in pool:
            s = c.scores.get(name)
            totals[c.id] += weights.get(name, 1.0) * ((s - mu) / sigma if s is not None else floor)
    ranked = sorted(pool, key=lambda c: -totals[c.id])  # stable: ties keep the fusion order
    return one_per_section([c.id for c in ranked], top)


def _windows(tokenizer: Any, text: str) -> list[str]:
    offsets = tokenizer.encode(text, add_special_tokens=False).offsets
    out = []
    for start in range(0, max(1, len(offsets)), STRIDE):
        part = offsets[start:start + WINDOW]
        if not part:
            break
        out.append(text[part[0][0]:part[-1][1]])
        if start + WINDOW >= len(offsets):
            break
    return out or [text]


def run(db: str) -> dict[str, Any]:
    import numpy as np
    from tokenizers import Tokenizer

    docs, queries, qrels = load_cranfield()
    fresh = not os.path.exists(db)
    services = bootstrap(f"sqlite:///{db}", embedder="minilm")
    try:
        if fresh:
            apply_all(services, [{"type": "ingest_document", "command_id": f"cran-{d['I']}", "collection_id": COLLECTION,
                                  "document_id": d["I"], "title": " ".join(d.get("T", "").split()) or f"Abstract {d['I']}",
                                  "text": d.get("W", "")} for d in docs])
            build(services)
        judged = [n for n in range(1, len(queries) + 1) if qrels.get(n)]
        gains = [qrels[n] for n in judged]
        pipeline = HybridSearch(services.embedder)
        lists: dict[int, dict[str, list[Hit]]] = {}
        fed: dict[int, dict[str, list[Hit]]] = {}  # the hybrid feedback's expanded lists
        pipeline_ndcg: dict[str, float] = {}
        with services.retrieval_reader.snapshot() as snap:
            runs: dict[str, list[list[str]]] = {"default": [], "default+hybrid-prf": []}
            for n in judged:
                q = queries[n - 1]
                [v] = services.embedder.embed([q])
                first = snap.keyword(q, [COLLECTION], LIST_DEPTH)
                lists[n] = {"keyword": first.hits, "vector": snap.vector(v, [COLLECTION], LIST_DEPTH)}
                fed[n] = _hybrid_lists(snap, q, v, first, lists[n])
                runs["default"].append([h.id for h in pipeline.search(snap, [COLLECTION], q, 10).hits])
                result = pipeline.search(snap, [COLLECTION], q, 10, feedback=HYBRID)
                runs["default+hybrid-prf"].append([h.id for h in result.hits])
            for name, rankings in runs.items():
                pipeline_ndcg[name] = statistics.fmean(ndcg10(documents(r), g) for r, g in zip(rankings, gains))

        def ndcg(rankings: list[list[str]]) -> list[float]:
            return [ndcg10(documents(r), g) for r, g in zip(rankings, gains)]

        sweep = []
        for w in WEIGHTS:
            plain = ndcg([weighted_z({"keyword": lists[n]["keyword"], "vector": lists[n]["vector"]}, {"keyword": w})
                          for n in judged])
            expanded = ndcg([weighted_z(fed[n], {"keyword": w}) for n in judged])
            sweep.append({"keyword_weight": w, "default": statistics.fmean(plain),
                          "hybrid_prf": statistics.fmean(expanded)})

        # MaxP windows
        tokenizer = Tokenizer.from_file(str(services.embedder.tokenizer_path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        with services.knowledge_reader.snapshot() as k:
            chunks = [c for t in k.topics(COLLECTION) for c in k.topic_chunks(COLLECTION, t.topic_id)]
        lengths = [len(tokenizer.encode(c.text).ids) for c in chunks]
        t0 = time.perf_counter()
        windows = {c.chunk_id: np.asarray(services.embedder.embed(_windows(tokenizer, c.text)), dtype=np.float32)
                   for c in chunks}
        embed_s = time.perf_counter() - t0
        ids = list(windows)
        maxp_runs, fused_runs = [], []
        for n in judged:
            qv = np.asarray(services.embedder.embed([queries[n - 1]])[0], dtype=np.float32)
            best = {cid: float((windows[cid] @ qv).max()) for cid in ids}
            top = sorted(ids, key=lambda c: (-best[c], c))[:LIST_DEPTH]
            maxp = [Hit(c, best[c]) for c in top]
            maxp_runs.append([h.id for h in maxp])
            fused_runs.append(weighted_z({"keyword": lists[n]["keyword"], "vector": maxp}, {}))
        dense = ndcg([[h.id for h in lists[n]["vector"]] for n in judged])
        maxp_scores = ndcg(maxp_runs)
        fused_scores = ndcg(fused_runs)
        return {
            "queries": len(judged), "chunks": len(chunks),
            "chunks_over_128_word_pieces": sum(x > 128 for x in lengths),
            "median_word_pieces": statistics.median(lengths),
            "pipeline_ndcg10": pipeline_ndcg,
            "replica_at_weight_1": {"default": next(s["default"] for s in sweep if s["keyword_weight"] == 1.0),
                                    "hybrid_prf": next(s["hybrid_prf"] for s in sweep if s["keyword_weight"] == 1.0)},
            "weight_sweep": sweep,
            "maxp": {"windows": sum(len(w) for w in windows.values()), "embed_s": round(embed_s, 1),
                     "dense_ndcg10": statistics.fmean(dense), "dense_maxp_ndcg10": statistics.fmean(maxp_scores),
                     "p_maxp_vs_dense": paired_p(maxp_scores, dense),
                     "default_with_maxp_ndcg10": statistics.fmean(fused_scores)},
        }
    finally:
        services.close()


def _hybrid_lists(snap: Any, query: str, vector: list[float], first: Any,
                  plain: dict[str, list[Hit]]) -> dict[str, list[Hit]]:
    """The two expanded lists the pipeline's hybrid feedback fuses in its second pass."""
    from canon_ledger.application.retrieval.rerank import rerank
    from canon_ledger.application.retrieval.search import _hybrid_feedback

    lists = dict(plain)
    pool = rrf(lists, limit=wide(10))
    docs = snap.docs([c.id for c in pool])
    ranked = rerank(query, pool, len(pool), texts={i: d.text for i, d in docs.items()},
                    list_scores={name: [h.score for h in hits] for name, hits in lists.items()}).candidates
    expanded, _ = _hybrid_feedback(snap, [COLLECTION], vector, first, lists, ranked, docs, LIST_DEPTH)
    return expanded


def markdown(r: dict[str, Any]) -> str:
    out = [f"- {r['queries']} queries, {r['chunks']:,} chunks ({r['chunks_over_128_word_pieces']:,} over 128 word "
           f"pieces; median {r['median_word_pieces']})",
           f"- Pipeline NDCG@10: default {r['pipeline_ndcg10']['default']:.4f}, default+hybrid-prf "
           f"{r['pipeline_ndcg10']['default+hybrid-prf']:.4f}; the replica at weight 1: "
           f"{r['replica_at_weight_1']['default']:.4f} / {r['replica_at_weight_1']['hybrid_prf']:.4f}",
           "", "| keyword weight | default | default+hybrid-prf |", "|--:|--:|--:|"]
    out += [f"| {s['keyword_weight']} | {s['default']:.4f} | {s['hybrid_prf']:.4f} |" for s in r["weight_sweep"]]
    m = r["maxp"]
    out += ["", f"- MaxP ({m['windows']:,} windows, embedded in {m['embed_s']} s): dense {m['dense_ndcg10']:.4f} -> "
                f"{m['dense_maxp_ndcg10']:.4f} (p {m['p_maxp_vs_dense']:.3f}); default with the MaxP list "
                f"{m['default_with_maxp_ndcg10']:.4f}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="SQLite file of the Cranfield store (reused if it exists)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="canon_probe_") as folder:
        report = run(args.db or os.path.join(folder, "cranfield.db"))
    print(json.dumps(report, indent=2) if args.format == "json" else markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
