"""Pseudo-relevance feedback on the keyword side: RM3 (Lavrenko and Croft, 2001; Abdul-Jaleel
et al., 2004), as Anserini implements it for BM25 (``Rm3Reranker``).

The first keyword list's top ``FEEDBACK_DOCS`` chunks stand in for relevant documents. Each
gives a term vector: its term counts, less the terms no evidence can come from (shorter than 2
or longer than 20 characters, or in more than 10% of the documents: Anserini's df rule, which
stands in for a collection stopword list), cut to its ``FEEDBACK_TERMS`` most frequent. The
relevance model weighs each vector, as a distribution (L1 norm 1), by the chunk's BM25 score,
sums them, keeps the ``FEEDBACK_TERMS`` heaviest terms and normalises to 1 (RM1). RM3 mixes it
with the query's own terms, each 1/|q| (the keyword index reads a query as its distinct terms,
so a repeated word counts once here too): ``ORIGINAL_WEIGHT`` of the query, the rest the model;
a term in both gets both shares. The expanded query scores BM25 with each
term's contribution times its weight and replaces the keyword list.

The parameters are Anserini's defaults (fbDocs 10, fbTerms 10, originalQueryWeight 0.5),
chosen before measuring and not tuned on any test set. When search runs it (``MODES``; the
default, ``HYBRID``, chosen by cross-validation: docs/benchmarks.md): fed by
the keyword list's own top chunks when the keyword list answers alone (no vector index, or the
embedder failed, is out of quota, or does not match the index), and beside a vector list fed by
the fused first pass.

The feedback set is a parameter: by default the keyword list's own top chunks, weighted by
their BM25 score; hybrid feedback (``search._hybrid_feedback``) passes the fused first pass's
top chunks instead, each weighted 1.

Only chunks feed the model: a wiki page is a model's summary, not the source text. The
feedback chunks are hits of the same search, so the same collections and the same ``below``
bound hold for them. The term statistics (documents, df) are those the store's BM25 uses for
its IDF: a statistic never puts a word in the query, only the feedback text does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.ports import KeywordResult, RetrievalSnapshot
from canon_ledger.domain.wiki import PAGE_PREFIX

# When search runs it (HybridSearch.feedback): only when the keyword list stands alone, on
# every search, or never; HYBRID (the default) is ALONE, and beside a vector list the hybrid's
# own first pass feeds RM3 here and Rocchio on the vector side (``search.py``, ``rocchio.py``).
ALONE, ALWAYS, OFF, HYBRID = "alone", "always", "off", "hybrid"
MODES = (ALONE, ALWAYS, OFF, HYBRID)

FEEDBACK_DOCS = 10
FEEDBACK_TERMS = 10
ORIGINAL_WEIGHT = 0.5
MAX_DOC_SHARE = 0.1  # a term in more than this share of the documents is no evidence
MIN_TERM, MAX_TERM = 2, 20


def usable(term: str, df: int, documents: int) -> bool:
    return MIN_TERM <= len(term) <= MAX_TERM and documents > 0 and df / documents <= MAX_DOC_SHARE


def heaviest(weights: Mapping[str, float], size: int) -> dict[str, float]:
    """The ``size`` heaviest terms, equal weights by term (so the cut does not depend on order)."""
    return dict(sorted(weights.items(), key=lambda tw: (-tw[1], tw[0]))[:max(0, size)])


def unit(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()} if total > 0 else {}


def relevance_model(feedback: Sequence[tuple[Sequence[str], float]], df: Mapping[str, int], documents: int,
                    size: int = FEEDBACK_TERMS) -> dict[str, float]:
    """RM1 from (a feedback document's analysed terms, its retrieval score) pairs; {} when no
    document has a usable term or a positive score."""
    model: defaultdict[str, float] = defaultdict(float)
    for doc_terms, score in feedback:
        counts = Counter(t for t in doc_terms if usable(t, df.get(t, 0), documents))
        vector = heaviest(counts, size)
        norm = sum(vector.values())
        if norm <= 0 or not score or score <= 0:
            continue
        for term, count in vector.items():
            model[term] += count / norm * score
    return unit(heaviest(model, size))


def rm3(query: Sequence[str], model: Mapping[str, float],
        original_weight: float = ORIGINAL_WEIGHT) -> dict[str, float]:
    """The expanded query (term -> weight, summing to 1) from the query's distinct terms."""
    original = unit(dict.fromkeys(query, 1.0))
    if not model:
        return original
    return {t: original_weight * original.get(t, 0.0) + (1 - original_weight) * model.get(t, 0.0)
            for t in dict.fromkeys([*original, *model])}


@dataclass(frozen=True)
class Expansion:
    hits: list[Hit]  # the list a retriever hands to fusion: expanded, or the first one
    detail: str  # "prf done: ...", "prf skipped (why): ...", "prf error (what): ..."; ends "N hit(s)"
    status: str = "done"  # done | skipped | error: whether ``hits`` is the expanded list


def plain(first: KeywordResult, status: str, why: str) -> Expansion:
    return Expansion(first.hits, f"prf {status} ({why}): the plain list, {len(first.hits)} hit(s)", status)


def expand(snapshot: RetrievalSnapshot, collections: list[str], first: KeywordResult, limit: int,
           feedback: Sequence[Hit] | None = None) -> Expansion:
    """Run RM3 for ``first`` (the plain keyword result), learning from the top chunks of
    ``feedback`` (best first, each weighted by its score), by default ``first``'s own hits.
    Never raises: on any failure the plain list stands and the detail says why."""
    try:
        return _expand(snapshot, collections, first, limit, feedback)
    except Exception as e:  # noqa: BLE001 - feedback only refines the keyword list
        return plain(first, "error", f"{type(e).__name__}: {str(e)[:160]}")


def _expand(snapshot: RetrievalSnapshot, collections: list[str], first: KeywordResult, limit: int,
            feedback: Sequence[Hit] | None) -> Expansion:
    source = first.hits if feedback is None else list(feedback)
    if not source:
        return plain(first, "skipped", f"no {'keyword' if feedback is None else 'feedback'} hit to learn from")
    chunks = [h for h in source if not h.id.startswith(PAGE_PREFIX)][:FEEDBACK_DOCS]
    stats = snapshot.term_stats([h.id for h in chunks], collections)
    chunks = [h for h in chunks if h.id in stats.terms]
    if not chunks:
        return plain(first, "skipped", f"no chunk among the {'keyword' if feedback is None else 'feedback'} hits")
    model = relevance_model([(stats.terms[h.id], h.score or 0.0) for h in chunks], stats.df, stats.documents)
    if not model:
        return plain(first, "skipped", f"no usable term in the top {len(chunks)} chunk(s): each is in more "
                                       f"than {MAX_DOC_SHARE:.0%} of the documents")
    weights = rm3(first.terms, model)
    hits = snapshot.keyword_weighted(weights, collections, limit)
    added = [t for t in model if t not in first.terms]
    return Expansion(hits, f"prf done: rm3 from the top {len(chunks)} chunk(s) ({FEEDBACK_TERMS} terms, query "
                           f"weight {ORIGINAL_WEIGHT}): +{len(added)} term(s) [{' '.join(added)}], {len(hits)} hit(s)")
