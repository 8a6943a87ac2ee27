"""Schemathesis against a real ``canon serve``: every operation of ``/openapi.json``, fuzzed.

One server process on a fresh SQLite store (the demo story applied through the CLI first),
one admin key (made through the CLI, with a random name no generated path can guess) sent on
every generated request. For every response: never a 5xx; every 4xx is problem+json with a
string ``code``; and a refused request (status >= 400) leaves the log's end where it was
(``GET /v1/events``'s ``end``, read after every generated request, so the position before a
request is the one read after the one before it). The last test checks that at least
``MIN_REQUESTS`` generated requests were made, across every operation, and that the admin key
still works.

Schemathesis 4's lazy ``schemathesis.pytest.from_fixture`` needs ``Node._nodeid``, which pytest
9.2 no longer has, and a module-level ``from_url`` would need the server at import time; so each
operation is one pytest test drawing cases from ``operation.as_strategy`` in both generation
modes (what schemathesis's own fuzzing phase does) under ``@given``. The server is stateful, so a
failure Hypothesis cannot replay is reported as ``FlakyFailure``: its first error is the finding.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from canon_ledger.infrastructure.demo import SAMPLE
from tests.cli_runner import CANON, canon
from tests.conftest import initialised

# Under pytest-xdist the module must run on one worker (`--dist loadscope`, as scripts/test runs it):
# the last test counts what the others sent through its one server.
pytestmark = pytest.mark.slow

MIN_REQUESTS = 1000
# Per operation; fewer where there are few distinct requests (GET /healthz has one). Raise it
# (CANON_FUZZ_EXAMPLES=500) for a longer hunt; the count check below stays at MIN_REQUESTS.
EXAMPLES_PER_OPERATION = int(os.environ.get("CANON_FUZZ_EXAMPLES", "80"))
REQUEST_TIMEOUT = 60.0
PROBLEM = "application/problem+json"
# The server must not see the caller's store, provider key or embedder choice: offline, deterministic.
SCRUBBED_ENV = ("CANON_DATABASE_URL", "CANON_EMBEDDER", "CANON_LLM_PROVIDER", "GEMINI_API_KEY",
                "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base_url: str
    token: str = field(repr=False)
    key_name: str
    log: Path
    http: httpx.Client = field(repr=False)
    end: int = 0  # the log's end as last read
    requests: int = 0  # generated requests made
    real_successes: int = 0  # of them, answered < 400 about the demo story or its collection
    statuses: Counter = field(default_factory=Counter, repr=False)
    by_operation: Counter = field(default_factory=Counter, repr=False)

    def read_end(self) -> int:
        """The log's end, read cheaply (a one-entry page of GET /v1/events)."""
        r = self.http.get("/v1/events", params={"after": 0, "limit": 1})
        assert r.status_code == 200, f"GET /v1/events answered {r.status_code}: {r.text[:500]}"
        end = r.json()["end"]
        assert isinstance(end, int) and end >= 0, end
        return end

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("http_fuzz")
    url = initialised(f"sqlite:///{tmp / 'fuzz.db'}")
    scrubbed = {name: None for name in SCRUBBED_ENV}  # the CLI (in-process) sees what the server sees
    applied = canon("--db", url, "apply", str(SAMPLE), "--format", "json", env=scrubbed)
    assert applied.returncode == 0, applied.stderr
    name = f"fuzz-admin-{uuid.uuid4().hex}"
    created = canon("--db", url, "key", "create", "--scope", "admin", "--name", name, "--format", "json", env=scrubbed)
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["name"] == name and key["scope"] == "admin" and key["token"]

    port = _free_port()
    log = tmp / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*CANON, "--db", url, "serve", "--port", str(port), "--log-level", "warning",
                                    "--no-access-log"], stdout=out, stderr=subprocess.STDOUT, env=_env())
    base = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key['token']}"}, timeout=REQUEST_TIMEOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"canon serve exited with {process.returncode}:\n{log.read_text()}"
            try:
                if http.get("/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"canon serve did not answer in 90 s:\n{log.read_text()}"
            time.sleep(0.2)
        srv = Server(base, key["token"], name, log, http)
        srv.end = srv.read_end()
        assert srv.end == key["issued_at_position"] + 1  # the key and its name claim: the last two events
        yield srv
    finally:
        http.close()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def api_schema(server: Server) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json", timeout=30)
    # The token as a configured header too (each call also sets it, over the generated one).
    schema.config.update(base_url=server.base_url, headers={"Authorization": f"Bearer {server.token}"},
                         request_timeout=REQUEST_TIMEOUT)
    return schema


@pytest.fixture(scope="module")
def session(server: Server) -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def _describe(case: schemathesis.Case, response: schemathesis.Response) -> str:
    return (f"{case.method} {case.formatted_path} query={case.query!r} headers={_safe(case.headers)!r} "
            f"body={_short(case.body)!r}\n-> {response.status_code} {_content_type(response)!r} "
            f"{response.text[:800]}")


def _content_type(response: schemathesis.Response) -> str:
    """The media type alone (schemathesis keeps headers lower-cased, each a list of values)."""
    values = response.headers.get("content-type") or [""]
    return values[0].split(";")[0].strip().lower()


def _safe(headers: dict | None) -> dict:
    return {k: ("<admin token>" if k.lower() == "authorization" else v) for k, v in (headers or {}).items()}


def _short(body: object) -> object:
    text = repr(body)
    return text if len(text) <= 800 else text[:800] + "..."


def _operations() -> list[str]:
    """Every operation's label, from the app's own schema builder (no I/O; the tests fuzz the
    schema the server serves, and ``test_the_served_schema_has_these_operations`` holds them equal)."""
    from canon_ledger.infrastructure.http.app import create_app

    paths = create_app().openapi()["paths"]
    return [f"{method.upper()} {path}" for path, operations in paths.items() for method in operations]


# An endless answer: a fuzzer reads each answer to its end. Its refusals (bad Last-Event-ID,
# positions past the log, scopes) are tested in tests/e2e/test_event_stream.py.
STREAMS = ["GET /v1/events/stream"]
OPERATIONS = [label for label in _operations() if label not in STREAMS]
REAL = {"story": "lamplight", "collection": "story:lamplight"}  # the demo story and its chapters' collection


def test_the_served_schema_has_these_operations(api_schema: schemathesis.BaseSchema) -> None:
    served = [result.ok().label for result in api_schema.get_all_operations()]
    assert sorted(served) == sorted(OPERATIONS + STREAMS)


def _check(server: Server, session: requests.Session, case: schemathesis.Case) -> None:
    if case.method == "DELETE" and case.path == "/v1/keys/{name}":
        # A generated name never matches a random 32-hex-digit one; if it ever did, the run
        # would revoke its own key, so that alone fails here, loudly.
        assert (case.path_parameters or {}).get("name") != server.key_name, "generated the admin key's name"
    before = server.end
    # The admin token replaces whatever Authorization the generator drew from the bearer scheme.
    response = case.call(session=session, headers={"Authorization": f"Bearer {server.token}"},
                         timeout=REQUEST_TIMEOUT)
    server.requests += 1
    server.statuses[response.status_code] += 1
    server.by_operation[case.operation.label] += 1
    if response.status_code < 400 and any((case.path_parameters or {}).get(k) == v for k, v in REAL.items()):
        server.real_successes += 1
    server.end = after = server.read_end()  # the next request's "before", whatever this one's outcome

    assert response.status_code < 500, f"server error:\n{_describe(case, response)}\nserver log:\n{server.log_tail()}"
    assert response.status_code not in (401, 403), f"the admin key was refused:\n{_describe(case, response)}"
    if response.status_code >= 400:
        assert _content_type(response) == PROBLEM, f"not problem+json:\n{_describe(case, response)}"
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("code"), str) and body["code"], \
            f"no string code:\n{_describe(case, response)}"
        assert body.get("status") == response.status_code, f"status differs from the body's:\n{_describe(case, response)}"
        applied = [r for r in body.get("results") or [] if isinstance(r, dict) and r.get("status") == "applied"]
        unchanged = [r for r in body.get("results") or [] if isinstance(r, dict) and r.get("status") == "unchanged"]
        if response.status_code == 409 and applied:
            # A rule refused one command of a batch that was not atomic: the others were applied,
            # as the body says (documented), and the log ends where the answer says it does.
            assert after == body.get("position") > before, _describe(case, response)
        elif response.status_code == 409 and unchanged:
            # A command that changed nothing still records its receipt (its id now names it), so
            # the log may end one receipt later, where the answer says it does.
            assert after == body.get("position") >= before, _describe(case, response)
        else:
            assert after == before, (f"a refused request appended {after - before} event(s) "
                                     f"(end {before} -> {after}):\n{_describe(case, response)}")
    else:
        assert after >= before, f"the log's end went back from {before} to {after}:\n{_describe(case, response)}"


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_operation_answers_cleanly_and_refusals_change_nothing(
        label: str, api_schema: schemathesis.BaseSchema, server: Server, session: requests.Session) -> None:
    method, path = label.split(" ", 1)
    operation = api_schema[path][method]
    # Valid and invalid requests alike (schemathesis's fuzzing phase draws from both modes), and,
    # where the path names a story or a collection, valid ones about the demo's too: a random
    # story id is only ever unknown, and the views, packets and search of a real one are the point.
    strategies = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]
    pinned = {name: value for name, value in REAL.items() if f"{{{name}}}" in path}
    if pinned:
        strategies.append(operation.as_strategy(generation_mode=GenerationMode.POSITIVE, path_parameters=pinned))
    cases = st.one_of(strategies)

    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
              print_blob=True)
    @given(case=cases)
    def fuzz(case: schemathesis.Case) -> None:
        _check(server, session, case)

    fuzz()


def test_enough_requests_were_made_and_the_admin_key_still_works(server: Server) -> None:
    summary = f"{server.requests} requests ({server.real_successes} answered about the demo story); statuses {dict(sorted(server.statuses.items()))}; " \
              f"per operation {dict(sorted(server.by_operation.items()))}"
    print(summary)
    assert server.requests >= MIN_REQUESTS, summary
    assert set(server.by_operation) == set(OPERATIONS), summary  # every operation was exercised
    assert server.real_successes >= 50, summary  # the demo story's views and packets were really read
    r = server.http.get("/v1/keys")
    assert r.status_code == 200, r.text
    mine = [k for k in r.json()["keys"] if k["name"] == server.key_name]
    assert mine and not mine[0]["revoked"], mine
    assert server.read_end() == server.end  # nothing moved the log between requests
