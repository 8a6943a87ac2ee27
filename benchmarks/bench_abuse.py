#!/usr/bin/env python
"""Can a client knock ``canon serve`` over (issue 37)? ``/healthz`` latency while each trigger
of the adversarial run repeats, on both stores, old code and new alternated in one session.

    python benchmarks/bench_abuse.py [--old-ref 8495fa1] [--stores sqlite,postgres] [--seconds 6]
                                     [--repeats 2] [--save-json PATH]

Each run starts a real server (``--no-worker``; PostgreSQL behind a TCP proxy this script can
cut, so the store can go away without stopping the shared server) on the demo story, then
asks ``/healthz`` every 20 ms on a connection of its own while one trigger repeats for
``--seconds``:

- ``idle``: nothing (the reference);
- ``nul``: a worker key's GETs with a NUL in a path or a query value (four routes);
- ``disconnect``: ``POST /login`` promising ``Content-Length: 1000`` and leaving;
- ``big-body``: four clients at once, no key, each declaring 300 MB to ``POST /v1/keys`` and
  streaming 16 MB of it;
- ``slow``: 60 connections sending their headers a byte every 0.5 s (reported: how many the
  server still holds open at the end);
- ``store-down`` (PostgreSQL): the store cut, an MCP call every 0.3 s and a packet request
  every 0.3 s (reported: their answers' p50 seconds).

Reported per (code, store, trigger): ``/healthz`` p50 and p99 in ms, and p99 / idle p99 of the
same run; the server's peak RSS growth in MB. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, add_pg_option, free_port, scratch  # noqa: E402 - also puts the checkout on sys.path

from tests.store_proxy import StoreProxy  # noqa: E402

SAMPLE = ROOT / "canon_ledger" / "infrastructure" / "demo" / "sample_story.jsonl"
STORY = "lamplight"


def cli(src: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "canon_ledger.infrastructure.cli", *args], cwd=src,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "CANON_EMBEDDER": "hashing"})


class Run:
    def __init__(self, src: Path, store: str, tmp: Path, pg_url: str) -> None:
        self.src, self.store, self.proxy, self.drop = src, store, None, None
        if store == "sqlite":
            self.url = f"sqlite:///{tmp / f'abuse-{uuid.uuid4().hex[:8]}.db'}"
        else:
            url, self.drop = scratch("postgres", pg_url)
            self.proxy, self.url = StoreProxy.in_front_of(url)
        assert cli(src, "--db", self.url, "init").returncode == 0
        self.tokens = {s: json.loads(cli(src, "--db", self.url, "key", "create", "--scope", s, "--format", "json")
                                     .stdout)["token"] for s in ("admin", "worker")}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"server-{self.port}.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "canon_ledger.infrastructure.cli", "--db", self.url, "serve",
                                      "--port", str(self.port), "--no-worker", "--log-level", "warning",
                                      "--no-access-log"], cwd=src, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
                                     env={**os.environ, "CANON_EMBEDDER": "hashing"})
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and self.proc.poll() is None, self.log.read_text()[-2000:]
            time.sleep(0.1)
        commands = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
        r = httpx.post(self.base + "/v1/commands", json=commands, timeout=120,
                       headers={"Authorization": f"Bearer {self.tokens['admin']}", "Content-Type": "application/json"})
        assert r.status_code == 200, r.text

    def rss(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self.proxy is not None:
            self.proxy.close()
        if self.drop is not None:
            self.drop()  # the scratch database


def health(run: Run, seconds: float, trigger: Any) -> dict[str, Any]:
    times: list[float] = []
    stop = threading.Event()
    peak = [run.rss()]
    base_rss = peak[0]

    def sample() -> None:
        with httpx.Client(base_url=run.base, timeout=120) as client:
            while not stop.is_set():
                began = time.perf_counter()
                client.get("/healthz")
                times.append((time.perf_counter() - began) * 1000)
                peak[0] = max(peak[0], run.rss())
                stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    extra = trigger(run, seconds) or {}
    stop.set()
    sampler.join()
    q = statistics.quantiles(times, n=100) if len(times) >= 20 else [max(times)] * 99
    return {"healthz_p50_ms": statistics.median(times), "healthz_p99_ms": q[98], "samples": len(times),
            "rss_growth_mb": (peak[0] - base_rss) / 2**20, **extra}


def until(seconds: float) -> Any:
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end


def idle(run: Run, seconds: float) -> None:
    time.sleep(seconds)


def nul(run: Run, seconds: float) -> dict[str, Any]:
    paths = [f"/v1/stories/{STORY}%00", f"/v1/stories/{STORY}/canon?kind=%00",
             f"/v1/stories/{STORY}/packet?role=qa&chapter=5&draft=d%00", "/v1/lint?collection=a%00b"]
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=run.base, timeout=120, headers={"Authorization": f"Bearer {run.tokens['worker']}"}) as c:
        going = until(seconds)
        while going():
            for path in paths:
                code = c.get(path).status_code
                statuses[code] = statuses.get(code, 0) + 1
    return {"statuses": statuses}


def disconnect(run: Run, seconds: float) -> None:
    going = until(seconds)
    while going():
        with socket.create_connection(("127.0.0.1", run.port)) as s:
            s.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                      b"Content-Length: 1000\r\n\r\nkey=cl_")
        time.sleep(0.05)


def big_body(run: Run, seconds: float) -> None:
    def one() -> None:
        going = until(seconds)
        while going():
            try:
                with socket.create_connection(("127.0.0.1", run.port), timeout=30) as s:
                    s.sendall(b"POST /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 300000000\r\n\r\n")
                    block = b"x" * (1 << 20)
                    for _ in range(16):
                        s.sendall(block)
            except OSError:
                pass  # refused mid-body: what the new door does

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def slow(run: Run, seconds: float) -> dict[str, Any]:
    sockets = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", run.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        sockets.append(s)
    going = until(max(seconds, 12.0))  # past the new header deadline (10 s)
    while going():
        for s in sockets:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        time.sleep(0.5)
    still = 0
    for s in sockets:
        s.setblocking(False)
        try:
            still += s.recv(10) != b""
        except BlockingIOError:
            still += 1
        except OSError:
            pass
        s.close()
    return {"slow_connections_open_at_end": still}


def store_down(run: Run, seconds: float) -> dict[str, Any]:
    assert run.proxy is not None
    run.proxy.cut()
    took: dict[str, list[float]] = {"mcp": [], "packet": []}
    codes: dict[str, int] = {}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_stories", "arguments": {}}}
    headers = {"Authorization": f"Bearer {run.tokens['worker']}", "Accept": "application/json, text/event-stream"}
    try:
        going = until(seconds)
        n = 0
        while going():
            n += 1
            for kind, request in (("mcp", lambda: httpx.post(run.base + "/mcp", json=call, headers=headers, timeout=120)),
                                  ("packet", lambda: httpx.get(
                                      run.base + f"/v1/stories/{STORY}/packet?role=writer&chapter=5&budget={900 + n}",
                                      headers=headers, timeout=120))):
                began = time.monotonic()
                code = request().status_code
                took[kind].append(time.monotonic() - began)
                codes[f"{kind}:{code}"] = codes.get(f"{kind}:{code}", 0) + 1
            time.sleep(0.3)
    finally:
        run.proxy.restore()
    back = time.monotonic()
    while httpx.get(run.base + "/v1/stories", headers=headers, timeout=120).status_code != 200:
        if time.monotonic() - back > 60:
            break
        time.sleep(0.1)
    return {"mcp_p50_s": statistics.median(took["mcp"]), "packet_p50_s": statistics.median(took["packet"]),
            "answers": codes, "serving_again_after_s": time.monotonic() - back}


TRIGGERS = {"idle": idle, "nul": nul, "disconnect": disconnect, "big-body": big_body, "slow": slow,
            "store-down": store_down}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old-ref", help="also run this commit (a temporary git worktree), alternated with this checkout")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--triggers", default=",".join(TRIGGERS))
    parser.add_argument("--save-json")
    add_pg_option(parser)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-abuse-"))
    sources = [("new", ROOT)]
    old = None
    if args.old_ref:
        old = tmp / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old_ref], check=True,
                       capture_output=True)
        sources.append(("old", old))
    results: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeats):
            order = sources if repeat % 2 == 0 else sources[::-1]
            for store in args.stores.split(","):
                for code, src in order:
                    run = Run(src, store, tmp, args.pg_url)
                    try:
                        for name in args.triggers.split(","):
                            if name == "store-down" and store != "postgres":
                                continue
                            row = {"code": code, "store": store, "trigger": name, "repeat": repeat,
                                   **health(run, args.seconds, TRIGGERS[name])}
                            results.append(row)
                            print(json.dumps(row), flush=True)
                    finally:
                        run.close()
    finally:
        if old is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    print("\ncode  store     trigger      healthz p50   p99 ms   p99/idle  rss+MB  other")
    for code, _ in sources:
        for store in args.stores.split(","):
            rows = [r for r in results if r["code"] == code and r["store"] == store]
            idle_p99 = statistics.median([r["healthz_p99_ms"] for r in rows if r["trigger"] == "idle"] or [1.0])
            for name in TRIGGERS:
                mine = [r for r in rows if r["trigger"] == name]
                if not mine:
                    continue
                p50 = statistics.median(r["healthz_p50_ms"] for r in mine)
                p99 = statistics.median(r["healthz_p99_ms"] for r in mine)
                rss = max(r["rss_growth_mb"] for r in mine)
                other = {k: v for k, v in mine[-1].items() if k not in (
                    "code", "store", "trigger", "repeat", "healthz_p50_ms", "healthz_p99_ms", "samples", "rss_growth_mb")}
                print(f"{code:5} {store:9} {name:12} {p50:10.1f} {p99:8.1f} {p99 / idle_p99:9.1f}x {rss:7.0f}  "
                      f"{json.dumps(other)}")
    if args.save_json:
        Path(args.save_json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
