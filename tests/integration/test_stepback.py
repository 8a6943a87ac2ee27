"""Step-back on both stores, with the real google-genai SDK against the fake Gemini server.

What is checked: the gate; at most one generate call per broad query, reserved and settled in the
quota ledger; a cache hit (same question, other spelling) costs no call and no ledger event, in a
new process too; the TTL; skipped ``quota`` when the day is spent or a 429 says so (and the day is
then exhausted); skipped ``offline`` and ``narrow``; a 5xx or a bad answer is an ``error`` stage
that embeds the original query and caches nothing; nothing here ever raises.
"""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.knowledge.quota import Quota, QuotaPolicy
from canon_ledger.application.retrieval.stepback import DEFAULT_TTL_S, StepBack, cache_key, is_broad_query, normalise
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.providers.gemini import GeminiProvider
from canon_ledger.infrastructure.stepback_cache import SqlStepBackCache
from tests.fakes.gemini_server import FakeGemini

BROAD = "What are the main themes of this story?"
SAME_BROAD = "  what are the main themes of   this story "  # same normalised text
OTHER_BROAD = "Give me an overview"
NARROW = "What does Pierre keep in the iron box?"
T0 = 1_750_000_000.0


# -- the gate (no store) -------------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    "What are the main themes?", "what themes run through this story", "Give me an overview",
    "Summarize the plot so far", "Tell me about the war", "overall, what happens to the family?",
    "How does magic work here?", "What is this about?", "WHAT ARE THE MAIN THEMES",
])
def test_broad_queries_pass_the_gate(query: str) -> None:
    assert is_broad_query(query)


@pytest.mark.parametrize("query", [
    "", "   ", "hello", "thanks!",
    "What is Pierre afraid of?",  # a name
    "what is the default RRF k?",  # a term in capitals
    "summary of chapter 5",  # a number
    'How does the "iron rule" work?',  # a quoted phrase
    "Which character said 'never again' at the ball?",  # a quoted phrase
    "Where did she hide the letter after the fire?",  # specific, no broad cue
    "what are the themes and motifs and symbols and the imagery used in the long winter passages here",  # long
])
def test_narrow_queries_do_not(query: str) -> None:
    assert not is_broad_query(query)


def test_normalised_text_keys_the_cache() -> None:
    assert normalise(SAME_BROAD) == normalise(BROAD) == "what are the main themes of this story"
    assert cache_key(SAME_BROAD) == cache_key(BROAD) != cache_key(OTHER_BROAD)
    assert len(cache_key(BROAD)) == 64


# -- fixtures ------------------------------------------------------------------------------------
class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def cache(services: Any) -> SqlStepBackCache:
    made = SqlStepBackCache(services.canon.write_engine, services.canon.read_engine)
    made.setup()
    return made


def _step_back(services: Any, cache: SqlStepBackCache, gemini: FakeGemini | None, gemini_key: str, *,
               generate_per_day: int = 20, clock: Clock | None = None, **options: Any) -> StepBack:
    quota = Quota(services.ledger, QuotaPolicy(generate_per_day=generate_per_day))
    generaliser = GeminiProvider(gemini_key, base_url=gemini.url, timeout_ms=2_000) if gemini is not None else None
    return StepBack(cache, quota, "gemini", generaliser, clock=clock or Clock(), sleep=Sleeps(), **options)


def _quota_events(services: Any, start: int = 1) -> list[Any]:
    return [e for e in services.ledger.event_log.history(start=start) if e.type.startswith("QuotaDay.")]


def _ledger_calls(services: Any, start: int = 1) -> list[tuple[str, str | None]]:
    """(purpose, outcome) of every reserved call, in order."""
    calls: dict[str, list[Any]] = {}
    for e in _quota_events(services, start):
        if e.type == "QuotaDay.Reserved":
            calls[e.data["call_id"]] = [e.data["purpose"], None]
        elif e.type == "QuotaDay.Settled":
            calls[e.data["call_id"]][1] = e.data["outcome"]
    return [tuple(c) for c in calls.values()]  # type: ignore[misc]


# -- one call, then the cache ----------------------------------------------------------------------
def test_a_broad_query_costs_one_call_and_its_repeat_costs_none(services, cache, gemini, gemini_key) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key)

    embed_query, stage = step_back.run(BROAD)

    assert embed_query == gemini.generalised(BROAD)
    assert (stage.step, stage.status) == ("step-back", "done")
    assert "1 call to gemini:gemini-2.5-flash" in stage.detail and BROAD in stage.detail
    assert [(r.kind, r.status) for r in gemini.requests] == [("generate", 200)]
    assert _ledger_calls(services) == [("step-back", "ok")]
    assert services.quota.status("gemini")["generate"]["spent"] == 1

    position = services.ledger.event_log.position()
    again, cached = step_back.run(SAME_BROAD)

    assert again == embed_query
    assert cached.status == "done" and cached.detail.startswith("from cache, no call")
    assert len(gemini.requests) == 1  # zero calls
    assert services.ledger.event_log.position() == position  # not even a quota check written


def test_the_cache_is_durable_across_processes(services, cache, gemini, gemini_key, store_url) -> None:
    first, _ = _step_back(services, cache, gemini, gemini_key).run(BROAD)
    other = bootstrap(store_url)  # a second process's view of the same store
    try:
        its_cache = SqlStepBackCache(other.canon.write_engine, other.canon.read_engine)
        its_cache.setup()  # idempotent: the table is there already
        again, stage = _step_back(other, its_cache, gemini, gemini_key).run(SAME_BROAD)
    finally:
        other.close()
    assert again == first and stage.detail.startswith("from cache")
    assert len(gemini.requests) == 1


def test_an_expired_entry_costs_one_new_call(services, cache, gemini, gemini_key) -> None:
    clock = Clock()
    step_back = _step_back(services, cache, gemini, gemini_key, clock=clock, ttl_s=3600)
    step_back.run(BROAD)

    clock.now = T0 + 3599
    assert step_back.run(BROAD).stage.detail.startswith("from cache")
    clock.now = T0 + 3600  # expired at exactly its TTL
    assert cache.get(cache_key(BROAD), clock.now) is None
    embed_query, stage = step_back.run(BROAD)

    assert stage.status == "done" and stage.detail.startswith("1 call")
    assert len(gemini.requests) == 2
    assert _ledger_calls(services) == [("step-back", "ok"), ("step-back", "ok")]
    clock.now = T0 + 3600 + 3599  # the new entry has its own TTL
    assert step_back.run(BROAD).stage.detail.startswith("from cache")
    assert cache.purge(T0 + 10 * 3600) == 1 and cache.get(cache_key(BROAD), T0) is None


def test_the_default_ttl_is_hours() -> None:
    assert 3600 <= DEFAULT_TTL_S <= 24 * 3600


# -- skipped -----------------------------------------------------------------------------------
def test_a_narrow_query_is_skipped_with_no_call_and_no_ledger_event(services, cache, gemini, gemini_key) -> None:
    embed_query, stage = _step_back(services, cache, gemini, gemini_key).run(NARROW)
    assert embed_query == NARROW
    assert (stage.status, stage.detail.split(":")[0]) == ("skipped", "narrow")
    assert gemini.requests == [] and _quota_events(services) == []


def test_offline_is_skipped_even_when_the_cache_holds_an_answer(services, cache, gemini, gemini_key) -> None:
    _step_back(services, cache, gemini, gemini_key).run(BROAD)  # an online day cached it
    position = services.ledger.event_log.position()

    embed_query, stage = _step_back(services, cache, None, gemini_key).run(BROAD)

    assert embed_query == BROAD
    assert (stage.status, stage.detail.split(":")[0]) == ("skipped", "offline")
    assert len(gemini.requests) == 1 and services.ledger.event_log.position() == position


def test_a_spent_day_is_skipped_for_quota_without_a_call(services, cache, gemini, gemini_key) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key, generate_per_day=1)
    assert step_back.run(BROAD).stage.status == "done"  # spends the day's one call
    position = services.ledger.event_log.position()

    embed_query, stage = step_back.run(OTHER_BROAD)

    assert embed_query == OTHER_BROAD
    assert (stage.status, stage.detail.split(":")[0]) == ("skipped", "quota")
    assert "1 of 1 generate calls spent" in stage.detail
    assert len(gemini.requests) == 1
    assert services.ledger.event_log.position() == position  # the status check writes nothing
    assert step_back.run(SAME_BROAD).stage.detail.startswith("from cache")  # what is cached still serves


def test_a_429_exhausts_the_day_and_later_broad_queries_skip_for_quota(services, cache, gemini, gemini_key) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key)
    gemini.script("429", kind="generate")

    embed_query, stage = step_back.run(BROAD)

    assert embed_query == BROAD
    assert (stage.status, stage.detail.split(":")[0]) == ("skipped", "quota")
    assert "429" in stage.detail and gemini_key not in stage.detail
    assert _ledger_calls(services) == [("step-back", "error")]  # made, so it counts
    status = services.quota.status("gemini")
    assert status["exhausted"] and "429" in status["exhausted"] and status["generate"]["left"] == 0
    assert cache.get(cache_key(BROAD), T0) is None

    position = services.ledger.event_log.position()
    later, skipped = step_back.run(OTHER_BROAD)
    assert later == OTHER_BROAD and skipped.detail.startswith("quota: ")
    assert len(gemini.requests) == 1 and services.ledger.event_log.position() == position


def test_a_per_minute_429_skips_this_query_without_ending_the_day(services, cache, gemini, gemini_key) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key)
    gemini.script("429_minute", kind="generate")
    assert step_back.run(BROAD).stage.detail.startswith("quota: ")
    assert not services.quota.status("gemini")["exhausted"]
    assert step_back.run(BROAD).stage.status == "done"  # the next ask goes through
    assert len(gemini.requests) == 2


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("behaviour", ["503", "invalid_json", "wrong_schema"])
def test_a_failed_call_embeds_the_original_caches_nothing_and_is_not_retried(services, cache, gemini, gemini_key,
                                                                             behaviour) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key)
    gemini.script(behaviour, kind="generate")

    embed_query, stage = step_back.run(BROAD)

    assert embed_query == BROAD and stage.status == "error"
    assert "embedding the original" in stage.detail and gemini_key not in stage.detail
    assert len(gemini.requests) == 1 and step_back.sleep == []
    assert _ledger_calls(services) == [("step-back", "error")]
    assert cache.get(cache_key(BROAD), T0) is None
    assert not services.quota.status("gemini")["exhausted"]


def test_a_5xx_is_retried_only_when_asked_each_retry_its_own_reserved_call(services, cache, gemini, gemini_key) -> None:
    step_back = _step_back(services, cache, gemini, gemini_key, retries_5xx=1)
    gemini.script("503", kind="generate")

    embed_query, stage = step_back.run(BROAD)

    assert embed_query == gemini.generalised(BROAD) and stage.status == "done"
    assert [r.status for r in gemini.requests] == [503, 200]
    assert step_back.sleep == [0.5]
    assert _ledger_calls(services) == [("step-back", "error"), ("step-back", "ok")]


def test_a_broken_cache_is_an_error_stage_not_an_exception(services, gemini, gemini_key) -> None:
    unset = SqlStepBackCache(services.canon.write_engine, services.canon.read_engine)  # no setup: no table
    embed_query, stage = _step_back(services, unset, gemini, gemini_key).run(BROAD)
    assert embed_query == BROAD
    assert stage.status == "error" and "embedding the original" in stage.detail
    assert gemini.requests == []


def test_step_back_has_its_own_share_of_the_day(services, cache, gemini, gemini_key) -> None:
    """Step-back may spend QuotaPolicy.step_back_per_day generate calls, so broad searches
    cannot eat the compile's share: past it, broad queries skip for quota with no call."""
    quota = Quota(services.ledger, QuotaPolicy(generate_per_day=20, step_back_per_day=1))
    step_back = StepBack(cache, quota, "gemini", GeminiProvider(gemini_key, base_url=gemini.url, timeout_ms=2_000),
                         clock=Clock(), sleep=Sleeps())
    assert step_back.run(BROAD).stage.status == "done"
    embed_query, stage = step_back.run(OTHER_BROAD)
    assert embed_query == OTHER_BROAD and (stage.status, stage.detail.split(":")[0]) == ("skipped", "quota")
    assert "step-back may use 1 generate calls a day" in stage.detail
    assert len(gemini.requests) == 1
    status = quota.status("gemini")["generate"]
    assert (status["step_back_spent"], status["step_back_cap"], status["left"]) == (1, 1, 19)
