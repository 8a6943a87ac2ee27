"""The Gemini provider through the real google-genai SDK, against a fake Gemini server, on both stores.

What is checked: pages compile from structured output and embeddings; every call the compiler makes
is reserved before and settled after in the quota ledger, and the ledger's spent calls equal the
requests the server saw; 5xx retried, 429 stops the batch for the day, invalid JSON and timeouts
write no page; the API key never leaks (events, exceptions, logs, the CLI's output); staleness
comes and goes with edits without any call; the offline compile makes no network call at all;
the step-back call is one structured request whose failures come back as our provider errors.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from canon_ledger.application.knowledge.lint import lint
from canon_ledger.application.knowledge.ports import ChunkView, ProviderError, ProviderExhausted, ProviderThrottled, TopicView
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.providers.gemini import GeminiProvider, RetryableProviderError
from tests.fakes.gemini_server import FakeGemini
from tests.cli_runner import console_script as _canon  # the installed `canon`, run as a process

GUIDE = """# Lamplighting

How the Guild trims lamps.

## Wicks

Trim the wick once a night. A trimmed wick burns clean and shows its memory.

## Oil

Colza oil only. Whale oil smokes and clouds the glass.

## Curfew

After the ninth bell only licensed lamplighters walk the Quay.
"""
GUIDE_TOPICS = 4  # the root section and its three subsections
BELLS = "# Bells\n\nThe ninth bell rings at curfew. Nobody rings it twice.\n"

TIMEOUT_MS = 2_000  # generous for a local server, small enough to keep failures quick
SHORT_TIMEOUT_MS = 500  # the ``timeout`` cases: the server answers only after ``server.timeout_s`` (2 s)


# -- fixtures: the fake server and its key are tests/conftest.py's ``gemini`` and ``gemini_key`` --
class Sleeps(list):
    """Stands in for ``time.sleep`` between 5xx retries: records the delays, waits for none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _gemini(services: Any, gemini: FakeGemini, gemini_key: str, timeout_ms: int = TIMEOUT_MS) -> Any:
    compiler = services.compiler("gemini", api_key=gemini_key, base_url=gemini.url, timeout_ms=timeout_ms)
    compiler.sleep = Sleeps()
    return compiler


def _ingest(services: Any, text: str, document: str = "guide.md", collection: str = "guild") -> None:
    [result] = services.ledger.apply([parse_command({
        "type": "ingest_document", "command_id": uuid.uuid4().hex, "collection_id": collection,
        "document_id": document, "title": "Guild Guide", "text": text})])
    assert result.ok, result.as_dict()


def _edit(services: Any, chunk_id: str, text: str) -> None:
    [result] = services.ledger.apply([parse_command({"type": "edit_chunk", "command_id": uuid.uuid4().hex,
                                                     "chunk_id": chunk_id, "text": text})])
    assert result.status == "applied", result.as_dict()


def _events(services: Any, start: int = 1, prefix: str = "") -> list[Any]:
    return [e for e in services.ledger.event_log.history(start=start) if e.type.startswith(prefix)]


def _calls(services: Any, start: int = 1) -> dict[str, dict[str, Any]]:
    """Every call in the quota ledger: call_id -> {kind, purpose, outcome (None while reserved)}."""
    calls: dict[str, dict[str, Any]] = {}
    for e in _events(services, start, "QuotaDay."):
        if e.type == "QuotaDay.Reserved":
            calls[e.data["call_id"]] = {"kind": e.data["kind"], "purpose": e.data["purpose"], "outcome": None}
        elif e.type == "QuotaDay.Settled":
            assert e.data["call_id"] in calls, "settled a call that was never reserved"
            calls[e.data["call_id"]]["outcome"] = e.data["outcome"]
    return calls


def _spent(services: Any, start: int = 1, kind: str | None = None) -> list[dict[str, Any]]:
    """Calls settled as made (ok or error): what the provider counted against us."""
    return [c for c in _calls(services, start).values()
            if c["outcome"] in ("ok", "error") and (kind is None or c["kind"] == kind)]


def _pages(services: Any) -> list[Any]:
    services.knowledge.catch_up_serving()
    with services.knowledge_reader.snapshot() as snap:
        return snap.pages()


def _lint(services: Any) -> Any:
    services.knowledge.catch_up_serving()
    with services.knowledge_reader.snapshot() as snap:
        return lint(snap)


def _stale_ids(compiler: Any) -> list[str]:
    return [s.topic.topic_id for s in compiler.stale()]


def _assert_whole(page: Any) -> None:
    """No half-written page: a title, a TLDR and an embedding, all from one compile."""
    assert page.title and page.tldr, page
    assert page.embedding and len(page.embedding) == 8 and page.embedding_key, page
    assert page.method == "gemini:gemini-2.5-flash"


def _assert_no_key(gemini_key: str, *texts: str) -> None:
    for text in texts:
        assert gemini_key not in text
        assert gemini_key[len("test-key-"):] not in text  # nor its random part


def _events_text(services: Any) -> str:
    return json.dumps([{"type": e.type, "data": e.data} for e in services.ledger.event_log.history()], default=str)


# -- success -----------------------------------------------------------------------------------
def test_a_batch_compiles_every_page_and_the_ledger_counts_every_call(services, gemini, gemini_key) -> None:
    _ingest(services, GUIDE)
    compiler = _gemini(services, gemini, gemini_key)
    assert len(_stale_ids(compiler)) == GUIDE_TOPICS

    report = compiler.nightly()

    assert (report.compiled, report.failed, report.remaining_stale, report.stopped_reason) == (GUIDE_TOPICS, 0, 0, "done")
    generate, embed = gemini.calls("generate"), gemini.calls("embed")
    assert len(generate) == len(embed) == GUIDE_TOPICS
    assert {(r.method, r.path) for r in generate} == {("POST", "/v1beta/models/gemini-2.5-flash:generateContent")}
    assert {(r.method, r.path) for r in embed} == {("POST", "/v1beta/models/gemini-embedding-001:batchEmbedContents")}
    assert all(r.carried_key and not r.key_in_query and r.status == 200 for r in gemini.requests)
    # Structured output was asked for, with the page schema.
    config = generate[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert set(config["responseSchema"]["properties"]) == {"title", "tldr", "body", "tags", "wikilinks"}

    calls = _calls(services)
    assert len(calls) == 2 * GUIDE_TOPICS and all(c["outcome"] == "ok" and c["purpose"] == "compile" for c in calls.values())
    status = services.quota.status("gemini")
    assert status["generate"]["spent"] == status["generate"]["compile_spent"] == GUIDE_TOPICS
    assert status["embed"]["spent"] == GUIDE_TOPICS
    assert not status["exhausted"] and status["refused"] == 0
    assert len(_spent(services)) == len(gemini.requests)

    pages = _pages(services)
    assert len(pages) == GUIDE_TOPICS
    for page in pages:
        _assert_whole(page)
        assert not page.stale and page.tldr.startswith("What the sources say about")
    assert any(page.wikilinks for page in pages)  # the fake links to a neighbour; the compiler kept valid ones
    assert _lint(services).green

    # Nothing is stale: a second night makes no call and reserves nothing.
    position = services.ledger.event_log.position()
    again = compiler.nightly()
    assert (again.compiled, again.skipped, again.stopped_reason) == (0, 0, "done")
    assert len(gemini.requests) == 2 * GUIDE_TOPICS and _events(services, position + 1, "QuotaDay.") == []
    _assert_no_key(gemini_key, _events_text(services))


# -- 5xx ---------------------------------------------------------------------------------------
def test_a_503_is_retried_as_a_second_reserved_call(services, gemini, gemini_key) -> None:
    _ingest(services, BELLS, document="bells.md")
    compiler = _gemini(services, gemini, gemini_key)
    gemini.script("503", kind="generate")

    report = compiler.nightly()

    assert (report.compiled, report.failed, report.stopped_reason) == (1, 0, "done")
    assert [(r.kind, r.status) for r in gemini.requests] == [("generate", 503), ("generate", 200), ("embed", 200)]
    assert compiler.sleep == [0.5]
    # Each attempt reserved before it was sent and settled after, in that order.
    sequence = [(e.type.split(".")[1], e.data.get("kind"), e.data.get("outcome")) for e in _events(services, 1, "QuotaDay.")
                if e.type != "QuotaDay.Opened"]
    assert sequence == [("Reserved", "generate", None), ("Settled", None, "error"),
                        ("Reserved", "generate", None), ("Settled", None, "ok"),
                        ("Reserved", "embed", None), ("Settled", None, "ok")]
    assert len(_spent(services, kind="generate")) == 2 == len(gemini.calls("generate"))
    assert services.quota.status("gemini")["generate"]["spent"] == 2
    [page] = _pages(services)
    _assert_whole(page)
    assert _lint(services).green


def test_a_503_that_persists_fails_the_page_after_three_retries(services, gemini, gemini_key) -> None:
    _ingest(services, BELLS, document="bells.md")
    compiler = _gemini(services, gemini, gemini_key)
    gemini.script("503", "503", "503", "503", kind="generate")

    report = compiler.nightly()

    assert (report.compiled, report.failed, report.stopped_reason) == (0, 1, "done")
    assert report.pages[0]["outcome"] == "failed" and "503" in report.pages[0]["detail"]
    assert [r.status for r in gemini.requests] == [503, 503, 503, 503]
    assert compiler.sleep == [0.5, 1.0, 2.0]
    spent = _spent(services)
    assert len(spent) == 4 and {c["outcome"] for c in spent} == {"error"}
    assert _pages(services) == [] and _events(services, 1, "WikiPage.") == []
    assert len(_stale_ids(compiler)) == 1
    assert not services.quota.status("gemini")["exhausted"]


# -- 429 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("failing", ["generate", "embed"])
def test_a_429_mid_batch_stops_for_the_day_and_writes_no_half_page(services, gemini, gemini_key, failing) -> None:
    _ingest(services, GUIDE)
    compiler = _gemini(services, gemini, gemini_key)
    gemini.script("ok", "ok", "429", kind=failing)  # the third page's call is refused

    report = compiler.nightly()

    assert report.stopped_reason == "quota" and "429" in report.detail
    assert (report.compiled, report.failed, report.remaining_stale) == (2, 0, GUIDE_TOPICS - 2)
    expected = ["generate", "embed"] * 2 + (["generate"] if failing == "generate" else ["generate", "embed"])
    assert [r.kind for r in gemini.requests] == expected
    assert [r.status for r in gemini.requests][-1] == 429

    # Every page written is whole; the others stay stale (never compiled).
    pages = _pages(services)
    assert len(pages) == 2
    for page in pages:
        _assert_whole(page)
    compiled = _events(services, 1, "WikiPage.PageCompiled")
    assert len(compiled) == 2
    for e in compiled:
        assert e.data["page"]["title"] and e.data["page"]["tldr"] and e.data["page"]["embedding"]
    stale = _stale_ids(compiler)
    assert len(stale) == GUIDE_TOPICS - 2 and not set(stale) & {p.topic_id for p in pages}

    # The ledger: what it counts as spent is exactly what the server received; nothing left reserved.
    calls = _calls(services)
    assert all(c["outcome"] is not None for c in calls.values())
    assert len(_spent(services)) == len(gemini.requests) == len(expected)
    assert [c["outcome"] for c in calls.values()][-1] == "error"
    status = services.quota.status("gemini")
    assert status["exhausted"] and "429" in status["exhausted"]
    assert status["generate"]["left"] == 0 and status["embed"]["left"] == 0
    assert len(_events(services, 1, "QuotaDay.Exhausted")) == 1

    # A further night reserves nothing, sends nothing and stops at once.
    position, seen = services.ledger.event_log.position(), len(gemini.requests)
    again = compiler.nightly()
    assert (again.compiled, again.failed, again.stopped_reason) == (0, 0, "quota")
    assert again.remaining_stale == GUIDE_TOPICS - 2
    assert len(gemini.requests) == seen
    later = _events(services, position + 1, "QuotaDay.")
    assert [e.type for e in later] == ["QuotaDay.Refused"]  # the refusal is on the record; no reservation
    assert not _lint(services).issues  # the written pages are fresh; the others are simply not compiled yet
    _assert_no_key(gemini_key, _events_text(services), report.detail, again.detail)


def test_one_reserved_call_is_one_request_even_when_the_model_asks_to_continue(services, gemini, gemini_key) -> None:
    _ingest(services, BELLS, document="bells.md")
    compiler = _gemini(services, gemini, gemini_key)
    gemini.script("continuation", kind="generate")

    report = compiler.nightly()

    assert len(_spent(services)) == len(gemini.requests), (
        f"the ledger spent {len(_spent(services))} calls, the server saw "
        f"{[(r.kind, r.behaviour) for r in gemini.requests]}; report {report.as_dict()}")


# -- bad answers -------------------------------------------------------------------------------
def test_an_answer_that_is_not_a_valid_page_writes_nothing(services, gemini, gemini_key) -> None:
    _ingest(services, BELLS, document="bells.md")
    compiler = _gemini(services, gemini, gemini_key)
    assert compiler.nightly().compiled == 1
    [before] = _pages(services)
    topic = before.topic_id
    _edit(services, "guild/bells.md#bells/0", "The ninth bell rings at curfew. The tenth never rings.")
    assert _stale_ids(compiler) == [topic]

    for behaviour in ("invalid_json", "wrong_schema"):  # not JSON at all; JSON without the schema's fields
        position, seen = services.ledger.event_log.position(), len(gemini.requests)
        gemini.script(behaviour, kind="generate")

        report = compiler.nightly()

        assert (report.compiled, report.failed, report.stopped_reason) == (0, 1, "done"), behaviour
        assert "parsed is None" in report.pages[0]["detail"]
        assert [(r.kind, r.behaviour, r.status) for r in gemini.requests[seen:]] == [("generate", behaviour, 200)]
        assert _events(services, position + 1, "WikiPage.") == []  # no page written
        assert [c["outcome"] for c in _calls(services, position + 1).values()] == ["error"]  # made, so it counts
        assert len(_spent(services)) == len(gemini.requests)
        [after] = _pages(services)
        assert after.stale and after.tldr == before.tldr  # still serving its last good TLDR
        assert _stale_ids(compiler) == [topic]
        assert [i.code for i in _lint(services).issues] == ["stale_tldr"]


def test_a_timeout_writes_no_page_and_is_settled_as_an_error(services, gemini, gemini_key) -> None:
    _ingest(services, BELLS, document="bells.md")
    compiler = _gemini(services, gemini, gemini_key, timeout_ms=SHORT_TIMEOUT_MS)
    gemini.script("timeout", kind="generate")

    started = time.monotonic()
    report = compiler.nightly()
    elapsed = time.monotonic() - started

    assert elapsed < gemini.timeout_s  # the client gave up; it did not wait for the late answer
    assert (report.compiled, report.failed, report.stopped_reason) == (0, 1, "done")
    assert "did not answer in time" in report.pages[0]["detail"]
    assert [(r.kind, r.behaviour) for r in gemini.requests] == [("generate", "timeout")]
    assert compiler.sleep == []  # a timeout is not retried
    assert [c["outcome"] for c in _calls(services).values()] == ["error"]
    assert len(_spent(services)) == len(gemini.requests) == 1
    assert _pages(services) == [] and _events(services, 1, "WikiPage.") == []
    assert len(_stale_ids(compiler)) == 1
    assert not services.quota.status("gemini")["exhausted"]


# -- the key -----------------------------------------------------------------------------------
def test_the_api_key_never_leaks_into_events_errors_or_logs(services, gemini, gemini_key, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    _ingest(services, GUIDE)
    compiler = _gemini(services, gemini, gemini_key, timeout_ms=SHORT_TIMEOUT_MS)
    # page 1: 503 then ok; page 2: invalid JSON; page 3: timeout; page 4: 429
    gemini.script("503", "ok", "invalid_json", "timeout", "429", kind="generate")
    report = compiler.nightly()
    assert report.stopped_reason == "quota" and report.compiled == 1 and report.failed == 2

    # Each error straight from the provider: message, repr and formatted traceback.
    provider = compiler.writer
    topic = TopicView("guild", "guild/x", "X", "x.md")
    chunk = ChunkView("guild/x/0", "Doc > X\n\nSome text.", "h")
    raised: list[BaseException] = []
    for behaviour in ("503", "429", "invalid_json", "wrong_schema", "timeout"):
        gemini.script(behaviour, kind="generate")
        with pytest.raises(ProviderError) as info:
            provider.write(topic, [chunk], [])
        raised.append(info.value)
    gemini.script("503", "429", kind="embed")
    for _ in range(2):
        with pytest.raises(ProviderError) as info:
            provider.embed(["text"])
        raised.append(info.value)
    assert isinstance(raised[1], ProviderExhausted) and getattr(raised[0], "retryable", False)

    texts = [_events_text(services), json.dumps(report.as_dict())]
    for error in raised:
        texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
    texts += [f"{r.name} {r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records]
    _assert_no_key(gemini_key, *texts)
    assert all(r.carried_key and not r.key_in_query for r in gemini.requests)  # it was sent, in the header only


def test_the_cli_compiles_with_gemini_and_never_prints_the_key(services, gemini, gemini_key, store_url) -> None:
    _ingest(services, GUIDE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "CANON_"))}
    env.update({"GEMINI_API_KEY": gemini_key, "GOOGLE_GEMINI_BASE_URL": gemini.url, "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost", "PYTHONWARNINGS": "default"})
    db = make_url(store_url).render_as_string(hide_password=False)
    # page 1: ok; page 2: 503 then ok; page 3: invalid JSON; page 4: 429
    gemini.script("ok", "503", "ok", "invalid_json", "429", kind="generate")

    run = subprocess.run([_canon(), "compile", "--provider", "gemini", "--db", db],
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("compiled 2 page(s), skipped 0, failed 1; 2 still stale; stopped: quota (")
    assert "429 RESOURCE_EXHAUSTED" in run.stdout

    assert [r.status for r in gemini.requests] == [200, 200, 503, 200, 200, 200, 429]
    assert all(r.carried_key for r in gemini.requests)
    assert len(_spent(services)) == len(gemini.requests)
    assert services.quota.status("gemini")["exhausted"]
    _assert_no_key(gemini_key, run.stdout, run.stderr, _events_text(services))


# -- no calls ----------------------------------------------------------------------------------
def test_edit_then_revert_makes_the_page_stale_then_fresh_with_no_call(services, gemini, gemini_key) -> None:
    _ingest(services, GUIDE)
    compiler = _gemini(services, gemini, gemini_key)
    assert compiler.nightly().compiled == GUIDE_TOPICS
    seen, position = len(gemini.requests), services.ledger.event_log.position()
    oil = "guild/guide.md#lamplighting/oil"
    with services.knowledge_reader.snapshot() as snap:
        original = snap.page("guild", oil)

    _edit(services, f"{oil}/0", "Whale oil is allowed now.")
    assert _stale_ids(compiler) == [oil]
    with services.knowledge_reader.snapshot() as snap:
        page = snap.page("guild", oil)
        assert page.stale and page.tldr == original.tldr
    assert [i.code for i in _lint(services).issues] == ["stale_tldr"]

    _edit(services, f"{oil}/0", "Colza oil only. Whale oil smokes and clouds the glass.")
    assert _stale_ids(compiler) == []
    with services.knowledge_reader.snapshot() as snap:
        page = snap.page("guild", oil)
        assert not page.stale and page.source_set_hash == original.source_set_hash
    assert _lint(services).green

    again = compiler.nightly()
    assert (again.compiled, again.skipped, again.stopped_reason) == (0, 0, "done")
    assert len(gemini.requests) == seen  # zero calls to the server
    assert _events(services, position + 1, "QuotaDay.") == [] and _events(services, position + 1, "WikiPage.") == []


def test_the_offline_compile_makes_no_network_call(services, gemini, store_url, monkeypatch) -> None:
    url = make_url(store_url)
    db_port = (url.port or 5432) if url.get_backend_name().startswith("postgres") else None
    attempts: list[Any] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def allowed(address: Any) -> bool:
        return isinstance(address, tuple) and db_port is not None and address[1] == db_port

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(address):
            attempts.append(address)
            raise OSError(f"network blocked in this test: {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(address):
            attempts.append(address)
            return 111  # ECONNREFUSED
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    _ingest(services, GUIDE)
    _ingest(services, BELLS, document="bells.md")

    report = services.compiler("offline").nightly()

    assert (report.compiled, report.failed, report.stopped_reason) == (GUIDE_TOPICS + 1, 0, "done")
    assert attempts == [] and gemini.requests == []
    assert _events(services, 1, "QuotaDay.") == []  # the offline provider is not metered
    pages = _pages(services)
    assert len(pages) == GUIDE_TOPICS + 1 and all(p.tldr and p.embedding for p in pages)
    assert {p.method for p in pages} == {"extractive"}
    assert _lint(services).green


def test_a_per_minute_429_stops_the_batch_without_spending_the_day(services, gemini, gemini_key) -> None:
    _ingest(services, GUIDE)
    compiler = _gemini(services, gemini, gemini_key)
    gemini.script("ok", "429_minute", kind="generate")
    report = compiler.nightly()
    assert report.stopped_reason == "quota" and "rate limited" in report.detail
    assert report.compiled == 1 and report.remaining_stale == GUIDE_TOPICS - 1
    status = services.quota.status("gemini")
    assert status["exhausted"] is None and status["generate"]["left"] > 0
    again = compiler.nightly()  # the next run goes on: the day is not over
    assert again.compiled == GUIDE_TOPICS - 1 and again.stopped_reason == "done"
    assert len(_spent(services)) == len(gemini.requests)


# -- step-back ---------------------------------------------------------------------------------
def test_step_back_is_one_structured_call_and_its_failures_are_ours(gemini, gemini_key) -> None:
    provider = GeminiProvider(gemini_key, base_url=gemini.url, timeout_ms=TIMEOUT_MS)
    question = "What are the main themes of this story?"

    assert provider.step_back(question) == gemini.generalised(question)

    [request] = gemini.requests
    assert (request.kind, request.model, request.status) == ("generate", "gemini-2.5-flash", 200)
    config = request.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config.get("responseSchema") or config.get("responseJsonSchema")
    assert "query" in json.dumps(schema)
    assert question in request.body["contents"][0]["parts"][0]["text"]

    raised: list[BaseException] = []
    for behaviour, kind, words in [("503", RetryableProviderError, "503"), ("429", ProviderExhausted, "daily quota"),
                                   ("429_minute", ProviderThrottled, "rate limited"),
                                   ("invalid_json", ProviderError, "parsed is None"),
                                   ("wrong_schema", ProviderError, "parsed is None")]:
        gemini.script(behaviour, kind="generate")
        with pytest.raises(kind) as info:
            provider.step_back(question)
        assert words in str(info.value), behaviour
        raised.append(info.value)
    assert getattr(raised[0], "retryable", False) and not getattr(raised[3], "retryable", False)
    assert len(gemini.requests) == 6  # one request per call: the provider itself retries nothing
    _assert_no_key(gemini_key, *[str(e) for e in raised], *[repr(e) for e in raised])
