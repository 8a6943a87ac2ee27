"""A fake Gemini API (Gemini Developer API, ``v1beta``) on 127.0.0.1, for the real google-genai SDK.

Shapes read from google-genai 3.6 (``google/genai/models.py``, ``_api_client.py``, ``errors.py``):

* ``POST /v1beta/models/{model}:generateContent`` with ``{"contents": [{"parts": [{"text": ...}],
  "role": "user"}], "generationConfig": {"responseMimeType": ..., "responseSchema"|"responseJsonSchema": ...}}``;
  the answer is a ``GenerateContentResponse``: ``{"candidates": [{"content": {"parts": [{"text": ...}],
  "role": "model"}, "finishReason": "STOP", "index": 0}], "usageMetadata": ..., "modelVersion": ...,
  "responseId": ...}``. ``response.parsed`` is the candidate text validated against the schema.
* ``POST /v1beta/models/{model}:batchEmbedContents`` with ``{"requests": [{"content": {"parts": [...]},
  "model": "models/..."}]}`` (the Developer API always batches, one request per input); the answer is
  ``{"embeddings": [{"values": [...]}]}``. ``:embedContent`` (``{"content": ...}`` ->
  ``{"embedding": {"values": [...]}}``) is answered too, though the SDK does not use it here.
* The key travels in the ``x-goog-api-key`` header. A non-200 answer is raised by the SDK from its JSON
  body ``{"error": {"code", "message", "status", "details"}}``: 4xx ``ClientError``, 5xx ``ServerError``.

Script behaviours per test, in order: ``server.script("ok", "503", kind="generate")``. A request takes
the next behaviour of its own kind's queue (``generate`` or ``embed``), else of the shared queue
(``kind="any"``), else ``ok``. Behaviours: ``ok``, ``503``, ``429`` (RESOURCE_EXHAUSTED with a
QuotaFailure whose quotaId says PerDay), ``429_minute`` (the same for a per-minute quota, with a
RetryInfo of 7 s), ``invalid_json`` (candidate text that is not JSON),
``wrong_schema`` (JSON that misses the schema's required fields), ``timeout`` (answer only after
``timeout_s``, longer than the client's timeout), ``continuation`` (the first half of the page with
``finishReason: CONTINUATION`` and a ``continuationToken``: the SDK's automatic continuation, on by
default, sends the request again with the token, and the fake answers the rest without taking a
behaviour from the queue). A step-back prompt (``Step back from this question ... Question: Q``) is answered
``{"query": server.generalised(Q)}`` instead of a page, a summary prompt (``Summarise chapter N ...``, ``Summarise
volume N ...``) ``{"summary": server.summary("chapter", N)}``, a continuity prompt (``Continuity check of a chapter
draft ...``, ``canon check --provider gemini``) ``{"findings": server.continuity(draft, table)}``: one finding about
the first entry of its evidence table that the draft names. Every request is logged in ``server.requests``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BEHAVIOURS = ("ok", "503", "429", "429_minute", "invalid_json", "wrong_schema", "timeout", "continuation")
KINDS = {"generateContent": "generate", "batchEmbedContents": "embed", "embedContent": "embed"}
_PATH = re.compile(r"^/(?P<version>v1\w*)/models/(?P<model>[^/:]+):(?P<action>\w+)$")
_STEP_BACK = re.compile(r"^Step back from this question.*\nQuestion: (?P<query>.*)$", re.DOTALL)
_SUMMARY = re.compile(r"^Summarise (?P<what>chapter|volume) (?P<number>\d+) ")
_CONTINUITY = re.compile(r"^Continuity check of a chapter draft.*?\nEvidence table \(JSON, one entry per line\):\n"
                         r"(?P<table>.*?)\n\n.*?\n<<<DRAFT\n(?P<draft>.*)\nDRAFT>>>$", re.DOTALL)
_TOPIC = re.compile(r'about the topic "(?P<title>[^"\n]*)"')
_RELATED = re.compile(r"^- (?P<id>\S+): ", re.MULTILINE)

ERROR_503 = {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                       "status": "UNAVAILABLE"}}
ERROR_429_MINUTE = {"error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. "
               "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
               "limit: 10, model: gemini-2.5-flash",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                         "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                         "quotaValue": "10"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"},
    ]}}
ERROR_429 = {"error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. "
               "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
               "limit: 20, model: gemini-2.5-flash",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                         "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                         "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                         "quotaValue": "20"}]},
        {"@type": "type.googleapis.com/google.rpc.Help",
         "links": [{"description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "41s"},
    ]}}


@dataclass
class Request:
    method: str
    path: str
    model: str | None
    action: str | None
    kind: str | None  # generate | embed | None (unknown path)
    carried_key: bool  # the x-goog-api-key header was present (and equal to the expected key, if one is set)
    key_in_query: bool
    behaviour: str
    status: int  # what the server answered (for ``timeout``: what it answered after the client had gone)
    body: Any = field(repr=False, default=None)


class FakeGemini:
    """``with FakeGemini(expected_key=...) as server: ... server.url ... server.requests``."""

    def __init__(self, *, expected_key: str | None = None, timeout_s: float = 2.0, dimensions: int = 8) -> None:
        self.expected_key = expected_key
        self.timeout_s = timeout_s
        self.dimensions = dimensions
        self.requests: list[Request] = []
        self._queues: dict[str, deque[str]] = {"generate": deque(), "embed": deque(), "any": deque()}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._continuations: dict[str, str] = {}  # token -> the rest of the candidate text
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --------------------------------------------------------------------------
    def script(self, *behaviours: str, kind: str = "any") -> FakeGemini:
        for b in behaviours:
            if b not in BEHAVIOURS:
                raise ValueError(f"unknown behaviour {b!r}; one of {BEHAVIOURS}")
        with self._lock:
            self._queues[kind].extend(behaviours)
        return self

    def pending(self) -> dict[str, list[str]]:
        with self._lock:
            return {k: list(q) for k, q in self._queues.items()}

    def _next(self, kind: str | None) -> str:
        with self._lock:
            for name in (kind, "any"):
                if name and self._queues.get(name):
                    return self._queues[name].popleft()
        return "ok"

    def calls(self, kind: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if kind is None or r.kind == kind]

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeGemini:
        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))  # port 0: a free port
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-gemini", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a ``timeout``
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers ----------------------------------------------------------------------------
    def vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return [round((digest[i % len(digest)] - 127.5) / 127.5, 6) for i in range(self.dimensions)]

    def page(self, prompt: str) -> dict[str, Any]:
        match = _TOPIC.search(prompt)
        title = match.group("title") if match else "Untitled"
        links = _RELATED.findall(prompt.split("Sources:", 1)[0])[:1]
        words = [w.casefold() for w in re.findall(r"[A-Za-z]{4,}", title)][:3]
        return {"title": title, "tldr": f"What the sources say about {title}.",
                "body": f"A page about {title}, written by the fake Gemini server.",
                "tags": ["fake", *words], "wikilinks": links}

    def generalised(self, query: str) -> str:
        """The fake's step-back answer: recognisably derived from the question."""
        return f"the big picture behind: {query.strip()}"

    def summary(self, what: str, number: int) -> str:
        """The fake's summary of a chapter or volume: it names what it summarises."""
        return f"The fake Gemini server's summary of {what} {number}."

    def continuity(self, draft: str, table: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The fake's continuity findings: one warning on the first entry of the table (in its order)
        whose name the draft writes, at its first place, citing the entry's step in force (else its
        first), or none."""
        for entry in table:
            start = draft.find(entry["name"]) if entry.get("name") else -1
            if start < 0 or not entry.get("steps"):
                continue
            step = next((s for s in entry["steps"] if s["standing"] == "in force"), entry["steps"][0])
            end = start + len(entry["name"])
            return [{"type": "field_conflict", "severity": "warning",
                     "entry": {"kind": entry["kind"], "key": entry["key"], "name": entry["name"]},
                     "span": {"start": start, "end": end, "text": draft[start:end]},
                     "evidence": [{"text": step["text"], "valid_from": step["valid_from"], "source": step["source"]}],
                     "message": f"The fake Gemini server doubts what the draft says of {entry['name']}."}]
        return []

    def answer(self, kind: str | None, behaviour: str, body: Any) -> tuple[int, Any]:
        if behaviour == "503":
            return 503, ERROR_503
        if behaviour == "429":
            return 429, ERROR_429
        if behaviour == "429_minute":
            return 429, ERROR_429_MINUTE
        if kind == "embed":
            if isinstance(body, dict) and "requests" in body:
                return 200, {"embeddings": [{"values": self.vector(_text(r.get("content")))}
                                            for r in body["requests"]]}
            return 200, {"embedding": {"values": self.vector(_text((body or {}).get("content")))}}
        prompt = _text(((body or {}).get("contents") or [{}])[0])
        finish, extra = "STOP", {}
        if behaviour == "continued":
            with self._lock:
                text = self._continuations.pop(_token(body["continuationToken"]))
        elif behaviour == "invalid_json":
            text = '{"title": "Half a page", "tldr": "cut off in the midd'
        elif behaviour == "wrong_schema":
            text = json.dumps({"name": "not a page", "summary": "the schema's fields are missing"})
        elif (step_back := _STEP_BACK.match(prompt)) is not None:
            text = json.dumps({"query": self.generalised(step_back.group("query"))})
        elif (check := _CONTINUITY.match(prompt)) is not None:
            table = [json.loads(line) for line in check.group("table").splitlines() if line.strip()]
            text = json.dumps({"findings": self.continuity(check.group("draft"), table)})
        elif (summary := _SUMMARY.match(prompt)) is not None:
            text = json.dumps({"summary": self.summary(summary.group("what"), int(summary.group("number")))})
        else:
            text = json.dumps(self.page(prompt))
        if behaviour == "continuation":
            token = base64.b64encode(uuid.uuid4().bytes).decode("ascii")
            half = len(text) // 2
            with self._lock:
                self._continuations[_token(token)] = text[half:]
            text, finish, extra = text[:half], "CONTINUATION", {"continuationToken": token}
        return 200, {
            "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": finish,
                            "index": 0, **extra}],
            "usageMetadata": {"promptTokenCount": max(1, len(prompt) // 4), "candidatesTokenCount": len(text) // 4,
                              "totalTokenCount": max(1, len(prompt) // 4) + len(text) // 4},
            "modelVersion": "gemini-2.5-flash-fake",
            "responseId": hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:16],
        }


def _token(token: str) -> bytes:
    """The token's bytes: the SDK holds it as bytes and may send it back in the URL-safe alphabet."""
    token = token.replace("-", "+").replace("_", "/")
    return base64.b64decode(token + "=" * (-len(token) % 4))


def _text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    return "".join(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))


def _handler(server: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:  # noqa: N802
            self._handle(None)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            self._handle(body)

        def _handle(self, body: Any) -> None:
            parts = urlsplit(self.path)
            match = _PATH.match(parts.path)
            model = match.group("model") if match else None
            action = match.group("action") if match else None
            kind = KINDS.get(action or "") if self.command == "POST" else None
            header = self.headers.get("x-goog-api-key")
            carried = header is not None and (server.expected_key is None or header == server.expected_key)
            key_in_query = "key" in parse_qs(parts.query)
            if kind is None:
                behaviour = "unknown"
                status, payload = 404, {"error": {"code": 404, "message": f"no such method {parts.path}",
                                                  "status": "NOT_FOUND"}}
            else:
                token = body.get("continuationToken") if kind == "generate" and isinstance(body, dict) else None
                with server._lock:
                    continued = token is not None and _token(token) in server._continuations
                behaviour = "continued" if continued else server._next(kind)
                status, payload = server.answer(kind, behaviour, body)
            record = Request(self.command, self.path, model, action, kind, carried, key_in_query, behaviour, status, body)
            with server._lock:
                server.requests.append(record)
            if behaviour == "timeout":
                server._stopping.wait(server.timeout_s)
                self.close_connection = True
            try:
                self._send(status, payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                self.close_connection = True

    return Handler
