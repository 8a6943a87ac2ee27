"""Step-back: for a broad query, one generate call rewrites it into a more general question, so
the embedder lands on overview material instead of one narrow leaf (Zheng et al., 2023).

It spends the scarcest thing there is (about 20 generate calls a day), so: a gate lets through
broad queries only; an answer is cached by normalised text for ``ttl_s`` (broad questions recur);
at most one call per query, reserved and settled in the quota ledger like every other call. When
it cannot run (offline, quota spent, a failed call) the original query is embedded as is: the
broad query still gets its collection's overview page from the caller, so it is answered at a
high level all the same. It never raises: a step that fails is an ``error`` stage, not a dead turn.

The generalised query feeds the embedder only. The reranker scores against the original query,
which the caller already holds: relevance is judged against what was asked.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from collections.abc import Callable
from typing import NamedTuple

from canon_ledger.application.knowledge.ports import ProviderError, ProviderExhausted, ProviderThrottled
from canon_ledger.application.knowledge.quota import Quota
from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.retrieval.ports import QueryGeneraliser, StepBackCache
from canon_ledger.domain.quota import GENERATE, QuotaRefused

STEP = "step-back"
PURPOSE = "step-back"  # the quota ledger's purpose for these calls
DEFAULT_TTL_S = 12 * 3600.0  # broad questions recur within a working day; the quota resets daily
MAX_QUERY_CHARS = 400  # a generalisation longer than this is not a query any more

# -- the gate ------------------------------------------------------------------------------------
MAX_BROAD_WORDS = 12
BROAD_CUES = (
    "overview", "overall", "summary", "summarise", "summarize", "in general", "generally", "big picture",
    "main themes", "what themes", "which themes", "key themes", "themes", "what is this about",
    "what's this about", "what happens", "tell me about", "getting started", "introduction", "explain",
    "how do i", "how does", "how do", "what is", "what are", "what's", "describe", "outline", "gist",
)
_QUOTES = re.compile(r"[\"“”«»„`]|(?:^|\s)'[^']+'(?:\s|$|[?.!,])")
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")


def normalise(query: str) -> str:
    """The cache's view of a query: NFKC, case-folded, whitespace collapsed, end punctuation gone."""
    text = " ".join(unicodedata.normalize("NFKC", query).casefold().split())
    return text.rstrip(" ?!.…")


def cache_key(query: str) -> str:
    return hashlib.sha256(normalise(query).encode("utf-8")).hexdigest()


def is_broad_query(query: str) -> bool:
    """True for a short, general question worth generalising before it is embedded.

    Broad: at most ``MAX_BROAD_WORDS`` words, one of ``BROAD_CUES`` ("what themes", "overall",
    "summary", "how do I", "what is", ...), and nothing specific: no quoted phrase, no digit
    (chapter 5, 1812), no capitalised word past a sentence's first (a name: "Pierre", "RRF").
    Generalising a specific question loses what made it specific, so the gate errs narrow.
    """
    if not query or not query.strip():
        return False
    if _QUOTES.search(query) or _DIGIT.search(query):
        return False
    words = _WORD.findall(query)
    if not words or len(words) > MAX_BROAD_WORDS:
        return False
    if not query.isupper() and _names_something(query):  # all capitals is shouting, not a name
        return False
    text = " " + " ".join(w.casefold().replace("’", "'") for w in words) + " "
    return any(f" {cue} " in text for cue in BROAD_CUES)


def _names_something(query: str) -> bool:
    """A capitalised word that does not start a sentence, or an all-caps word: a name or a term."""
    sentence_start = True
    for token in query.split():
        word = token.strip("()[]{},;:!?.…\"'“”‘’")
        if word and word[0].isalpha():
            if (not sentence_start and word[0].isupper() and word != "I") or (len(word) > 1 and word.isupper()
                                                                                and word != "I"):
                return True
        sentence_start = bool(_SENTENCE_END.search(token))
    return False


class StepBackResult(NamedTuple):
    """``embed_query`` is for the embedder only: the generalised query when step-back ran (or was
    cached), else the original. The reranker always gets the original query, never this one.
    ``stage.detail`` starts with the reason a skip happened: ``narrow:``, ``offline:``, ``quota:``."""

    embed_query: str
    stage: Stage


class StepBack:
    def __init__(self, cache: StepBackCache, quota: Quota, provider: str, generaliser: QueryGeneraliser | None, *,
                 ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time, retries_5xx: int = 0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """``generaliser`` None: the provider is offline and step-back is off.
        ``retries_5xx`` is 0 by default: this runs on the query path, where a retry is latency and
        one more of the day's calls; an error falls back to the original query at once."""
        self.cache = cache
        self.quota = quota
        self.provider = provider
        self.generaliser = generaliser
        self.ttl_s = ttl_s
        self.clock = clock
        self.retries_5xx = retries_5xx
        self.sleep = sleep

    def run(self, query: str) -> StepBackResult:
        try:
            return self._run(query)
        except Exception as e:  # noqa: BLE001 - a failed step-back must not fail the query
            return StepBackResult(query, Stage(STEP, "error", f"step-back failed ({type(e).__name__}: {e}); "
                                                              f"embedding the original query"))

    def _run(self, query: str) -> StepBackResult:
        if not is_broad_query(query):
            return _skip(query, "narrow", "not a broad query; embedding it as asked")
        if self.generaliser is None:
            # Checked before the cache: offline packets must not depend on what an online day left.
            return _skip(query, "offline", "the offline provider makes no generate call; embedding the original")
        key, now = cache_key(query), self.clock()
        cached = self.cache.get(key, now)
        if cached is not None:
            return StepBackResult(cached, Stage(STEP, "done", f"from cache, no call: {query!r} -> {cached!r}"))
        status = self.quota.status(self.provider)
        if status["exhausted"] or status["generate"]["left"] <= 0:
            why = status["exhausted"] or f"{status['generate']['spent']} of {status['generate']['cap']} generate calls spent"
            return _skip(query, "quota", f"{why}; embedding the original")
        return self._generalise(query, key)

    def _generalise(self, query: str, key: str) -> StepBackResult:
        assert self.generaliser is not None
        for attempt in range(self.retries_5xx + 1):
            try:
                call_id = self.quota.reserve(self.provider, GENERATE, PURPOSE)
            except QuotaRefused as e:  # spent between the status check and now
                return _skip(query, "quota", f"{e.message}; embedding the original")
            try:
                answer = self.generaliser.step_back(query)
            except ProviderExhausted as e:
                self.quota.settle(self.provider, call_id, "error")
                self.quota.exhaust(self.provider, str(e))
                return _skip(query, "quota", f"{e}; embedding the original")
            except ProviderThrottled as e:
                self.quota.settle(self.provider, call_id, "error")
                return _skip(query, "quota", f"{e}; embedding the original")
            except ProviderError as e:
                self.quota.settle(self.provider, call_id, "error" if e.sent else "not_sent")
                if getattr(e, "retryable", False) and attempt < self.retries_5xx:
                    self.sleep(min(8.0, 0.5 * 2**attempt))
                    continue
                return StepBackResult(query, Stage(STEP, "error", f"{e}; embedding the original"))
            except Exception:
                self.quota.settle(self.provider, call_id, "error")
                raise
            self.quota.settle(self.provider, call_id, "ok")
            generalised = " ".join(str(answer or "").split())[:MAX_QUERY_CHARS]
            if not generalised:
                return StepBackResult(query, Stage(STEP, "error", "the model returned an empty query; "
                                                                  "embedding the original"))
            note = ""
            try:
                self.cache.put(key, normalise(query), generalised, self.generaliser.name, self.clock(), self.ttl_s)
            except Exception as e:  # noqa: BLE001 - the answer is good; only the next ask pays again
                note = f" (not cached: {type(e).__name__})"
            return StepBackResult(generalised, Stage(
                STEP, "done", f"1 call to {self.generaliser.name}: {query!r} -> {generalised!r}{note}"))
        raise AssertionError("unreachable")


def _skip(query: str, reason: str, detail: str) -> StepBackResult:
    return StepBackResult(query, Stage(STEP, "skipped", f"{reason}: {detail}"))
