"""``canon serve`` as a real process on a loopback port: the packet bytes the CLI prints, read
your writes, time travel, audit and ETag over HTTP; refusing to start unsafely; secrets kept
out of logs; two servers on one PostgreSQL; kill -9 in the middle of an atomic batch."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from canon_ledger.infrastructure.demo import SAMPLE
from canon_ledger.infrastructure.http.client import CanonClient
from tests.cli_runner import CANON, canon, child_env

STORY = "lamplight"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, url: str, log: Path, *extra: str, embedder: str | None = "hashing",
                 env: dict[str, str] | None = None) -> None:
        """``embedder``: $CANON_EMBEDDER for the server (None: the default, MiniLM); ``env``: more
        of the server's environment."""
        self.log = log
        env = child_env({"CANON_EMBEDDER": embedder, **(env or {})})
        for attempt in range(3):
            self.port = free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            began = log.stat().st_size if log.exists() else 0
            self.process = subprocess.Popen([*CANON, "--db", url, "serve", "--port", str(self.port), *extra],
                                            stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env)
            if self._answers():
                return
            said = log.read_bytes()[began:].decode(errors="replace")
            if "address already in use" not in said.lower() or attempt == 2:
                raise AssertionError(f"canon serve exited {self.process.returncode}: {said[-2000:]}")
            # Another process (an xdist worker) took the free port between our look and the bind.

    def _answers(self) -> bool:
        """Wait for /healthz; False if the process exited first."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return True
            except httpx.HTTPError:
                time.sleep(0.1)
        self.kill()
        raise AssertionError("canon serve did not answer /healthz in 120 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def admin_key(url: str, *more: str) -> str:
    made = canon("--db", url, "key", "create", "--scope", "admin", *more, "--format", "json")
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["token"]


def demo_commands() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def served(module_store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    """A server on the default embedder (MiniLM), as the CLI runs, shared by the module's tests
    (one store per kind): one applies the demo and writes; the other only reads and is refused."""
    url = module_store_url
    assert canon("--db", url, "init").returncode == 0
    token = admin_key(url)
    server = Server(url, tmp_path_factory.mktemp("served") / "server.log", embedder=None)
    try:
        yield server, token, url
    finally:
        server.stop()


def test_the_demo_over_http_gives_the_cli_packet(served: tuple[Server, str, str]) -> None:
    server, token, url = served
    with CanonClient(server.base, token) as client:
        applied = client.apply(demo_commands())
        assert {r["status"] for r in applied["results"]} == {"applied"}
        client.wait_indexed(applied["position"])  # L1 reads what the server's worker has indexed
        http_bytes = client.packet_bytes(STORY, "writer", 5, after=applied["position"])
        cli = canon("--db", url, "packet", "--story", STORY, "--role", "writer", "--chapter", "5", "--format", "json")
        assert cli.returncode == 0, cli.stderr
        assert http_bytes.decode() == cli.stdout.rstrip("\n")
        packet = json.loads(http_bytes)

        # ETag / 304 over the wire
        response = client.http.get(f"/v1/stories/{STORY}/packet", params={"role": "writer", "chapter": 5})
        assert response.headers["etag"] == f'"{packet["hash"]}"'
        assert client.http.get(f"/v1/stories/{STORY}/packet", params={"role": "writer", "chapter": 5},
                               headers={"If-None-Match": response.headers["etag"]}).status_code == 304
        # read your writes, then time travel back to before the write
        write = client.apply({"type": "record_chapter_summary", "command_id": "e2e-sum", "story_id": STORY,
                              "chapter": 4, "text": "Marker-4242: the river rose."})
        assert write["results"][0]["status"] == "applied"
        after = client.packet(STORY, "writer", 5, after=write["position"])
        assert "Marker-4242" in json.dumps(after) and packet["position"] < after["position"] <= write["position"]
        before = client.packet_bytes(STORY, "writer", 5, at=packet["position"])
        assert before == http_bytes
        # audit over HTTP agrees with the CLI's
        audit = client.audit(after["packet_id"])
        assert audit["verdict"] == "ok"
        cli_audit = canon("--db", url, "audit", after["packet_id"], "--format", "json")
        assert json.loads(cli_audit.stdout)["verdict"] == "ok"
        # the same views on the CLI and over HTTP
        cli_canon = json.loads(canon("--db", url, "canon", "--story", STORY, "--as-of", "5", "--format", "json").stdout)
        assert client.get(f"/v1/stories/{STORY}/canon", as_of=5)["entries"] == cli_canon["entries"]
    log = server.log.read_text()
    assert token not in log and "Traceback" not in log


def test_no_keys_or_open_beyond_loopback_is_refused(store_url: str, tmp_path: Path) -> None:
    assert canon("--db", store_url, "init").returncode == 0
    none = canon("--db", store_url, "serve", "--port", str(free_port()))
    assert none.returncode == 2 and "no API key" in none.stderr
    wide = canon("--db", store_url, "serve", "--open", "--host", "0.0.0.0", "--port", str(free_port()))
    assert wide.returncode == 2 and "loopback" in wide.stderr
    server = Server(store_url, tmp_path / "open.log", "--open")
    try:
        assert httpx.get(f"{server.base}/v1/stories").status_code == 200  # open: loopback, no key
    finally:
        server.stop()


def test_secrets_never_reach_the_log_or_answers(served: tuple[Server, str, str]) -> None:
    server, token, url = served
    wrong = token[:-4] + "abcd"
    r = httpx.get(f"{server.base}/v1/stories", headers={"Authorization": f"Bearer {wrong}"})
    assert r.status_code == 401 and wrong not in r.text
    ok = httpx.get(f"{server.base}/v1/stories", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    events = canon("--db", url, "events", "--format", "json").stdout
    assert token not in events and wrong not in events
    log = server.log.read_text()
    assert token not in log and wrong not in log


@pytest.mark.postgres
@pytest.mark.slow
def test_two_servers_on_one_postgres_apply_a_batch_once(pg_url: str, tmp_path: Path) -> None:
    assert canon("--db", pg_url, "init").returncode == 0
    token = admin_key(pg_url)
    first, second = Server(pg_url, tmp_path / "a.log"), Server(pg_url, tmp_path / "b.log")
    try:
        with CanonClient(first.base, token) as a, CanonClient(second.base, token) as b:
            demo = demo_commands()
            results: dict[str, dict] = {}
            barrier = threading.Barrier(2)

            def post(name: str, client: CanonClient) -> None:
                barrier.wait()
                results[name] = client.apply(demo, atomic=True)

            threads = [threading.Thread(target=post, args=(n, c)) for n, c in (("a", a), ("b", b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            statuses = sorted(",".join(sorted({r["status"] for r in results[n]["results"]})) for n in "ab")
            # One server applied the whole batch; the other found every command applied before.
            assert statuses == ["applied", "duplicate"], statuses
            receipts = [e for e in a.get("/v1/events", limit=1000)["events"] if e["type"] == "CommandReceipt.Recorded"]
            assert len(receipts) == len(demo)
            write = a.apply({"type": "record_chapter_summary", "command_id": "two-sum", "story_id": STORY,
                             "chapter": 4, "text": "Marker-2222 seen from the second server."})
            packet = b.packet(STORY, "writer", 5, after=write["position"])
            assert "Marker-2222" in json.dumps(packet)
    finally:
        first.stop()
        second.stop()


@pytest.mark.slow
def test_kill_9_in_the_middle_of_an_atomic_batch(store_url: str, tmp_path: Path) -> None:
    assert canon("--db", store_url, "init").returncode == 0
    token = admin_key(store_url)
    def batch_for(story: str) -> list[dict]:
        start = {"type": "start_story", "command_id": f"{story}-start", "story_id": story, "title": story,
                 "style_guardrails": [], "output_contract": "prose"}
        return [start] + [{"type": "plan_chapter", "command_id": f"{story}-plan-{n}", "story_id": story, "chapter": n,
                           "volume": 1, "goals": [f"goal {n}"]} for n in range(1, 1501)]

    server = Server(store_url, tmp_path / "kill.log")
    headers = {"Authorization": f"Bearer {token}"}
    # How long such a batch takes here: the kill comes at half that, while it is decided or saved.
    began = time.monotonic()
    warm = httpx.post(f"{server.base}/v1/commands?atomic=true", json=batch_for("warm"), headers=headers, timeout=120)
    assert warm.status_code == 200
    took = time.monotonic() - began
    batch = batch_for("kill")
    outcome: list[object] = []

    def post() -> None:
        try:
            outcome.append(httpx.post(f"{server.base}/v1/commands?atomic=true", json=batch, headers=headers,
                                      timeout=120))
        except httpx.HTTPError as e:
            outcome.append(e)

    thread = threading.Thread(target=post)
    thread.start()
    time.sleep(took / 2)
    server.kill()
    thread.join(60)
    assert outcome and isinstance(outcome[0], httpx.HTTPError), "the batch finished before the kill: nothing was tested"
    restarted = Server(store_url, tmp_path / "kill2.log")
    try:
        with CanonClient(restarted.base, token) as client:
            again = client.apply(batch, atomic=True)
            statuses = {r["status"] for r in again["results"]}
            assert statuses in ({"applied"}, {"duplicate"}), statuses  # all or nothing, then exactly once
            events = []
            after = 0
            while True:
                page = client.get("/v1/events", story="kill", after=after, limit=1000)
                events += page["events"]
                if page["next_after"] >= page["end"]:
                    break
                after = page["next_after"]
            planned = [e for e in events if e["type"] == "Chapter.Planned"]
            assert len(planned) == 1500 and len({e["data"]["number"] for e in planned}) == 1500
    finally:
        restarted.stop()
