"""Hybrid search over a knowledge collection (L1 retrieval): step-back -> embed -> keyword
(BM25; RM3 feedback when no vector list is fused) -> vector -> [feedback] -> fuse -> rerank
-> overview -> select (one place per section first).

The default pipeline (every choice a ``HybridSearch`` field, each default chosen by 5-fold
cross-validation on Cranfield: docs/benchmarks.md, "retrieval defaults chosen by 5-fold
cross-validation on Cranfield"): each retriever's list is read ``LIST_DEPTH`` deep; fuse
keeps every candidate of both lists and rerank orders them by summed z-score, each list on its
own mean and spread, a candidate a list did not return at that list's lowest z minus
``rerank.MISSING_PENALTY`` sd (``fusion="zscore"``); select gives one place per section first.
Beside a vector list that is a first pass (``feedback="hybrid"``): its top chunks feed
pseudo-relevance feedback to both retrievers (RM3 on the keyword side, Rocchio on the vector
side), and fuse, rerank and select run again over the two expanded lists; the ``feedback``
stage says what ran and from how many chunks, and fuse / rerank describe the second pass.
When keyword search answers alone, RM3 expands its list instead. The alternatives stay one
field away: RRF to a pool of ``pool_factor`` x ``top_k`` before the z-score (``rrf+zscore``,
the former default) or RRF alone (``rrf``), another missing rule, another depth,
feedback ``alone`` / ``always`` / ``off``, rank-order selection.

Every step leaves a stage, ``done`` / ``skipped`` / ``error`` with a detail that says what ran
and why not: a blank stage is a lie. Nothing here raises for a retriever's failure: the other
retriever answers alone, and the stage says so. Details carry no timings, so the same read
models give the same result, byte for byte (a packet may quote them).

The original query feeds the keyword index and the reranker; only the embedder sees a
step-back generalisation. Wiki pages never gate recall: chunks are retrieved in the same
pass and ``top_k`` chunks are always returned; a page is added when it ranks within the
first ``top_k`` places, as its last good TLDR, flagged when stale. A broad query also gets each
collection's overview (its table of contents), so it has a high-level answer even when
step-back cannot run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from canon_ledger.application.knowledge.ports import Embedder, ProviderError, ProviderExhausted, ProviderThrottled
from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.retrieval.feedback import ALONE, FEEDBACK_DOCS, HYBRID, MODES, OFF, expand, plain
from canon_ledger.application.retrieval.fusion import FUSIONS, RRF, RRF_K, RRF_ZSCORE, WIDE_FACTOR, ZSCORE, rrf, wide
from canon_ledger.application.retrieval.rerank import MISSING_PENALTY, missing_rule, rerank
from canon_ledger.application.retrieval.rocchio import ROCCHIO_DOCS, expand_vector
from canon_ledger.application.retrieval.ports import Candidate, Doc, Hit, KeywordResult, Reranker, RetrievalSnapshot
from canon_ledger.application.retrieval.stepback import StepBack, StepBackResult, is_broad_query
from canon_ledger.domain.quota import EMBED, QuotaRefused

DEFAULT_TOP_K = 8
QUERY_VECTORS = 256
# The pipeline's defaults, each chosen by 5-fold cross-validation on Cranfield (the numbers and
# what was dropped: docs/benchmarks.md, "retrieval defaults chosen by 5-fold cross-validation
# on Cranfield"); ``HybridSearch`` says what each one means.
FUSION = ZSCORE
MISSING: float | None = MISSING_PENALTY
LIST_DEPTH = 100
PER_SECTION = True
FEEDBACK = HYBRID
# Hybrid feedback learns from the first pass's top chunks, as many as the deeper of its two
# feedback steps reads (RM3 10, Rocchio 5), whatever ``top_k`` the caller asked for.
FIRST_PASS = max(FEEDBACK_DOCS, ROCCHIO_DOCS)


@dataclass(frozen=True)
class SearchResult:
    query: str
    collections: list[str]
    hits: list[Doc]
    stages: list[Stage]
    position: int | None = None  # the log position the read models reflected

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "collections": list(self.collections), "position": self.position,
                "hits": [h.as_dict() for h in self.hits], "stages": [s.as_dict() for s in self.stages]}


@dataclass
class HybridSearch:
    """The pipeline, on one read-model snapshot. ``embedder_note`` is appended to the embed
    stage (e.g. that the deterministic hashing embedder stands in for a semantic model, or,
    with no embedder, why there is none). The fields below ``embedder_note`` are the pipeline's
    choices; their defaults are the module's ``FUSION``, ``MISSING``, ``LIST_DEPTH``,
    ``PER_SECTION`` and ``FEEDBACK`` (and ``fusion.RRF_K``, ``fusion.WIDE_FACTOR``)."""

    embedder: Embedder | None
    step_back: StepBack | None = None
    scorer: Reranker | None = None
    quota: Any = None  # application.knowledge.quota.Quota, for an embedder that uses quota
    provider: str = "gemini"
    embedder_note: str = ""
    # How the lists are fused (``fusion.FUSIONS``): ``zscore`` orders every candidate of the lists
    # by summed z-score; ``rrf+zscore`` keeps the RRF pool of ``pool_factor`` x ``top_k`` (at
    # least ``fusion.WIDE_FLOOR``) and orders it by summed z-score; ``rrf`` keeps that pool in
    # RRF order. A scorer plug-in, when given, replaces the z-score (or RRF's order) over the
    # same candidates: for ``zscore``, every one.
    fusion: str = FUSION
    rrf_k: int = RRF_K  # RRF's constant: the RRF order (``rrf``), the pool (``rrf+zscore``), z-score ties
    pool_factor: int = WIDE_FACTOR  # the RRF pool, in multiples of ``top_k`` (not used by ``zscore``)
    # The z-score's rule for a candidate a list did not return: that many sd below the list's
    # lowest z, or None: the list's mean (z 0, it adds nothing).
    missing_penalty: float | None = MISSING
    # How deep each retriever's list is read (at least ``top_k``, and the RRF pool when there is one).
    depth: int = LIST_DEPTH
    # ``select``: one place per section first (True), or the chunks in rank order (False).
    per_section: bool = PER_SECTION
    # Pseudo-relevance feedback (``feedback.MODES``): ALONE runs RM3 on the keyword list only when
    # no query vector will be fused with it (keyword search answers alone); ALWAYS runs it on
    # every search, before fusion; HYBRID feeds the fused first pass to both retrievers (RM3 and
    # Rocchio) and fuses again (``_hybrid_feedback``); OFF never. What each is worth:
    # docs/benchmarks.md (hybrid search on Cranfield, and the defaults' cross-validation).
    feedback: str = FEEDBACK
    # Where a query's new vector is kept beyond this process (``put(model, text, vector)``, e.g.
    # ``infrastructure.query_vectors``); a snapshot reads it back (``stored_vector``). None: nowhere.
    query_store: Any = None
    # Query vectors by (model, text), most recent last: a packet asked again, or a search
    # repeated, embeds nothing and spends no quota.
    _vectors: OrderedDict[tuple[str, str], list[float]] = field(default_factory=OrderedDict, repr=False, init=False)

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {self.fusion!r}")
        if int(self.pool_factor) < 1 or int(self.depth) < 1 or int(self.rrf_k) < 0:
            raise ValueError(f"pool_factor and depth must be >= 1 and rrf_k >= 0, not {self.pool_factor}, "
                             f"{self.depth}, {self.rrf_k}")

    def pool(self, top_k: int) -> int | None:
        """How many candidates fusion keeps for ``top_k`` results: None (every one) for ``zscore``."""
        return None if self.fusion == ZSCORE else wide(top_k, self.pool_factor)

    def search(self, snapshot: RetrievalSnapshot, collection_ids: Sequence[str], query: str,
               top_k: int = DEFAULT_TOP_K, *, vector_problem: str | None = None,
               feedback: str | None = None, lag: Mapping[str, str] | None = None) -> SearchResult:
        """``vector_problem``: why the vector index may not be current (its catch-up failed).
        ``feedback``: ``alone`` / ``always`` / ``hybrid`` / ``off``, this search only (None: the pipeline's).
        ``lag``: stage name -> how far behind the log that stage's index is (a worker feeds it);
        appended to the stage's detail, so a reader sees what the answer could not include."""
        collections = list(dict.fromkeys(collection_ids))
        top_k = max(1, int(top_k))
        pool = self.pool(top_k)
        depth = max(self.depth, top_k if pool is None else pool)
        stages: list[Stage] = []

        sb = self._step_back(query)
        stages.append(sb.stage)
        query_vector, stage = self._embed(snapshot, sb.embed_query, vector_problem)
        stages.append(stage)
        mode = self.feedback if feedback is None else feedback
        if mode not in MODES:
            raise ValueError(f"feedback must be one of {', '.join(MODES)}, not {mode!r}")
        first, keyword, stage = _keyword(snapshot, query, collections, depth, _feedback_off(mode, query_vector))
        stages.append(stage)
        vector, stage = _vector(snapshot, query_vector, collections, depth)
        stages.append(stage)

        lists = {name: hits for name, hits in (("keyword", keyword), ("vector", vector)) if hits is not None}
        ranked, docs, fused = self._fuse_and_rerank(snapshot, query, lists, pool, {})
        if mode == HYBRID and query_vector is not None:
            lists, stage = _hybrid_feedback(snapshot, collections, query_vector, first, lists,
                                            ranked, docs, depth, self.per_section)
            stages.append(stage)
            if stage.status == "done":  # the second pass: the same fusion, rerank and selection
                ranked, docs, fused = self._fuse_and_rerank(snapshot, query, lists, pool, docs)
        stages += fused

        overview, stage = _overview(snapshot, query, collections)
        stages.append(stage)
        hits, stage = _select(ranked, docs, overview, top_k, self.per_section)
        stages.append(stage)
        if lag:
            stages = [replace(s, detail=f"{s.detail}; {lag[s.step]}") if s.step in lag else s for s in stages]
        return SearchResult(query, collections, hits, stages)

    def _fuse_and_rerank(self, snapshot: RetrievalSnapshot, query: str, lists: dict[str, list[Hit]], pool: int | None,
                         known: dict[str, Doc]) -> tuple[list[Candidate], dict[str, Doc], list[Stage]]:
        """The candidates (every one, or RRF's ``pool``), then the z-score or the scorer plug-in
        over all of them (plain RRF without a plug-in keeps its order): (ranked candidates,
        their docs, the fuse and rerank stages). ``known``: docs already read in this snapshot."""
        candidates = rrf(lists, k=self.rrf_k, limit=pool)  # every candidate, in RRF order, when pool is None
        unread = [c.id for c in candidates if c.id not in known]
        docs = {**{c.id: known[c.id] for c in candidates if c.id in known},
                **(snapshot.docs(unread) if unread else {})}
        gone = [c.id for c in candidates if c.id not in docs]
        candidates = [c for c in candidates if c.id in docs]
        fuse = _fuse_stage(self.fusion, lists, candidates, gone, self.rrf_k, pool)
        if self.fusion == RRF and self.scorer is None:
            kept = Stage("rerank", "skipped", "fusion rrf: its order stands (no reranker plug-in)" if candidates
                         else "no candidates to rerank")
            return candidates, docs, [fuse, kept]
        # The reranker orders every candidate; ``select`` narrows them (it may pass over a chunk
        # whose section already has a place, so it needs more than the first ``top_k``).
        ranked = rerank(query, candidates, len(candidates), scorer=self.scorer,
                        texts={cid: d.text for cid, d in docs.items()},
                        list_scores={name: [h.score for h in hits] for name, hits in lists.items()},
                        missing=missing_rule(self.missing_penalty))
        return ranked.candidates, docs, [fuse, ranked.stage]

    # -- steps ----------------------------------------------------------------------------------------
    def _step_back(self, query: str) -> StepBackResult:
        if self.step_back is None:
            return StepBackResult(query, Stage("step-back", "skipped",
                                               "offline: no generate provider configured; embedding the original"))
        return self.step_back.run(query)

    def _embed(self, snapshot: RetrievalSnapshot, text: str,
               vector_problem: str | None) -> tuple[list[float] | None, Stage]:
        note = f"; {self.embedder_note}" if self.embedder_note else ""
        if self.embedder is None:  # the note says why there is no embedder, when the caller knows
            return None, Stage("embed", "skipped", f"no vector index configured; keyword search only{note}")
        if snapshot.vector_model is None:
            return None, Stage("embed", "skipped", "no vector index configured; keyword search only")
        if self.embedder.name != snapshot.vector_model:
            return None, Stage("embed", "error", f"the query embedder is {self.embedder.name} but the index holds "
                                                 f"{snapshot.vector_model}; keyword search only")
        if vector_problem:
            return None, Stage("embed", "error", f"vector index not current ({vector_problem}); keyword search only")
        name = self.embedder.name

        def done(vector: list[float]) -> tuple[list[float], Stage]:
            return list(vector), Stage("embed", "done", f"{name}, {len(vector)} dimensions{note}")

        cached = self._vectors.get((name, text))
        if cached is not None:  # a pure function of (model, text): the same stage, no call, no quota
            self._vectors.move_to_end((name, text))
            return done(cached)
        stored = self._stored(snapshot, name, text)
        if stored is not None:  # the same vector, embedded by a worker or another process
            self._remember(name, text, stored)
            return done(stored)
        call_id = None
        if self.embedder.uses_quota:
            if self.quota is None:
                return None, Stage("embed", "skipped", f"quota: {self.embedder.name} is metered and no quota "
                                                       f"ledger was given; keyword search only")
            try:
                call_id = self.quota.reserve(self.provider, EMBED, "search")
            except QuotaRefused as e:
                return None, Stage("embed", "skipped", f"quota: {e.message}; keyword search only")
        try:
            [vector] = self.embedder.embed([text])
        except Exception as e:  # noqa: BLE001 - a failed embed leaves keyword search standing
            if call_id is not None:
                sent = not isinstance(e, ProviderError) or e.sent
                self.quota.settle(self.provider, call_id, "error" if sent else "not_sent")
                if isinstance(e, ProviderExhausted):
                    self.quota.exhaust(self.provider, str(e))
            reason = "quota" if isinstance(e, (ProviderExhausted, ProviderThrottled)) else "error"
            return None, Stage("embed", "error", f"{reason}: {self.embedder.name} failed ({type(e).__name__}: "
                                                 f"{str(e)[:160]}); keyword search only")
        if call_id is not None:
            self.quota.settle(self.provider, call_id, "ok")
        self._remember(name, text, list(vector))
        if self.query_store is not None:
            try:
                self.query_store.put(name, text, list(vector))
            except Exception:  # noqa: BLE001, S110 - a cache that cannot be written costs the next process an embed
                pass
        return done(vector)

    def _remember(self, name: str, text: str, vector: list[float]) -> None:
        self._vectors[(name, text)] = vector
        if len(self._vectors) > QUERY_VECTORS:
            self._vectors.popitem(last=False)

    def _stored(self, snapshot: RetrievalSnapshot, name: str, text: str) -> list[float] | None:
        """The vector kept for (model, text), read in the snapshot (``stored_vector``: a snapshot
        without one keeps none); None when none is kept or it cannot be read."""
        read = getattr(snapshot, "stored_vector", None)
        if read is None:
            return None
        try:
            found: list[float] | None = read(name, text)
            return found
        except Exception:  # noqa: BLE001 - an unreadable cache: embed as if it were empty
            return None


def _feedback_off(mode: str, query_vector: list[float] | None) -> str | None:
    """Why RM3 does not run on this search, or None when it does."""
    if mode == OFF:
        return "off"
    if mode == ALONE and query_vector is not None:
        return "a vector list is fused with it: feedback runs when keyword search answers alone"
    if mode == HYBRID and query_vector is not None:
        return "hybrid: the fused first pass feeds it, see the feedback stage"
    return None


def _keyword(snapshot: RetrievalSnapshot, query: str, collections: list[str], limit: int,
             feedback_off: str | None) -> tuple[KeywordResult | None, list[Hit] | None, Stage]:
    """The keyword list: BM25 of the query, then (unless ``feedback_off`` says why not) of its
    RM3 expansion, which replaces it; and the plain result (hybrid feedback expands it later).
    The feedback's outcome is part of this stage's detail: the stage is the keyword retriever's,
    and its status says whether a keyword list stands."""
    try:
        result = snapshot.keyword(query, collections, limit)
    except Exception as e:  # noqa: BLE001
        return None, None, Stage("keyword", "error", f"{type(e).__name__}: {str(e)[:160]}; vector search only")
    if not result.terms:
        return None, None, Stage("keyword", "skipped",
                                 "no searchable words in the query (only stopwords or punctuation)")
    detail = f"{result.method}: {len(result.terms)} term(s) [{' '.join(result.terms[:12])}], {len(result.hits)} hit(s)"
    expanded = (plain(result, "skipped", feedback_off) if feedback_off
                else expand(snapshot, collections, result, limit))
    return result, expanded.hits, Stage("keyword", "done", f"{detail}; {expanded.detail}")


def _hybrid_feedback(snapshot: RetrievalSnapshot, collections: list[str], query_vector: list[float],
                     first: KeywordResult | None, lists: dict[str, list[Hit]], ranked: list[Candidate],
                     docs: dict[str, Doc], depth: int, per_section: bool = PER_SECTION
                     ) -> tuple[dict[str, list[Hit]], Stage]:
    """Pseudo-relevance feedback from the hybrid's own first pass: its top ``FIRST_PASS``
    chunks (what ``select`` would return for that many, by ``per_section``'s rule) feed RM3 on
    the keyword side and Rocchio on the vector side, each replacing its list with the expanded
    one. Fused
    evidence picks more precise feedback than either retriever alone. Every feedback chunk
    counts equally: a summed z-score is no probability (it may be negative) for RM3 to weigh
    a document by, and Rocchio takes a plain mean. Never raises: each side keeps its plain
    list when it cannot learn, and the stage says so."""
    chosen, _ = _select(ranked, docs, [], FIRST_PASS, per_section)
    feedback = [Hit(h.id, 1.0) for h in chosen if h.kind == "chunk"]
    if not feedback:
        return lists, Stage("feedback", "skipped", "hybrid prf: no chunk in the first pass to learn from")
    out = dict(lists)
    sides = []
    if first is not None and "keyword" in lists:
        kw = expand(snapshot, collections, first, depth, feedback)
        out["keyword"] = kw.hits
        sides.append(("keyword", kw))
    if "vector" in lists:
        vec = expand_vector(snapshot, collections, query_vector, lists["vector"], feedback, depth)
        out["vector"] = vec.hits
        sides.append(("vector", vec))
    statuses = {e.status for _, e in sides}
    status: Literal["done", "error", "skipped"] = ("done" if "done" in statuses else "error" if "error" in statuses
                                                   else "skipped")
    detail = "; ".join(f"{name} {e.detail}" for name, e in sides) or "no list to expand"
    rule = "one per section" if per_section else "in rank order"
    return out, Stage("feedback", status, f"hybrid prf from the first pass's top {len(feedback)} chunk(s) "
                                          f"(fused, reranked, {rule}): {detail}")


def _vector(snapshot: RetrievalSnapshot, query_vector: list[float] | None, collections: list[str],
            limit: int) -> tuple[list[Hit] | None, Stage]:
    if query_vector is None:
        return None, Stage("vector", "skipped", "no query vector (see embed)")
    try:
        hits = snapshot.vector(query_vector, collections, limit)
    except Exception as e:  # noqa: BLE001
        return None, Stage("vector", "error", f"{type(e).__name__}: {str(e)[:160]}; keyword search only")
    return hits, Stage("vector", "done", f"cosine over {snapshot.vector_model} vectors, {len(hits)} hit(s)")


def _fuse_stage(fusion: str, lists: dict[str, list[Hit]], candidates: list[Candidate], gone: list[str], k: int,
                pool: int | None) -> Stage:
    if not any(lists.values()):
        return Stage("fuse", "skipped", "no retriever returned anything")
    sizes = ", ".join(f"{name} {len(hits)}" for name, hits in sorted(lists.items()))
    if pool is None:
        detail = f"zscore over {sizes} -> {len(candidates)} candidate(s), every one (summed in rerank)"
    else:
        then = "; zscore in rerank" if fusion == RRF_ZSCORE else ""
        detail = f"rrf k={k} over {sizes} -> {len(candidates)} candidate(s) (wide {pool}{then})"
    if gone:
        detail += f"; {len(gone)} no longer in the knowledge model, dropped"
    return Stage("fuse", "done", detail)


def _overview(snapshot: RetrievalSnapshot, query: str, collections: list[str]) -> tuple[list[Doc], Stage]:
    if not is_broad_query(query):
        return [], Stage("overview", "skipped", "narrow: not a broad query")
    docs = [d for d in (snapshot.overview(c) for c in collections) if d is not None]
    if not docs:
        return [], Stage("overview", "skipped", "broad query, but the collection has no topics yet")
    return docs, Stage("overview", "done", f"broad query: the overview of {', '.join(d.collection for d in docs)}")


def section_of(chunk_id: str) -> str:
    """``collection/document#section/path/3`` -> ``collection/document#section/path``: the chunker's
    ids are the section id, a slash and the chunk's place in it (``domain.chunking``)."""
    head, slash, tail = chunk_id.rpartition("/")
    return head if slash and "#" in head and tail.isdigit() else chunk_id


def _select(ranked: list[Candidate], docs: dict[str, Doc], overview: list[Doc],
            top_k: int, per_section: bool = PER_SECTION) -> tuple[list[Doc], Stage]:
    """The overviews, then the ranked pages and chunks: ``top_k`` chunks, one per section first
    (``per_section`` False: the first ``top_k`` chunks in rank order).

    One place per section. The chunker cuts a section (a heading's text, or a whole document
    without headings) into chunks only because of the token limit, so two chunks of one
    section are one passage: a reader asking for ``top_k`` results wants ``top_k`` passages,
    not an abstract and its continuation in two places. A chunk whose section already has a
    place waits until every section among the candidates has had one; then the waiting chunks
    fill the remaining places in rank order, so a search never returns fewer chunks for it (a
    collection of two long sections still gets ``top_k`` chunks). This is the standard "best
    passage stands for its document" (MaxP) at section grain; what it is worth on Cranfield,
    where an abstract is one section and a long one is cut in two or more chunks:
    docs/benchmarks.md (hybrid search on Cranfield). Pages keep their rank rule: a page is
    offered when it ranks within the first ``top_k`` places.

    For packets (the story's chapters, each usually one section) this means the L1 chunks come
    from as many earlier chapters as the candidates hold before a second passage of one chapter.
    """
    hits = [Doc(d.id, d.kind, d.collection, d.text, d.stale, list(d.sources), None) for d in overview]
    placed: set[str] = set()
    first: list[tuple[int, Candidate]] = []
    waiting: list[tuple[int, Candidate]] = []
    pages = stale = 0
    for place, c in enumerate(ranked):
        d = docs[c.id]
        if d.kind == "page":
            if place < top_k:
                first.append((place, c))
                pages += 1
                stale += d.stale
            continue
        section = section_of(c.id) if per_section else c.id
        (waiting if section in placed else first).append((place, c))
        placed.add(section)
    chosen_chunks = [pc for pc in first if docs[pc[1].id].kind != "page"][:top_k]
    chosen_chunks += waiting[: top_k - len(chosen_chunks)]
    kept = {id(c) for _, c in chosen_chunks}
    chosen = [(place, c) for place, c in first if docs[c.id].kind == "page" or id(c) in kept]
    chosen += [(place, c) for place, c in waiting if id(c) in kept]
    for _, c in chosen:
        d = docs[c.id]
        hits.append(Doc(d.id, d.kind, d.collection, d.text, d.stale, list(d.sources), c.fused))
    chunks = len(chosen_chunks)
    sections = len({section_of(c.id) for _, c in chosen_chunks})
    detail = f"{chunks} chunk(s) from {sections} section(s), {pages} page(s)" + (
        f" ({stale} stale: last good TLDR)" if stale else "") + ("" if per_section else ", in rank order")
    if overview:
        detail += f", {len(overview)} overview(s)"
    return hits, Stage("select", "done" if hits else "skipped", detail if hits else "nothing found")


@dataclass
class SearchService:
    """Catch the read models up to the log (read your writes), then search one snapshot."""

    position: Callable[[], int]
    catch_up: Callable[[int], None]  # knowledge and keyword index: a failure here is an error
    catch_up_vectors: Callable[[int], None] | None
    reader: Any  # has snapshot() -> context manager of a RetrievalSnapshot
    pipeline: HybridSearch
    warnings: list[str] = field(default_factory=list)
    # When a worker feeds the indexes (nothing to catch up here): (collections, the position
    # searched) -> stage notes.
    lag: Callable[[Sequence[str], int], Mapping[str, str]] | None = None

    def search(self, collection_ids: Sequence[str], query: str, top_k: int = DEFAULT_TOP_K,
               feedback: str | None = None,
               within: Callable[[RetrievalSnapshot], RetrievalSnapshot] | None = None) -> SearchResult:
        """``feedback``: this search's mode (``feedback.MODES``); None: the pipeline's.
        ``within``: the snapshot as this search may see it (e.g. only some chapters of a story:
        its indexes filter before ranking, so the top is still full when enough is left)."""
        target = self.position()
        self.catch_up(target)
        problem = None
        if self.catch_up_vectors is not None:
            try:
                self.catch_up_vectors(target)
            except Exception as e:  # noqa: BLE001 - keyword search still answers
                problem = f"{type(e).__name__}: {str(e)[:160]}"
        lag = self.lag(collection_ids, target) if self.lag is not None else None
        with self.reader.snapshot() as snap:
            result = self.pipeline.search(snap if within is None else within(snap), collection_ids, query, top_k,
                                          vector_problem=problem, feedback=feedback, lag=lag)
        return SearchResult(result.query, result.collections, result.hits, result.stages, target)
