"""Order fused candidates: summed z-score by default, a scorer plug-in optionally.

The default costs nothing and runs on every query, quota or not. Each retriever's raw scores
are put on one scale by a z-score (BM25 25.9 and a cosine 0.43 become "how far above this
list's mean"), and a candidate's score is the sum over retrievers (CombSUM). That keeps the
margins rank fusion throws away: a hit far ahead in one list stays ahead. The search pipeline
(``search.HybridSearch``) by default gives it every candidate of both lists, so this is its
fusion; with ``fusion="rrf+zscore"`` it orders the pool RRF kept.

The scale of a list. When the caller passes ``list_scores`` (each retriever's scores over its
whole list as read, before fusion cut anything), a retriever's mean, spread and lowest z come
from that list: the z-score then says where a candidate stands in what the retriever
returned. Without it they come from the candidates' own scores, which after an RRF cut are a
sample of the lists' heads: its mean is high and its spread narrow, so the same gap counts for
more in whichever list happens to be tighter at the top. A list whose scores cannot give a
scale (fewer than two usable, sigma 0, overflow) falls back to the candidates' scale for that
retriever.

The missing rule. A candidate absent from a retriever's list was ranked below that list's cut
by that retriever, so its unseen score is at most the list's lowest: by default it gets the
list's lowest z minus ``MISSING_PENALTY`` standard deviations (``below_lowest``). ``at_mean``
(``missing_rule(None)``) scores it at the list's mean, z 0, as plain z-score fusion (each list
normalised by its mean and sd, summed, an absent document adding 0) does; it rewards being
absent over being present but weak. The penalty, and the choice against the mean rule, were
made by cross-validation (docs/benchmarks.md). A score that is None, NaN or infinite
counts as missing in that list.

Guards: a list whose scores are all unusable is scored by its ranks instead; a list with one
hit, or all scores equal (sigma 0), cannot order what it returned, so those get z 0 and the
others the missing rule's value. ``rerank`` never raises: on any failure it returns the
candidates in the order given, cut to ``top_n``, with an ``error`` stage. A scorer plug-in (a
local cross-encoder; a cloud reranker is the ceiling, never the default) replaces the z-score
when it works; when it raises or answers nonsense, the z-score runs instead and the stage says
``error`` with what fell back to what.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
import statistics
from statistics import fmean
from typing import Any

from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.retrieval.ports import Candidate, Reranker

STEP = "rerank"
MISSING_PENALTY = 0.5  # in standard deviations below the list's lowest z

MissingRule = Callable[[list[float]], float]  # the z-scores a list gave -> the z of a candidate it did not return


@dataclass(frozen=True)
class BelowLowest:
    """A candidate a list did not return scores the list's lowest z minus ``penalty`` (in sd)."""

    penalty: float = MISSING_PENALTY

    def __call__(self, zs: list[float]) -> float:
        return min(zs) - self.penalty

    @property
    def note(self) -> str:
        return f"a missing hit at the list's lowest z - {self.penalty:g} sd"


@dataclass(frozen=True)
class AtMean:
    """A candidate a list did not return scores that list's mean (z 0): it adds nothing."""

    def __call__(self, zs: list[float]) -> float:
        return 0.0

    @property
    def note(self) -> str:
        return "a missing hit at the list's mean"


at_mean = AtMean()


def below_lowest(penalty: float = MISSING_PENALTY) -> MissingRule:
    return BelowLowest(penalty)


def missing_rule(penalty: float | None) -> MissingRule:
    """The rule for a missing candidate: ``penalty`` sd below the list's lowest z, or (None) the
    list's mean."""
    return at_mean if penalty is None else BelowLowest(float(penalty))


@dataclass(frozen=True)
class RerankResult:
    candidates: list[Candidate]
    stage: Stage


def rerank(query: str, candidates: Sequence[Candidate], top_n: int, *, scorer: Reranker | None = None,
           texts: Mapping[str, str] | None = None,
           list_scores: Mapping[str, Sequence[Any]] | None = None,
           missing: MissingRule | None = None) -> RerankResult:
    """Reorder ``candidates`` by relevance to ``query`` (the user's original words, never a
    step-back generalisation) and keep the best ``top_n``. ``list_scores``: each retriever's
    raw scores over its whole list, the z-score's scale (see the module notes). ``missing``:
    the z-score's missing rule (None: ``below_lowest()``); a rule given here is named in the
    stage. Never raises."""
    try:
        how = _scaled_by(list_scores, missing)
        pool = list(candidates)
        n = max(0, int(top_n))
        if not pool:
            return RerankResult([], Stage(STEP, "skipped", "no candidates to rerank"))
        if scorer is not None:
            try:
                ranked = _by_scorer(query, pool, scorer, texts)
            except Exception as e:  # noqa: BLE001 - the plug-in may fail in any way; the z-score stands in
                ranked = zscore_order(pool, missing, list_scores)
                name = _name(scorer)
                return RerankResult(ranked[:n], Stage(
                    STEP, "error", f"{name} failed ({_describe(e)}); fell back to zscore{how}, "
                                   f"{len(pool)} in, {min(n, len(ranked))} out"))
            return RerankResult(ranked[:n], Stage(
                STEP, "done", f"method={_name(scorer)}, {len(pool)} in, {min(n, len(ranked))} out"))
        ranked = zscore_order(pool, missing, list_scores)
        return RerankResult(ranked[:n], Stage(
            STEP, "done", f"method=zscore{how}, {len(pool)} in, {min(n, len(ranked))} out"))
    except Exception as e:  # noqa: BLE001 - never raise: identity order is always a valid answer
        return RerankResult(_identity(candidates, top_n), Stage(
            STEP, "error", f"rerank failed ({_describe(e)}); kept fusion order"))


def zscore_order(candidates: Sequence[Candidate], missing: MissingRule | None = None,
                 list_scores: Mapping[str, Sequence[Any]] | None = None) -> list[Candidate]:
    """The candidates by summed per-retriever z-score, best first; ``fused`` holds that sum.
    Ties keep the order given (fusion order). ``list_scores``: retriever name -> its raw scores
    over the whole list it returned; when usable, they set that retriever's scale."""
    missing = missing or below_lowest()
    retrievers = sorted({name for c in candidates for name in c.scores})
    totals = [0.0] * len(candidates)
    for name in retrievers:
        raw = [_finite(c.scores.get(name)) if name in c.scores else None for c in candidates]
        by_rank = all(s is None for s in raw)
        if by_rank:
            # A list with no usable score still ranked its hits: its ranks stand in for scores.
            raw = [-float(c.ranks[name]) if name in c.scores and _finite(c.ranks.get(name)) is not None else None
                   for c in candidates]
        present = [s for s in raw if s is not None]
        if not present:
            continue
        scaled = None if by_rank or not list_scores else _list_scale(list_scores, name, raw, missing)
        if scaled is not None:
            z, floor = scaled
        else:
            z, floor = _pool_scale(raw, present, missing)
        for i, v in enumerate(z):
            totals[i] += v if v is not None else floor
    order = sorted(range(len(candidates)), key=lambda i: (-totals[i], i))
    return [Candidate(candidates[i].id, candidates[i].scores, candidates[i].ranks, totals[i]) for i in order]


def pstdev(values: Sequence[float]) -> float:
    """``statistics.pstdev`` of finite floats, the same float: the square root, correctly
    rounded, of the exact population variance, here summed in integers over the floats' common
    binary denominator instead of in ``Fraction``s (which cost more than the rest of a search's
    fusion). Another input (or a Python without the rounding helper) goes to ``statistics``."""
    root = getattr(statistics, "_float_sqrt_of_frac", None)
    if root is None or not values or not all(type(v) is float and math.isfinite(v) for v in values):
        return statistics.pstdev(values)
    ratios = [v.as_integer_ratio() for v in values]
    common = max(d for _, d in ratios)  # every denominator is a power of two: the largest holds them all
    scaled = [n * (common // d) for n, d in ratios]
    count = len(scaled)
    sx = sum(scaled)
    sxx = sum(x * x for x in scaled)
    return float(root(count * sxx - sx * sx, count * count * common * common))


def _pool_scale(raw: list[float | None], present: list[float],
                missing: MissingRule) -> tuple[list[float | None], float]:
    """z over the pool's own scores, and the missing rule's value."""
    sigma = pstdev(present) if len(present) > 1 else 0.0
    if sigma > 0 and math.isfinite(sigma):
        mu = fmean(present)
        z = [(s - mu) / sigma if s is not None else None for s in raw]
    else:
        # One hit, or all equal: the list cannot order them, but it did return them.
        z = [0.0 if s is not None else None for s in raw]
    return z, missing([v for v in z if v is not None])


def _list_scale(list_scores: Any, name: str, raw: list[float | None],
                missing: MissingRule) -> tuple[list[float | None], float] | None:
    """z on the scale of the retriever's whole list (its mean and spread, the missing rule on its
    z-scores), or None when that list cannot give one: then the pool's scale stands in."""
    try:
        usable = [v for v in (_finite(s) for s in list_scores.get(name) or ()) if v is not None]
        if len(usable) < 2:
            return None
        mu, sigma = fmean(usable), pstdev(usable)
        if not (sigma > 0 and math.isfinite(sigma) and math.isfinite(mu)):
            return None
        z = [(s - mu) / sigma if s is not None else None for s in raw]
        floor = missing([(v - mu) / sigma for v in usable])
    except Exception:  # noqa: BLE001 - no scale from this list: the pool's stands in
        return None
    if not all(v is None or math.isfinite(v) for v in z) or not math.isfinite(floor):
        return None
    return z, floor


def _scaled_by(list_scores: Any, missing: Any = None) -> str:
    """The stage's note on the z-score: its scale (which lists, how long) and, when the caller
    chose one, its missing rule."""
    notes = []
    try:
        if list_scores:
            sizes = ", ".join(f"{name} {len(list(list_scores[name]))}" for name in sorted(list_scores))
            notes.append(f"scaled by the full lists: {sizes}")
    except Exception:  # noqa: BLE001 - a note is not worth failing for
        pass
    note = getattr(missing, "note", None) if missing is not None else None
    if isinstance(note, str) and note:
        notes.append(note)
    return f" ({'; '.join(notes)})" if notes else ""


def _by_scorer(query: str, pool: list[Candidate], scorer: Reranker,
               texts: Mapping[str, str] | None) -> list[Candidate]:
    if texts is None:
        raise ValueError("a scorer needs the candidates' texts")
    missing = [c.id for c in pool if c.id not in texts]
    if missing:
        raise ValueError(f"no text for {len(missing)} candidate(s), e.g. {missing[0]!r}")
    scores = [float(s) for s in scorer.score(query, [texts[c.id] for c in pool])]
    if len(scores) != len(pool):
        raise ValueError(f"{len(scores)} scores for {len(pool)} candidates")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError("a score is not a finite number")
    order = sorted(range(len(pool)), key=lambda i: (-scores[i], i))
    return [replace(pool[i], fused=scores[i]) for i in order]


def _finite(score: Any) -> float | None:
    if score is None or isinstance(score, bool):
        return None
    try:
        value = float(score)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _identity(candidates: Any, top_n: Any) -> list[Candidate]:
    try:
        return list(candidates)[: max(0, int(top_n))]
    except Exception:  # noqa: BLE001 - not even a sequence and a count: nothing to keep
        return []


def _name(scorer: Any) -> str:
    try:
        return str(scorer.name)
    except Exception:  # noqa: BLE001
        return type(scorer).__name__


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__

