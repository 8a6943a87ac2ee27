#!/usr/bin/env python
"""Retrieval defaults chosen on held-out data: 5-fold cross-validation on Cranfield (issue 21).

    python benchmarks/cv_cranfield.py [--db PATH] [--db-128 PATH] [--tokens 256,128]
                                      [--format markdown|json] [--save-json PATH] [--quick]

Not part of the pytest run (``tests/unit/test_cv_folds.py`` pins the fold split).

Store. ``bench_cranfield``'s ingest (one ``ingest_document`` per abstract, the real command
path, atomic batches of 100, then the projections catch up) into a SQLite store with the
default install's embedder, the packaged all-MiniLM-L6-v2 int8. ``--db PATH`` reuses (or
creates) the store whose vectors were embedded with a 256-token truncation; ``--db-128 PATH``
(default: PATH with ``-128`` before its suffix) the one embedded at 128 tokens (the embedder's
"chunk length": the chunks are the same, MiniLM reads only their first 128 or 256 word
pieces). A reused store is checked: one long chunk is embedded again at its truncation and must
match its stored vector. Without ``--db`` both stores are temporary.

Lists read once. Each query's keyword (BM25) and dense (cosine) lists are read once, 300 deep,
through the store's own snapshot; ``CachedSnapshot`` then answers every retrieval call of
``HybridSearch.search`` from memory (a list truncated to the depth asked; a deeper or new read
goes to the store once and is kept: RM3's expanded queries, Rocchio's refined vectors, their
term statistics and stored vectors, docs). So a configuration costs only fusion, rerank and
selection, and every configuration runs through the real ``HybridSearch.search``. A check
runs the old default through the store's own snapshot for every query and compares rankings.

Candidates (``grid``): every combination of
- fusion: ``zscore`` (every candidate of both lists, summed z-score), ``rrf+zscore`` (RRF k 60
  keeps ``pool_factor`` x ``top_k``, then summed z-score), ``rrf`` (RRF alone, k in ``RRF_KS``);
- the z-score's missing rule (``missing_penalty``): the list's mean, or its lowest z minus 0,
  0.5, 1 or 2 sd;
- the RRF pool factor (``rrf+zscore``): 2, 3, 5, 10;
- list depth: 30, 50, 100, 200, 300 (a depth below the RRF pool at ``top_k`` 10 is read at the
  pool's depth, as ``HybridSearch`` does: such a pair is left out, its twin is in the grid);
- selection: one place per section first, or rank order;
- feedback: off (what ``alone`` does beside a vector list), ``always`` (RM3 before fusion),
  ``hybrid`` (RM3 + Rocchio from the fused first pass, fused again); ``hybrid`` over a smaller
  grid (``HYBRID_GRID``: missing mean / lowest - 0.5 / - 1 sd, pool 3x / 5x, RRF k 60, depth
  100, one place per section), its expansions being new store reads for each first pass;
- MiniLM truncation: 256 or 128 tokens.

Folds (``folds``): queries 1..225 (numbered by position in ``cran.qry``, as bench_cranfield)
shuffled with ``random.Random(SEED)`` and dealt round-robin into 5 folds of 45. For each fold,
the configuration with the best mean NDCG@10 over the other four folds (ties: the first in grid
order, which starts with plain z-score) is scored on the held-out fold. Reported for each run:
the mean over the 5 held-out folds of each fold's mean, their standard deviation (sample, n-1)
and the per-fold values, for NDCG@10, MRR@10 (top 10) and Recall@100 (``top_k`` 100, chunks
to abstracts as bench_cranfield's ``documents``). Runs:
- keyword, dense: the 300-deep lists as ranked;
- plain z-score: each list's top 100 z-normalised by its own mean and population sd, summed; a
  document absent from a list adds 0 (ranx's ``zmuv`` + CombSUM), computed directly with
  ``rerank.zscore_order`` (checked equal to ``HybridSearch(fusion="zscore", missing_penalty=None,
  depth=100)``, which selects one place per section: on Cranfield an abstract is one section);
- RRF: k 60 over the same two top-100 lists;
- old default: ``HybridSearch`` as it was before issue 21 (RRF k 60 to 3 x top_k, z-score on
  the lists' scale, a missing hit at the lowest z - 1 sd, lists 100 deep, one per section);
- default (CV): on each fold, the configuration chosen on the other four;
- shipped default: ``HybridSearch()``'s defaults as they are in the tree now (a fixed
  configuration; if it was chosen on all 225 queries its numbers are not held-out).
Plus a paired randomisation test (bench_cranfield's ``paired_p``: two-sided, 10,000 sign
flips, seeded) of the CV default's per-query held-out scores against plain z-score's, and the
same for the keyword-only fallback's RM3 (``HybridSearch(None)``, ``alone`` against ``off``,
chosen by the same folds). Progress goes to stderr; ``--quick`` runs a tiny grid (a smoke test).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cranfield import (COLLECTION, apply_all, build, documents, ingest_commands,  # noqa: E402
                             load_cranfield, mrr10, ndcg10, paired_p, recall100)
from common import add_output_options, emit, git_commit  # noqa: E402

from canon_ledger.application.retrieval.feedback import ALONE, ALWAYS, HYBRID, OFF  # noqa: E402
from canon_ledger.application.retrieval.fusion import RRF, RRF_ZSCORE, ZSCORE, rrf  # noqa: E402
from canon_ledger.application.retrieval.ports import Hit  # noqa: E402
from canon_ledger.application.retrieval.rerank import at_mean, zscore_order  # noqa: E402
from canon_ledger.application.retrieval.search import HybridSearch  # noqa: E402
from canon_ledger.application.retrieval.ports import Doc, KeywordResult, TermStats  # noqa: E402

QUERIES = 225
FOLDS = 5
SEED = 21  # the number: fixed before any configuration was scored
READ_DEPTH = 300  # each list is read this deep once; deeper reads go to the store
PLAIN_DEPTH = 100  # plain z-score and RRF fuse each list's top 100
TOKENS = (256, 128)

MISSING = (None, 0.0, 0.5, 1.0, 2.0)  # None: the list's mean
POOL_FACTORS = (2, 3, 5, 10)
RRF_KS = (10, 30, 60, 100)
DEPTHS = (30, 50, 100, 200, 300)
SELECTIONS = (True, False)
FEEDBACK = (OFF, ALWAYS)
HYBRID_GRID = {"missing": (None, 0.5, 1.0), "pool_factors": (3, 5), "rrf_ks": (60,), "depths": (100,),
               "selections": (True,)}


def folds(n: int = QUERIES, k: int = FOLDS, seed: int = SEED) -> list[list[int]]:
    """Queries 1..n shuffled with ``random.Random(seed)``, dealt round-robin into ``k`` folds
    (each sorted): disjoint, covering 1..n, sizes differing by at most one."""
    order = list(range(1, n + 1))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


# -- configurations -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    fusion: str = RRF_ZSCORE
    rrf_k: int = 60
    pool_factor: int = 3
    missing: float | None = 1.0
    depth: int = 100
    per_section: bool = True
    feedback: str = OFF
    tokens: int = 256

    def pipeline(self, embedder: Any) -> HybridSearch:
        return HybridSearch(embedder, fusion=self.fusion, rrf_k=self.rrf_k, pool_factor=self.pool_factor,
                            missing_penalty=self.missing, depth=self.depth, per_section=self.per_section,
                            feedback=self.feedback)

    def key(self, top_k: int = 10) -> tuple[Any, ...]:
        """What decides the result at ``top_k``: parameters a fusion method ignores are left out,
        and the depth is the one read."""
        pipeline = self.pipeline(None)
        pool = pipeline.pool(top_k)
        depth = max(self.depth, top_k if pool is None else pool)
        missing = "-" if self.fusion == RRF else self.missing
        k = self.rrf_k if self.fusion == RRF else "-"  # RRF's k orders zscore's ties only
        return (self.fusion, k, pool, missing, depth, self.per_section, self.feedback, self.tokens)

    @property
    def name(self) -> str:
        parts = [self.fusion]
        if self.fusion == RRF:
            parts.append(f"k={self.rrf_k}")
        if self.fusion != ZSCORE:
            parts.append(f"pool={self.pool_factor}x")
        if self.fusion != RRF:
            parts.append("missing=mean" if self.missing is None else f"missing=lowest-{self.missing:g}sd")
        parts += [f"depth={self.depth}", "per-section" if self.per_section else "rank-order",
                  f"feedback={self.feedback}", f"{self.tokens}t"]
        return " ".join(parts)


PLAIN = Config(ZSCORE, 60, 3, None, PLAIN_DEPTH, True, OFF, 256)  # plain z-score, through HybridSearch
OLD_DEFAULT = Config(RRF_ZSCORE, 60, 3, 1.0, 100, True, OFF, 256)  # HybridSearch before issue 21


def shipped() -> Config:
    """``HybridSearch()``'s defaults as they are now (feedback ``alone`` is ``off`` beside a vector
    list), at the shipped MiniLM truncation."""
    from canon_ledger.infrastructure.providers.minilm import MAX_TOKENS

    d = HybridSearch(None)
    return Config(d.fusion, d.rrf_k, d.pool_factor, d.missing_penalty, d.depth, d.per_section,
                  OFF if d.feedback == ALONE else d.feedback, MAX_TOKENS)


def grid(tokens: Sequence[int] = TOKENS, quick: bool = False) -> list[Config]:
    """Every candidate configuration, plain z-score first; one per distinct ``key``."""
    def fusions(missing: Sequence[float | None], factors: Sequence[int], ks: Sequence[int]) -> list[tuple]:
        out = [(ZSCORE, 60, 3, m) for m in missing]
        out += [(RRF_ZSCORE, 60, f, m) for f in factors for m in missing]
        out += [(RRF, k, 3, None) for k in ks]
        return out

    if quick:
        full = fusions((None, 1.0), (3,), (60,))
        depths, selections, feedback, hybrid = (100,), (True, False), (OFF,), dict(HYBRID_GRID, missing=(None,))
    else:
        full, depths, selections, feedback, hybrid = (fusions(MISSING, POOL_FACTORS, RRF_KS), DEPTHS, SELECTIONS,
                                                     FEEDBACK, HYBRID_GRID)
    configs = [PLAIN]
    for t in tokens:
        for fb in feedback:
            for (fusion, k, factor, missing), depth, per_section in itertools.product(full, depths, selections):
                configs.append(Config(fusion, k, factor, missing, depth, per_section, fb, t))
        for (fusion, k, factor, missing), depth, per_section in itertools.product(
                fusions(hybrid["missing"], hybrid["pool_factors"], hybrid["rrf_ks"]), hybrid["depths"],
                hybrid["selections"]):
            configs.append(Config(fusion, k, factor, missing, depth, per_section, HYBRID, t))
    seen: set[tuple] = set()
    out = []
    for c in configs:
        pool = c.pipeline(None).pool(10)
        if pool is not None and c.depth < pool:  # read at the pool's depth: the same as depth = pool
            continue
        if c.tokens in tokens and c.key() not in seen:
            seen.add(c.key())
            out.append(c)
    return out


# -- the cached snapshot --------------------------------------------------------------------------
class CachedEmbedder:
    """The query embedder, each text embedded once."""

    uses_quota = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self._cache: dict[str, list[float]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.inner.embed(missing)))
        return [list(self._cache[t]) for t in texts]


class CachedSnapshot:
    """A ``RetrievalSnapshot`` over a real one: each distinct read goes to the store once, at least
    ``READ_DEPTH`` deep, and a shallower read is the stored list truncated (both stores order
    ties by id, so a truncated list is the shallower read). Counts its store reads."""

    def __init__(self, snap: Any) -> None:
        self.snap = snap
        self.vector_model = snap.vector_model
        self.reads = 0
        self._keyword: dict[tuple, tuple[int, KeywordResult]] = {}
        self._weighted: dict[tuple, tuple[int, list[Hit]]] = {}
        self._vector: dict[tuple, tuple[int, list[Hit]]] = {}
        self._stats: dict[tuple, TermStats] = {}
        self._vectors: dict[str, list[float] | None] = {}
        self._docs: dict[str, Doc | None] = {}
        self._overview: dict[str, Doc | None] = {}

    def _deep(self, cache: dict, key: tuple, limit: int, read: Any) -> Any:
        got = cache.get(key)
        if got is None or (limit > got[0] and _length(got[1]) >= got[0]):
            depth = max(limit, READ_DEPTH)
            self.reads += 1
            got = (depth, read(depth))
            cache[key] = got
        return got[1]

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int, below: str | None = None) -> KeywordResult:
        assert below is None
        result = self._deep(self._keyword, (query, tuple(collection_ids)), limit,
                            lambda depth: self.snap.keyword(query, list(collection_ids), depth))
        return KeywordResult(result.hits[:limit], list(result.terms), result.method)

    def keyword_weighted(self, weights: Mapping[str, float], collection_ids: Sequence[str], limit: int,
                         below: str | None = None) -> list[Hit]:
        assert below is None
        key = (tuple(sorted(weights.items())), tuple(collection_ids))
        return self._deep(self._weighted, key, limit,
                          lambda depth: self.snap.keyword_weighted(dict(weights), list(collection_ids), depth))[:limit]

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> list[Hit]:
        assert below is None
        key = (tuple(float(v) for v in query_vector), tuple(collection_ids))
        return self._deep(self._vector, key, limit,
                          lambda depth: self.snap.vector(list(query_vector), list(collection_ids), depth))[:limit]

    def term_stats(self, doc_ids: Sequence[str], collection_ids: Sequence[str]) -> TermStats:
        key = (frozenset(doc_ids), tuple(collection_ids))  # the statistics do not depend on the order asked
        if key not in self._stats:
            self.reads += 1
            self._stats[key] = self.snap.term_stats(list(doc_ids), list(collection_ids))
        return self._stats[key]

    def vectors(self, ids: Sequence[str], collection_ids: Sequence[str]) -> dict[str, list[float]]:
        unread = [i for i in dict.fromkeys(ids) if i not in self._vectors]
        if unread:
            self.reads += 1
            got = self.snap.vectors(unread, list(collection_ids))
            self._vectors.update({i: got.get(i) for i in unread})
        return {i: list(self._vectors[i]) for i in ids if self._vectors.get(i) is not None}

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        unread = [i for i in dict.fromkeys(ids) if i not in self._docs]
        if unread:
            self.reads += 1
            got = self.snap.docs(unread)
            self._docs.update({i: got.get(i) for i in unread})
        return {i: self._docs[i] for i in ids if self._docs.get(i) is not None}

    def overview(self, collection_id: str) -> Doc | None:
        if collection_id not in self._overview:
            self.reads += 1
            self._overview[collection_id] = self.snap.overview(collection_id)
        return self._overview[collection_id]


def _length(value: Any) -> int:
    return len(value.hits) if isinstance(value, KeywordResult) else len(value)


# -- stores ---------------------------------------------------------------------------------------
def embedder_at(tokens: int) -> Any:
    """The default install's MiniLM, truncating at ``tokens`` word pieces."""
    from canon_ledger.infrastructure.providers.minilm import minilm

    e = minilm()
    e.max_tokens = tokens  # read when the model loads, on the first embed
    return e


def open_store(path: str, tokens: int, docs: list[dict[str, str]]) -> tuple[Any, dict[str, Any]]:
    """(services, build facts) of the Cranfield store at ``path``, made if absent."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    fresh = not os.path.exists(path)
    embedder = embedder_at(tokens)
    services = bootstrap(f"sqlite:///{path}", embedder=embedder)
    facts: dict[str, Any] = {"path": path, "tokens": tokens, "built": fresh}
    if fresh:
        _log(f"building the {tokens}-token store at {path} (ingest, then the index build)")
        facts["apply_s"] = apply_all(services, ingest_commands(docs))
        facts.update(build(services))
        _log(f"  built: vector index {facts['vector_index_s']:.1f} s")
    else:
        build(services)  # a no-op when current
    with services.knowledge_reader.snapshot() as k:
        chunks = [c for t in k.topics(COLLECTION) for c in k.topic_chunks(COLLECTION, t.topic_id)]
    facts["chunks"] = len(chunks)
    longest = max(chunks, key=lambda c: len(c.text))
    [again] = embedder.embed([longest.text])
    with services.retrieval_reader.snapshot() as snap:
        stored = snap.vectors([longest.chunk_id], [COLLECTION])[longest.chunk_id]
    cosine = sum(a * b for a, b in zip(again, stored))
    if cosine < 0.999:
        raise SystemExit(f"{path}: its vectors were not embedded at {tokens} tokens (cosine {cosine:.4f} for "
                         f"{longest.chunk_id}); remove it or pass another path")
    return services, facts


# -- evaluation -----------------------------------------------------------------------------------
@dataclass
class Scored:
    ndcg: list[float]  # per query, in query order (1..225)
    mrr: list[float]
    recall: list[float] | None = None


def score(rankings: Sequence[Sequence[str]], gains: Sequence[dict[str, int]]) -> tuple[list[float], list[float]]:
    return ([ndcg10(r, g) for r, g in zip(rankings, gains)], [mrr10(r, g) for r, g in zip(rankings, gains)])


def run_config(config: Config, snaps: Mapping[int, CachedSnapshot], embedders: Mapping[int, CachedEmbedder],
               queries: Sequence[str], numbers: Sequence[int], top_k: int) -> list[list[str]]:
    """Each query's ranked abstracts from ``HybridSearch.search`` with ``config``."""
    pipeline = config.pipeline(embedders[config.tokens])
    snap = snaps[config.tokens]
    return [documents([h.id for h in pipeline.search(snap, [COLLECTION], queries[n - 1], top_k).hits])
            for n in numbers]


def plain_runs(lists: Mapping[int, Mapping[str, list[Hit]]], numbers: Sequence[int]) -> dict[str, list[list[str]]]:
    """keyword, dense, plain z-score and RRF rankings (abstracts), from the cached lists."""
    out: dict[str, list[list[str]]] = {"keyword": [], "dense": [], "plain z-score": [], "rrf": []}
    for n in numbers:
        kw, dense = lists[n]["keyword"], lists[n]["vector"]
        top = {"keyword": kw[:PLAIN_DEPTH], "vector": dense[:PLAIN_DEPTH]}
        out["keyword"].append(documents([h.id for h in kw]))
        out["dense"].append(documents([h.id for h in dense]))
        scales = {name: [h.score for h in hits] for name, hits in top.items()}
        out["plain z-score"].append(documents([c.id for c in zscore_order(rrf(top), at_mean, scales)]))
        out["rrf"].append(documents([c.id for c in rrf(top, k=60)]))
    return out


def fold_stats(values: Sequence[float], split: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Per-fold means of a per-query metric (indexed by query number - 1), their mean and sd."""
    per_fold = [statistics.fmean(values[n - 1] for n in fold) for fold in split]
    return {"mean": statistics.fmean(per_fold), "std": statistics.stdev(per_fold), "folds": per_fold}


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    times: dict[str, float] = {}
    docs, queries, qrels = load_cranfield()
    numbers = list(range(1, len(queries) + 1))
    assert len(numbers) == QUERIES and all(qrels.get(n) for n in numbers), "every Cranfield query is judged"
    gains = [qrels[n] for n in numbers]
    split = folds()
    tokens = [int(t) for t in args.tokens.split(",")]
    shipped_config = shipped()
    with tempfile.TemporaryDirectory(prefix="canon_cv_") as folder:
        base = args.db or os.path.join(folder, "cranfield.db")
        paths = {256: base, 128: args.db_128 or f"{os.path.splitext(base)[0]}-128{os.path.splitext(base)[1] or '.db'}"}
        services: dict[int, Any] = {}
        stores: dict[int, dict[str, Any]] = {}
        try:
            for t in tokens:
                t0 = time.perf_counter()
                services[t], stores[t] = open_store(paths[t], t, docs)
                times[f"store_{t}_s"] = time.perf_counter() - t0
            return _evaluate(args, services, stores, tokens, queries, numbers, gains, split, shipped_config,
                             times, started)
        finally:
            for s in services.values():
                s.close()


def _evaluate(args: argparse.Namespace, services: Mapping[int, Any], stores: Mapping[int, Any], tokens: list[int],
              queries: list[str], numbers: list[int], gains: list[dict[str, int]], split: list[list[int]],
              shipped_config: Config, times: dict[str, float], started: float) -> dict[str, Any]:
    from contextlib import ExitStack

    with ExitStack() as stack:
        raw = {t: stack.enter_context(services[t].retrieval_reader.snapshot()) for t in tokens}
        snaps = {t: CachedSnapshot(raw[t]) for t in tokens}
        embedders = {t: CachedEmbedder(services[t].embedder) for t in tokens}
        t0 = time.perf_counter()
        lists: dict[int, dict[int, dict[str, list[Hit]]]] = {t: {} for t in tokens}
        for t in tokens:
            for n in numbers:
                q = queries[n - 1]
                [v] = embedders[t].embed([q])
                lists[t][n] = {"keyword": snaps[t].keyword(q, [COLLECTION], READ_DEPTH).hits,
                               "vector": snaps[t].vector(v, [COLLECTION], READ_DEPTH)}
                snaps[t].docs([h.id for hits in lists[t][n].values() for h in hits])
        times["read_lists_s"] = time.perf_counter() - t0
        _log(f"lists read: {len(numbers)} queries x {len(tokens)} store(s), {times['read_lists_s']:.1f} s")

        # The cache changes nothing: the old default through the store's own snapshot.
        t0 = time.perf_counter()
        base = 256 if 256 in tokens else tokens[0]
        direct = OLD_DEFAULT.pipeline(services[base].embedder)
        same = sum(documents([h.id for h in direct.search(raw[base], [COLLECTION], queries[n - 1], 10).hits]) == r
                   for n, r in zip(numbers, run_config(OLD_DEFAULT, snaps, embedders, queries, numbers, 10)))
        times["cache_check_s"] = time.perf_counter() - t0
        _log(f"cache check: the old default through the store's snapshot = through the cache on {same}/{len(numbers)}")

        # Fixed runs.
        fixed_rankings = plain_runs(lists[base], numbers)
        fixed: dict[str, Scored] = {}
        for name, rankings in fixed_rankings.items():
            fixed[name] = Scored(*score(rankings, gains), [recall100(r, g) for r, g in zip(rankings, gains)])
        other_tokens = {}  # dense and plain z-score with the other truncation(s): not table rows
        for t in tokens:
            if t != base:
                for name, rankings in plain_runs(lists[t], numbers).items():
                    if name in ("dense", "plain z-score"):
                        other_tokens[f"{name}, {t} tokens"] = Scored(
                            *score(rankings, gains), [recall100(r, g) for r, g in zip(rankings, gains)])
        plain_via_pipeline = run_config(PLAIN, snaps, embedders, queries, numbers, 10)
        plain_same = sum(a == b[:len(a)] for a, b in zip(plain_via_pipeline, fixed_rankings["plain z-score"]))
        _log(f"plain z-score through HybridSearch = computed directly on {plain_same}/{len(numbers)} (top 10)")

        # The grid, at top 10.
        configs = grid(tokens, args.quick)
        t0 = time.perf_counter()
        results: dict[Config, Scored] = {}
        reads_before = sum(s.reads for s in snaps.values())
        per_feedback: dict[str, float] = {}
        for i, c in enumerate(configs):
            t1 = time.perf_counter()
            results[c] = Scored(*score(run_config(c, snaps, embedders, queries, numbers, 10), gains))
            per_feedback[c.feedback] = per_feedback.get(c.feedback, 0.0) + time.perf_counter() - t1
            if (i + 1) % 50 == 0 or i + 1 == len(configs):
                _log(f"grid: {i + 1}/{len(configs)} configurations, {time.perf_counter() - t0:.0f} s")
        times["grid_s"] = time.perf_counter() - t0
        times.update({f"grid_{fb}_s": s for fb, s in per_feedback.items()})
        store_reads = sum(s.reads for s in snaps.values()) - reads_before

        # Cross-validation.
        chosen: list[Config] = []
        held_ndcg, held_mrr = [0.0] * len(numbers), [0.0] * len(numbers)
        train_best: list[float] = []
        for f, fold in enumerate(split):
            train = [n for g, other in enumerate(split) if g != f for n in other]
            best = max(configs, key=lambda c: (statistics.fmean(results[c].ndcg[n - 1] for n in train),
                                               -configs.index(c)))
            chosen.append(best)
            train_best.append(statistics.fmean(results[best].ndcg[n - 1] for n in train))
            for n in fold:
                held_ndcg[n - 1], held_mrr[n - 1] = results[best].ndcg[n - 1], results[best].mrr[n - 1]
            _log(f"fold {f + 1}: chose {best.name} (train NDCG@10 {train_best[-1]:.4f})")
        all_best = max(configs, key=lambda c: (statistics.fmean(results[c].ndcg), -configs.index(c)))

        def cv_within(subset: list[Config]) -> dict[str, Any]:
            """The same cross-validation with the choice restricted to ``subset``: held-out NDCG@10."""
            held, names = [0.0] * len(numbers), []
            for f, fold in enumerate(split):
                train = [n for g, other in enumerate(split) if g != f for n in other]
                best = max(subset, key=lambda c: (statistics.fmean(results[c].ndcg[n - 1] for n in train),
                                                  -configs.index(c)))
                names.append(best.name)
                for n in fold:
                    held[n - 1] = results[best].ndcg[n - 1]
            return {**fold_stats(held, split), "chosen": names, "configurations": len(subset), "per_query": held}

        levers: dict[str, dict[str, Any]] = {}
        for lever, value_of in (("fusion", lambda c: c.fusion), ("feedback", lambda c: c.feedback),
                                ("tokens", lambda c: c.tokens), ("per_section", lambda c: c.per_section),
                                ("depth", lambda c: c.depth),
                                ("missing", lambda c: None if c.fusion == RRF else
                                 ("mean" if c.missing is None else c.missing)),
                                ("pool_factor", lambda c: c.pool_factor if c.fusion == RRF_ZSCORE else None)):
            values = sorted({value_of(c) for c in configs if value_of(c) is not None}, key=str)
            if len(values) > 1:
                levers[lever] = {str(v): cv_within([c for c in configs if value_of(c) == v]) for v in values}

        # Recall@100 (top_k 100) for what is reported.
        t0 = time.perf_counter()
        deep: dict[Config, dict[int, float]] = {}

        def recall_of(config: Config, only: Sequence[int]) -> dict[int, float]:
            have = deep.setdefault(config, {})
            todo = [n for n in only if n not in have]
            for n, r in zip(todo, run_config(config, snaps, embedders, queries, todo, 100)):
                have[n] = recall100(r, gains[n - 1])
            return have

        held_recall = [0.0] * len(numbers)
        for f, fold in enumerate(split):
            got = recall_of(chosen[f], fold)
            for n in fold:
                held_recall[n - 1] = got[n]
        for config in (OLD_DEFAULT, shipped_config, all_best):
            if config.tokens in tokens:
                recall_of(config, numbers)
        times["recall_s"] = time.perf_counter() - t0

        def as_scored(config: Config) -> Scored:
            r = results.get(config)
            if r is None:  # not in the grid (e.g. --quick): run it
                r = results[config] = Scored(*score(run_config(config, snaps, embedders, queries, numbers, 10), gains))
            return Scored(r.ndcg, r.mrr, [deep[config][n] for n in numbers])

        rows: dict[str, Scored] = {**fixed, "old default": as_scored(OLD_DEFAULT),
                                   "default (CV: chosen on the other folds)": Scored(held_ndcg, held_mrr, held_recall)}
        if shipped_config.tokens in tokens:
            rows["shipped default (HybridSearch())"] = as_scored(shipped_config)
        table = {name: {metric: fold_stats(getattr(s, attr), split)
                        for metric, attr in (("ndcg10", "ndcg"), ("mrr10", "mrr"), ("recall100", "recall"))}
                 for name, s in rows.items()}

        # Keyword-only fallback: RM3 on (alone) or off, chosen by the same folds.
        kw_only = {}
        for mode in (OFF, ALONE):
            pipeline = HybridSearch(None, feedback=mode)
            kw_only[mode] = Scored(*score([documents([h.id for h in pipeline.search(
                snaps[base], [COLLECTION], queries[n - 1], 10).hits]) for n in numbers], gains))
        kw_choice, kw_held = [], [0.0] * len(numbers)
        for f, fold in enumerate(split):
            train = [n for g, other in enumerate(split) if g != f for n in other]
            mode = max((OFF, ALONE), key=lambda m: (statistics.fmean(kw_only[m].ndcg[n - 1] for n in train),
                                                     m == OFF))
            kw_choice.append(mode)
            for n in fold:
                kw_held[n - 1] = kw_only[mode].ndcg[n - 1]

        cv = rows["default (CV: chosen on the other folds)"]
        plain = rows["plain z-score"]
        tests = {
            "default (CV) vs plain z-score, NDCG@10": _test(cv.ndcg, plain.ndcg),
            "default (CV) vs plain z-score, MRR@10": _test(cv.mrr, plain.mrr),
            "default (CV) vs plain z-score, Recall@100": _test(cv.recall, plain.recall),
            "old default vs plain z-score, NDCG@10": _test(rows["old default"].ndcg, plain.ndcg),
            "keyword-only: RM3 (CV) vs off, NDCG@10": _test(kw_held, kw_only[OFF].ndcg),
        }
        if "shipped default (HybridSearch())" in rows:
            shipped_row = rows["shipped default (HybridSearch())"]
            tests["shipped default vs plain z-score, NDCG@10"] = _test(shipped_row.ndcg, plain.ndcg)
        # Each lever's values against the shipped default's value, both chosen by the same folds.
        value = {"fusion": shipped_config.fusion, "feedback": shipped_config.feedback, "tokens": shipped_config.tokens,
                 "per_section": shipped_config.per_section, "depth": shipped_config.depth,
                 "missing": "mean" if shipped_config.missing is None else shipped_config.missing,
                 "pool_factor": shipped_config.pool_factor}
        lever_pairs = {}
        for lever, values in levers.items():
            mine = values.get(str(value[lever]))
            for v, d in values.items():
                if mine is not None and v != str(value[lever]):
                    lever_pairs[f"{lever}={v} vs {lever}={value[lever]}"] = _test(d["per_query"], mine["per_query"])
        # The truncation, configuration by configuration (in-sample: the same settings at 128 and 256).
        twins = [(results[c].ndcg, results[replace(c, tokens=128)].ndcg) for c in configs
                 if c.tokens == 256 and replace(c, tokens=128) in results]
        twin_diffs = [statistics.fmean(b) - statistics.fmean(a) for a, b in twins]
        # The best of each family on all 225 queries (in-sample: what each lever can reach).
        families: dict[str, tuple[Config, float]] = {}
        for c in configs:
            for family in (f"fusion={c.fusion}", f"feedback={c.feedback}", f"tokens={c.tokens}",
                           f"per_section={c.per_section}", f"depth={c.depth}",
                           f"missing={'mean' if c.missing is None else c.missing}" if c.fusion != RRF else "",
                           f"pool_factor={c.pool_factor}" if c.fusion == RRF_ZSCORE else ""):
                if family:
                    m = statistics.fmean(results[c].ndcg)
                    if family not in families or m > families[family][1]:
                        families[family] = (c, m)
        # What a search costs through the store's own snapshot (no cache; the query vector is
        # embedded already), the old and the shipped default alternating per query.
        latency: dict[str, list[float]] = {"old default": [], "shipped default": []}
        if shipped_config.tokens in tokens:
            pipelines = {"old default": (OLD_DEFAULT.pipeline(embedders[base]), raw[base]),
                         "shipped default": (shipped_config.pipeline(embedders[shipped_config.tokens]),
                                             raw[shipped_config.tokens])}
            for n in numbers:
                for name, (pipeline, snap) in pipelines.items():
                    t1 = time.perf_counter()
                    pipeline.search(snap, [COLLECTION], queries[n - 1], 10)
                    latency[name].append(1000 * (time.perf_counter() - t1))
        search_ms = {name: {"p50": statistics.median(v), "p90": sorted(v)[int(0.9 * len(v))],
                            "mean": statistics.fmean(v)} for name, v in latency.items() if v}
        times["total_s"] = time.perf_counter() - started
        return {
            "command": "python benchmarks/cv_cranfield.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "git": git_commit(),
            "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}",
            "embedder": services[base].embedder.name, "stores": {str(t): stores[t] for t in tokens},
            "queries": len(numbers), "folds": split, "seed": SEED,
            "grid": {"configurations": len(configs), "missing": ["mean" if m is None else m for m in MISSING],
                     "pool_factors": POOL_FACTORS, "rrf_ks": RRF_KS, "depths": DEPTHS,
                     "selections": ["per-section", "rank-order"], "feedback": FEEDBACK,
                     "hybrid_grid": {k: [("mean" if v is None else v) for v in vs] for k, vs in HYBRID_GRID.items()},
                     "tokens": tokens, "quick": bool(args.quick), "store_reads_during_grid": store_reads},
            "cache_check_identical": same, "plain_via_pipeline_identical": plain_same,
            "table": table,
            "chosen": [{"fold": f + 1, "config": asdict(c), "name": c.name, "train_ndcg10": train_best[f]}
                       for f, c in enumerate(chosen)],
            "best_on_all_225": {"config": asdict(all_best), "name": all_best.name,
                                "ndcg10": statistics.fmean(results[all_best].ndcg)},
            "shipped": {"config": asdict(shipped_config), "name": shipped_config.name,
                        "in_grid": shipped_config in results},
            "family_best_in_sample": {k: {"name": c.name, "ndcg10": m} for k, (c, m) in sorted(families.items())},
            "levers": {lever: {v: {k: x for k, x in d.items() if k != "per_query"} for v, d in values.items()}
                       for lever, values in levers.items()},
            "lever_tests": {f"{lever}={v} vs plain z-score": _test(d["per_query"], plain.ndcg)
                            for lever, values in levers.items() for v, d in values.items()},
            "keyword_only": {"chosen": kw_choice, "held_out_ndcg10": fold_stats(kw_held, split),
                             "off_ndcg10": fold_stats(kw_only[OFF].ndcg, split),
                             "rm3_ndcg10": fold_stats(kw_only[ALONE].ndcg, split)},
            "paired_p": tests,
            "lever_pairs": lever_pairs,
            "other_tokens": {name: {m: statistics.fmean(getattr(sc, a)) for m, a in
                                    (("ndcg10", "ndcg"), ("mrr10", "mrr"), ("recall100", "recall"))}
                             for name, sc in other_tokens.items()},
            "tokens_twins": {"pairs": len(twins), "mean_ndcg10_128_minus_256": statistics.fmean(twin_diffs)
                             if twin_diffs else None, "128_better": sum(d > 0 for d in twin_diffs),
                             "256_better": sum(d < 0 for d in twin_diffs)},
            "ndcg10_per_query": {name: s.ndcg for name, s in rows.items()},
            "search_ms": search_ms,
            "times": times,
        }


def _test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    diffs = [x - y for x, y in zip(a, b)]
    return {"difference": statistics.fmean(diffs), "se": statistics.stdev(diffs) / math.sqrt(len(diffs)),
            "up": sum(d > 1e-12 for d in diffs), "down": sum(d < -1e-12 for d in diffs),
            "p": paired_p(list(a), list(b))}


# -- report ---------------------------------------------------------------------------------------
def markdown(r: dict[str, Any]) -> str:
    out = [f"- Command: `{r['command']}`", f"- Date: {r['date']}; git {r['git']}; {r['machine']}",
           f"- Embedder: {r['embedder']}; stores: " + "; ".join(
               f"{t} tokens: {s['chunks']} chunks" + (f", vector index {s['vector_index_s']:.1f} s" if s.get("built")
                                                      else ", reused") for t, s in r["stores"].items()),
           f"- Grid: {r['grid']['configurations']} configurations; cache check {r['cache_check_identical']}/"
           f"{r['queries']} identical; plain z-score through HybridSearch {r['plain_via_pipeline_identical']}/"
           f"{r['queries']} identical", "",
           "| Run | NDCG@10 | MRR@10 | Recall@100 |", "|---|--:|--:|--:|"]
    for name, metrics in r["table"].items():
        out.append(f"| {name} | " + " | ".join(f"{metrics[m]['mean']:.4f} ± {metrics[m]['std']:.4f}"
                                               for m in ("ndcg10", "mrr10", "recall100")) + " |")
    out += ["", "Per fold (NDCG@10):", "", "| Run | " + " | ".join(f"fold {i + 1}" for i in range(FOLDS)) + " |",
            "|---|" + "--:|" * FOLDS]
    for name, metrics in r["table"].items():
        out.append(f"| {name} | " + " | ".join(f"{v:.4f}" for v in metrics["ndcg10"]["folds"]) + " |")
    out += ["", "| Fold | chosen on the other four | train NDCG@10 |", "|--:|---|--:|"]
    out += [f"| {c['fold']} | {c['name']} | {c['train_ndcg10']:.4f} |" for c in r["chosen"]]
    b = r["best_on_all_225"]
    out += ["", f"- Best on all 225 (in-sample): {b['name']} ({b['ndcg10']:.4f}); shipped: {r['shipped']['name']}",
            "", "| Family (best member, in-sample on 225) | config | NDCG@10 |", "|---|---|--:|"]
    out += [f"| {k} | {v['name']} | {v['ndcg10']:.4f} |" for k, v in r["family_best_in_sample"].items()]
    out += ["", "Cross-validation with the choice restricted to one value of a lever (held-out NDCG@10, mean ± sd "
                "over folds; p: paired test against plain z-score):", "",
            "| Lever = value | configurations | held-out NDCG@10 | p vs plain z-score | chosen (fold 1..5) |",
            "|---|--:|--:|--:|---|"]
    for lever, values in r["levers"].items():
        for v, d in values.items():
            p = r["lever_tests"][f"{lever}={v} vs plain z-score"]["p"]
            chosen = "; ".join(dict.fromkeys(d["chosen"]))
            out.append(f"| {lever} = {v} | {d['configurations']} | {d['mean']:.4f} ± {d['std']:.4f} | {p:.3f} | "
                       f"{chosen} |")
    out += ["", "| Lever value against the shipped default's (both chosen by the folds) | difference (se) | up / down "
                "| p |", "|---|--:|--:|--:|"]
    out += [f"| {name} | {t['difference']:+.4f} ({t['se']:.4f}) | {t['up']} / {t['down']} | {t['p']:.3f} |"
            for name, t in r["lever_pairs"].items()]
    tw = r["tokens_twins"]
    if tw["pairs"]:
        out += ["", f"- Truncation twins (same settings, 128 against 256 tokens, in-sample on 225): "
                    f"{tw['pairs']} pairs, mean NDCG@10 difference {tw['mean_ndcg10_128_minus_256']:+.4f}; "
                    f"128 better in {tw['128_better']}, 256 in {tw['256_better']}"]
    out += [f"- {name}: NDCG@10 {m['ndcg10']:.4f}, MRR@10 {m['mrr10']:.4f}, Recall@100 {m['recall100']:.4f}"
            for name, m in r["other_tokens"].items()]
    k = r["keyword_only"]
    out += ["", f"- Keyword-only fallback: folds chose {k['chosen']}; held-out NDCG@10 "
                f"{k['held_out_ndcg10']['mean']:.4f} ± {k['held_out_ndcg10']['std']:.4f} "
                f"(off {k['off_ndcg10']['mean']:.4f}, RM3 {k['rm3_ndcg10']['mean']:.4f})",
            "", "| Paired randomisation test | difference (se) | up / down | p |", "|---|--:|--:|--:|"]
    for name, t in r["paired_p"].items():
        out.append(f"| {name} | {t['difference']:+.4f} ({t['se']:.4f}) | {t['up']} / {t['down']} | {t['p']:.3f} |")
    out += [""] + [f"- Search time ({name}, top 10, SQLite, query vector given): p50 {v['p50']:.1f} ms, "
                   f"p90 {v['p90']:.1f} ms, mean {v['mean']:.1f} ms" for name, v in r["search_ms"].items()]
    out += ["", "Times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in r["times"].items())]
    return "\n".join(out)


def _log(message: str) -> None:
    print(f"[cv {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", help="SQLite file of the 256-token Cranfield store (reused if it exists)")
    ap.add_argument("--db-128", help="SQLite file of the 128-token store (default: --db's name + '-128')")
    ap.add_argument("--tokens", default=",".join(str(t) for t in TOKENS), help="MiniLM truncations to evaluate")
    ap.add_argument("--quick", action="store_true", help="a tiny grid: a smoke test of the script")
    add_output_options(ap)
    args = ap.parse_args(argv)
    report = run(args)
    emit(report, args, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
