#!/usr/bin/env python
"""The HTTP API (``canon serve``) on the 1,000-chapter benchmark story (issue 17).

    python benchmarks/bench_http.py [--store sqlite|postgres|both] [--quick] [--samples N]
                                    [--mixed-seconds S] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. The story and its loading are as in ``bench_packets`` (``gen_story``,
seed 3: 1,000 chapters, 10,000 confirmed canon entries, ~41,000 commands, ~100,000 events),
loaded through ``ledger.apply(batch, atomic=True)`` per 100 commands into a temp SQLite file
and a scratch PostgreSQL database ``canon_bench_<hex>`` (created and dropped here). Per store:

1. **set-up subprocess**: an admin key with the CLI (``canon --db URL key create --scope admin
   --format json``), then ``bootstrap(url)`` and every read model caught up over the whole log
   (canon, knowledge, keyword index, vectors: MiniLM embeds every chapter); timed, not measured
   further. On PostgreSQL one database-wide ``VACUUM ANALYZE`` follows (the local server runs
   with autovacuum off; ``bench_packets`` does the same). The process then exits, so neither
   the reference nor the server carries the catch-up's heap;
2. **worker subprocess** (everything below): ``bootstrap(url)``, the in-process reference
   ``services.packets.packet(Request(story, "writer", chapter), record=False)`` (the product
   default: L1 retrieval on), warmed up; then the server as a real subprocess, ``canon --db URL
   serve --port P --log-level warning --no-access-log``, waited for on ``GET /healthz``;
   ``GET /readyz`` names the embedder it loaded; its first request per chapter is timed apart;
3. **packets**, writer packets at chapters 10, 100 and 1,000 round-robin, ``record=false`` on
   both sides (the same work): rounds of blocks, their order rotated every round: in process
   (the worker's main thread, the server idle), HTTP with one client, HTTP with ``--clients``
   (8) and ``--also-clients`` (4, a diagnostic) clients, each client a thread with its own
   ``httpx.Client`` (keep-alive), started together at a barrier. p50 / p99 per chapter and
   overall; packets/s per block type (requests / block wall time). Each HTTP answer is checked:
   status 200, ETag equal to the in-process packet's hash, no failed stage in the packet. The
   server's own Prometheus histograms (``GET /metrics`` before and after each block) split the
   mean HTTP time into the compile (``canon_packet_seconds``: the thread-pool call), the rest
   of the ASGI app (``canon_http_request_seconds``: routing, auth, validation, response) and
   what is outside the app (client, loopback TCP, uvicorn's HTTP parsing and event loop).
   ``GET /healthz`` timed alone is the floor of one round trip;
4. **CLI**: the chapter-1,000 packet through ``canon --db URL packet ... --no-record --format
   json``, ``--cli-runs`` processes one after another (wall time each; the same hash);
5. **command-to-packet**: ``POST /v1/commands`` with one ``record_chapter_summary`` for chapter
   999 (a new ``command_id`` and marker each time), then ``GET`` the chapter-1,000 writer packet
   with ``after=<position of the answer>``; the packet must hold the marker. With the service
   default (record=true) and record=false, each sample alternated with the same thing in
   process (``ledger.apply`` + ``packet(after=result.position)``); before each sample the side
   measured is caught up, untimed, with what the other side wrote. Then in process with L1 off
   (L0 only, as ``bench_packets`` measures it): what L1 adds;
6. **sustained mixed load** for ``--mixed-seconds`` (at most 60): ``--mixed-senders`` threads
   POST ``record_chapter_summary`` commands on a schedule paced at ``--mixed-rate`` per second
   (chapters 9, 99, 999 in turn: summaries the three packets carry) while 8 clients GET packets
   round-robin with the service default (record=true). Errors (exceptions, non-2xx, commands not
   applied), latencies, what completed in the window; the server's VmRSS sampled every 0.5 s and
   its ``VmHWM`` (peak RSS since it started, /proc/<pid>/status) after the load. Then the same
   with ``--mixed-also-clients`` (4) packet clients, a diagnostic;
7. the server is stopped with SIGTERM; its log's tracebacks are counted by final exception.

``--quick``: a 200-chapter story, chapters 10, 100, 200, 30 samples in 3 rounds, 15
command-to-packet samples, 10 s of mixed load, 2 CLI runs: a smoke run, not comparable with
the full run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (CANON, add_output_options, bench_stores, chapters_measured, conninfo, emit, free_port,  # noqa: E402
                    header, load_story, loadavg, log, percentiles, proc_status, rss_mb, run_worker,
                    story_commands, story_options, story_sized)

PACKET_ROUTE = "/v1/stories/{story}/packet"
TARGETS = {
    "http_minus_inproc_ms": 2.0,  # HTTP p50 <= in-process p50 + 2 ms (one client, each chapter)
    "throughput_8_vs_inproc": 0.7,  # at 8 clients, packets/s >= 0.7x the in-process single-thread rate
    "cli_vs_http": 100.0,  # CLI p50 / HTTP p50 >= 100x (expected, not a goal)
    "c2p_p50_ms": 20.0,  # command -> packet over HTTP, PostgreSQL
    "mixed_errors": 0,
    "server_rss_mb": 500.0,
}


def _metrics(client: Any) -> dict[str, float]:
    """The server's histogram sums and counts: packet compile, and the packet route's requests."""
    text = client.http.get("/metrics").text
    out = {"compile_sum": 0.0, "compile_count": 0.0, "request_sum": 0.0, "request_count": 0.0}
    for line in text.splitlines():
        if line.startswith("canon_packet_seconds_sum{"):
            out["compile_sum"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("canon_packet_seconds_count{"):
            out["compile_count"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("canon_http_request_seconds_") and f'route="{PACKET_ROUTE}"' in line:
            if line.startswith("canon_http_request_seconds_sum{"):
                out["request_sum"] += float(line.rsplit(" ", 1)[1])
            elif line.startswith("canon_http_request_seconds_count{"):
                out["request_count"] += float(line.rsplit(" ", 1)[1])
    return out


def _diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after}


class Server:
    """``canon --db URL serve`` as a subprocess; stderr to a log file."""

    def __init__(self, url: str, log_path: str) -> None:
        self.url, self.log_path = url, log_path
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 300.0) -> float:
        import httpx

        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([CANON, "--db", self.url, "serve", "--port", str(self.port), "--log-level",
                                      "warning", "--no-access-log"], stdout=self.log, stderr=subprocess.STDOUT)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base + "/healthz", timeout=1.0).status_code == 200:
                    return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"server did not answer /healthz in {timeout:.0f} s")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.proc is None:
            return out
        if self.proc.poll() is None:
            out["before_stop"] = proc_status(self.proc.pid)
            t0 = time.perf_counter()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                out["killed"] = True
            out["stop_seconds"] = time.perf_counter() - t0
        out["returncode"] = self.proc.returncode
        self.log.close()
        return out

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        return ""


# -- set-up: key and read models (a subprocess of its own) -----------------------------------------
def catch_up(cfg: dict[str, Any]) -> dict[str, Any]:
    """The admin key (CLI), then every read model caught up over the whole log, in a process
    that then exits: the in-process reference and the server both start from ``bootstrap``
    over caught-up tables, neither carrying the catch-up's heap."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    kind, url = cfg["kind"], cfg["url"]
    clock = time.perf_counter
    proc = subprocess.run([CANON, "--db", url, "key", "create", "--scope", "admin", "--format", "json"],
                          capture_output=True, text=True, check=True)
    out: dict[str, Any] = {"token": json.loads(proc.stdout)["token"]}
    services = bootstrap(url)
    try:
        goal = services.ledger.event_log.position()
        t0 = clock()
        services.canon.catch_up_serving(goal)
        t1 = clock()
        services.catch_up_retrieval(goal)
        out.update(log_events=goal, canon_seconds=t1 - t0, retrieval_seconds=clock() - t1,
                   embedder=services.embedder.name)
        log(f"{kind}: read models caught up over {goal:,} events: canon {t1 - t0:.1f} s, knowledge + keyword + "
            f"vectors ({services.embedder.name}) {clock() - t1:.1f} s")
    finally:
        services.close()
    if kind == "postgres":
        import psycopg

        with psycopg.connect(conninfo(url), autocommit=True) as conn:
            out["autovacuum"] = conn.execute("SELECT setting FROM pg_settings WHERE name = 'autovacuum'").fetchone()[0]
            t0 = clock()
            conn.execute("VACUUM ANALYZE")
        out["vacuum_analyze_seconds"] = clock() - t0
        log(f"{kind}: autovacuum={out['autovacuum']}; VACUUM ANALYZE took {out['vacuum_analyze_seconds']:.1f} s")
    return out


class Outcomes:
    """What HTTP answers were, per mode: status codes, packets other than the in-process one,
    packets with a failed stage (L1 retrieval or its vector search fell back: less or no L1),
    exceptions, examples."""

    L1_ERROR = b'"status":"error"'  # a packet stage that failed (the packet's canonical JSON)

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_mode: dict[str, Counter[str]] = {}
        self.examples: dict[str, list[str]] = {}

    def add(self, mode: str, what: str, example: str | None = None) -> None:
        with self.lock:
            self.by_mode.setdefault(mode, Counter())[what] += 1
            if example is not None and len(self.examples.setdefault(mode, [])) < 5:
                self.examples[mode].append(f"{what}: {example[:300]}")

    def response(self, mode: str, r: Any, etag: str | None) -> bool:
        """True when it is the expected packet."""
        if r.status_code != 200:
            self.add(mode, f"HTTP {r.status_code}", r.text)
            return False
        if self.L1_ERROR in r.content:
            i = r.content.find(self.L1_ERROR)
            self.add(mode, "200, a stage failed", r.content[max(0, i - 40):i + 260].decode(errors="replace"))
            return False
        if etag is not None and r.headers.get("etag") != etag:
            self.add(mode, "200, other packet", r.headers.get("etag"))
            return False
        self.add(mode, "200, as in process")
        return True

    def as_dict(self) -> dict[str, Any]:
        return {m: {"counts": dict(c), "examples": self.examples.get(m, [])} for m, c in self.by_mode.items()}


def server_log_summary(path: str) -> dict[str, Any]:
    """Tracebacks in the server's log, by the exception that ended them."""
    import re

    text = ""
    with contextlib.suppress(OSError):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    final = Counter(m.group(1) for m in re.finditer(r"^([A-Za-z_][\w.]*(?:Error|Exception|Unavailable\w*)): ", text,
                                                     re.MULTILINE))
    return {"bytes": len(text), "tracebacks": text.count("Traceback (most recent call last)"),
            "exception_in_asgi_application": text.count("Exception in ASGI application"),
            "internal_error_lines": text.count("internal error "), "store_unavailable_lines": text.count(
                "store unavailable: "), "final_exceptions": dict(final.most_common(10)), "head": text[:2000]}


# -- the worker (a fresh process per store) ------------------------------------------------------
def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.http.client import CanonClient

    kind, url, story, chapters, token = cfg["kind"], cfg["url"], cfg["story_id"], cfg["chapters"], cfg["token"]
    samples, rounds = cfg["samples"], cfg["rounds"]
    counts_of_clients = [1, *dict.fromkeys(n for n in (cfg["clients"], cfg["also_clients"]) if n > 1)]
    out: dict[str, Any] = {"store": kind, "loadavg": {"start": loadavg()}}
    clock = time.perf_counter
    last_ch = chapters[-1]
    outcomes = Outcomes()

    t0 = clock()
    services = bootstrap(url)
    out["inproc_bootstrap_seconds"] = clock() - t0
    out["inproc_embedder"] = services.embedder.name
    packets = services.packets
    server: Server | None = None
    clients: list[Any] = []
    try:
        requests = {ch: Request(story, "writer", ch) for ch in chapters}
        reference = {}
        for ch in chapters:  # warm the in-process side (its first packet per chapter embeds the query)
            for _ in range(cfg["warmup"]):
                p = packets.packet(requests[ch], record=False)
            reference[ch] = p
        out["reference"] = {str(ch): {"hash": p.hash, "used_tokens": p.used_tokens, "budget": p.budget,
                                      "items": len(p.items), "kept": sum(i.status != "dropped" for i in p.items),
                                      "l1_kept": sum(i.kind in ("chunk", "wiki_page") and i.status != "dropped"
                                                     for i in p.items),
                                      "stages": {st.step: f"{st.status}: {st.detail}"[:120] for st in p.stages},
                                      "json_bytes": len(p.to_json().encode())} for ch, p in reference.items()}
        rss_inproc_start = rss_mb()

        # -- the server -------------------------------------------------------------------------------
        server = Server(url, cfg["server_log"])
        out["server_start_seconds"] = server.start()
        out["server_rss_after_start"] = proc_status(server.pid)
        admin = CanonClient(server.base, token, timeout=60.0)
        clients = [CanonClient(server.base, token, timeout=60.0) for _ in range(max(*counts_of_clients,
                                                                                    cfg["mixed_clients"]))]
        ready = admin.get("/readyz")
        out["readyz"] = ready
        log(f"{kind}: server pid {server.pid} on port {server.port} answered /healthz after "
            f"{out['server_start_seconds']:.1f} s; embedder {ready['embedder']}; RSS "
            f"{out['server_rss_after_start'].get('VmRSS', 0):.0f} MB")
        first = {}
        for ch in chapters:  # the server's first request per chapter (embeds the query), timed apart
            t = clock()
            r = clients[0].http.get(f"/v1/stories/{story}/packet", params={"role": "writer", "chapter": ch,
                                                                           "record": "false"})
            first[str(ch)] = (clock() - t) * 1e3
            if not outcomes.response("first", r, f'"{reference[ch].hash}"'):
                raise RuntimeError(f"HTTP packet at chapter {ch} is not the in-process one: {outcomes.as_dict()}")
        out["server_first_request_ms"] = first
        for c in clients:
            for ch in chapters:
                for _ in range(max(1, cfg["warmup"] // 4)):
                    c.packet_bytes(story, "writer", ch, record="false")
        out["server_rss_after_warmup"] = proc_status(server.pid)
        hz = []  # the floor: one round trip to a route that does nothing (no key, no store)
        for i in range(cfg["warmup"] + 200):
            t = clock()
            r = clients[0].http.get("/healthz")
            if i >= cfg["warmup"]:
                hz.append(clock() - t)
        out["healthz"] = percentiles(hz)

        # -- 1. packets: in process, then HTTP with 1 and N clients, alternated -----------------------
        per_round = max(1, samples // rounds)  # requests per chapter per block (in process, one client)
        modes = ["inproc", *(f"http{n}" for n in counts_of_clients)]
        lat: dict[str, dict[int, list[float]]] = {m: {ch: [] for ch in chapters} for m in modes}
        walls: dict[str, list[float]] = {m: [] for m in modes}
        counts: Counter[str] = Counter()
        server_side: dict[str, Counter[str]] = {m: Counter() for m in modes[1:]}
        to_json: list[float] = []
        hashes = {ch: f'"{reference[ch].hash}"' for ch in chapters}

        def inproc_block() -> None:
            t_start = clock()
            for _ in range(per_round):
                for ch in chapters:
                    t = clock()
                    p = packets.packet(requests[ch], record=False)
                    lat["inproc"][ch].append(clock() - t)
                    outcomes.add("inproc", "as reference" if p.hash == reference[ch].hash else "other packet")
            walls["inproc"].append(clock() - t_start)
            counts["inproc"] += per_round * len(chapters)
            t = clock()
            p.to_json()  # what the server adds to a compile: serialising the packet (diagnostic)
            to_json.append(clock() - t)

        def http_requests(client: Any, n: int, offset: int, mode: str, sink: list[tuple[int, float]]) -> None:
            for i in range(n):
                ch = chapters[(i + offset) % len(chapters)]
                t = clock()
                try:
                    r = client.http.get(f"/v1/stories/{story}/packet", params={"role": "writer", "chapter": ch,
                                                                               "record": "false"})
                except httpx.HTTPError as e:
                    outcomes.add(mode, f"exception {type(e).__name__}", str(e))
                    sink.append((ch, clock() - t))
                    continue
                sink.append((ch, clock() - t))
                outcomes.response(mode, r, hashes[ch])

        def http_block(threads: int) -> None:
            # One client: the in-process block's requests. Several: half that per thread, so that
            # the ramp-up and the tail (threads done early) weigh little on packets/s.
            mode = f"http{threads}"
            total = per_round * len(chapters) if threads == 1 else threads * max(3, per_round * len(chapters) // 2)
            shares = [total // threads + (1 if k < total % threads else 0) for k in range(threads)]
            sinks: list[list[tuple[int, float]]] = [[] for _ in range(threads)]
            ready_b, go = threading.Barrier(threads + 1), threading.Barrier(threads + 1)

            def run(k: int) -> None:
                with contextlib.suppress(httpx.HTTPError):  # revive keep-alive (uvicorn drops it after 5 s idle)
                    clients[k].http.get("/healthz")
                ready_b.wait()
                go.wait()
                http_requests(clients[k], shares[k], k, mode, sinks[k])

            ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
            for t in ts:
                t.start()
            ready_b.wait()
            before = _metrics(admin)
            go.wait()
            t_start = clock()
            for t in ts:
                t.join()
            walls[mode].append(clock() - t_start)
            after = _metrics(admin)
            for k, v in _diff(after, before).items():
                server_side[mode][k] += v
            for sink in sinks:
                for ch, dt in sink:
                    lat[mode][ch].append(dt)
            counts[mode] += total

        blocks = [inproc_block, *(lambda n=n: http_block(n) for n in counts_of_clients)]
        loads = [loadavg()]
        for r in range(rounds):
            shift = r % len(blocks)
            for fn in blocks[shift:] + blocks[:shift]:
                fn()
            if (r + 1) % max(1, rounds // 5) == 0 or r + 1 == rounds:
                log(f"{kind}: packets round {r + 1}/{rounds}: " + ", ".join(
                    f"{m} p50 {percentiles([x for v in lat[m].values() for x in v])['p50']:.2f} ms" for m in modes))
        loads.append(loadavg())
        results = {}
        for m in modes:
            wall = sum(walls[m])
            results[m] = {"all": percentiles([x for v in lat[m].values() for x in v]),
                          "by_chapter": {str(ch): percentiles(v) for ch, v in lat[m].items()},
                          "requests": counts[m], "wall_seconds": wall, "per_s": counts[m] / wall,
                          "blocks": len(walls[m]), "outcomes": dict(outcomes.by_mode.get(m, {}))}
        for m, sv in server_side.items():
            results[m]["server"] = {"compile_mean_ms": sv["compile_sum"] / (sv["compile_count"] or 1) * 1e3,
                                    "asgi_mean_ms": sv["request_sum"] / (sv["request_count"] or 1) * 1e3,
                                    "compile_count": sv["compile_count"], "request_count": sv["request_count"]}
        results["inproc"]["to_json"] = percentiles(to_json)
        ip, n = results["inproc"], cfg["clients"]
        out["packets"] = {"modes": results, "per_round": per_round, "rounds": rounds, "clients": counts_of_clients,
                          "loadavg": loads, "rss_inproc_mb": {"before": rss_inproc_start, "after": rss_mb()}}
        out["packets"]["goals"] = {
            "p50_diff_ms": {str(ch): results["http1"]["by_chapter"][str(ch)]["p50"] - ip["by_chapter"][str(ch)]["p50"]
                            for ch in chapters},
            "throughput_vs_inproc": {m: results[m]["per_s"] / ip["per_s"] for m in modes[1:]},
            "throughput8_vs_inproc": results[f"http{n}"]["per_s"] / ip["per_s"],
        }
        log(f"{kind}: packets/s " + ", ".join(f"{m} {results[m]['per_s']:.1f}" for m in modes)
            + f"; outcomes {outcomes.as_dict()}")
        out["server_rss_after_packets"] = proc_status(server.pid)

        # -- 2. the CLI ---------------------------------------------------------------------------------
        cli = []
        for _ in range(cfg["cli_runs"]):
            t = clock()
            proc = subprocess.run([CANON, "--db", url, "packet", "--story", story, "--role", "writer", "--chapter",
                                   str(last_ch), "--no-record", "--format", "json"], capture_output=True, text=True)
            cli.append(clock() - t)
            if proc.returncode != 0 or json.loads(proc.stdout)["hash"] != reference[last_ch].hash:
                raise RuntimeError(f"CLI packet failed or differs: {proc.returncode} {proc.stderr[-500:]}")
        out["cli"] = percentiles(cli)
        out["cli"]["ratio_vs_http1"] = out["cli"]["p50"] / results["http1"]["by_chapter"][str(last_ch)]["p50"]
        log(f"{kind}: CLI packet p50 {out['cli']['p50']:.0f} ms ({out['cli']['ratio_vs_http1']:.0f}x HTTP's p50)")

        # -- 3. command -> packet ---------------------------------------------------------------------
        body_text = gen_story.prose(60)
        run = uuid.uuid4().hex[:8]
        c2p: dict[str, Any] = {}
        client = clients[0]
        l1 = packets.retriever
        for variant in ("record_true", "record_false", "inproc_l0"):
            record = variant != "record_false"
            rec = "true" if record else "false"
            h_tot, h_post, h_get, i_tot, i_apply, fails = [], [], [], [], [], Counter()
            if variant == "inproc_l0":
                packets.retriever = None  # L0 only, as bench_packets measures it: what L1 adds
            try:
                for i in range(cfg["warmup"] + cfg["c2p_samples"]):
                    keep = i >= cfg["warmup"]
                    if variant != "inproc_l0":
                        # HTTP: the server first catches up, untimed, with the last in-process command
                        client.packet_bytes(story, "writer", last_ch, record="false")
                        marker = f"C2P-{run}-h{rec}-{i:05d}"
                        cmd = {"type": "record_chapter_summary", "command_id": f"c2p-{run}-h{rec}-{i}",
                               "story_id": story, "chapter": last_ch - 1, "text": f"{marker} {body_text}"}
                        t = clock()
                        answer = client.apply(cmd)
                        t1 = clock()
                        r = client.http.get(f"/v1/stories/{story}/packet", params={
                            "role": "writer", "chapter": last_ch, "after": answer["position"], "record": rec})
                        t2 = clock()
                        if answer["results"][0]["status"] != "applied" or r.status_code != 200 \
                                or marker.encode() not in r.content:
                            fails["http"] += 1
                        if keep:
                            h_tot.append(t2 - t)
                            h_post.append(t1 - t)
                            h_get.append(t2 - t1)
                    # in process: first catch up, untimed, with the HTTP command
                    services.canon.ensure_reflects(services.ledger.event_log.position())
                    marker = f"C2P-{run}-i{variant}-{i:05d}"
                    cmd = {"type": "record_chapter_summary", "command_id": f"c2p-{run}-i{variant}-{i}",
                           "story_id": story, "chapter": last_ch - 1, "text": f"{marker} {body_text}"}
                    t = clock()
                    [result] = services.ledger.apply([parse_command(cmd)])
                    t1 = clock()
                    p = packets.packet(requests[last_ch], after=result.position, record=record)
                    t2 = clock()
                    if result.status != "applied" or not any(it.kind == "chapter_summary" and marker in it.text
                                                             and it.status != "dropped" for it in p.items):
                        fails["inproc"] += 1
                    if keep:
                        i_tot.append(t2 - t)
                        i_apply.append(t1 - t)
            finally:
                packets.retriever = l1
            c2p[variant] = {"inproc": {**percentiles(i_tot), "apply": percentiles(i_apply)}, "failures": dict(fails)}
            if h_tot:
                c2p[variant]["http"] = {**percentiles(h_tot), "post": percentiles(h_post), "get": percentiles(h_get)}
            log(f"{kind}: command-to-packet {variant}: " + (
                f"HTTP p50 {percentiles(h_tot)['p50']:.2f} ms (POST {percentiles(h_post)['p50']:.2f}, GET {percentiles(h_get)['p50']:.2f}); "
                if h_tot else "") + f"in process {c2p[variant]['inproc']['p50']:.2f} ms; failures {dict(fails)}")
        out["command_to_packet"] = c2p

        # -- 4. sustained mixed load ------------------------------------------------------------------
        out["mixed"] = mixed_load(cfg, server, clients, admin, token, story, chapters, body_text, run,
                                  cfg["mixed_clients"])
        out["server_rss_after_mixed"] = proc_status(server.pid)
        also = cfg["mixed_also_clients"]
        if also and also != cfg["mixed_clients"]:  # a diagnostic: the same load with fewer packet clients
            out["mixed_also"] = mixed_load(cfg, server, clients, admin, token, story, chapters, body_text, run, also)
            out["server_rss_end"] = proc_status(server.pid)
        with contextlib.suppress(Exception):
            out["readyz_after"] = admin.get("/readyz")
        out["loadavg"]["end"] = loadavg()
        admin.close()
    finally:
        for c in clients:
            with contextlib.suppress(Exception):
                c.close()
        if server is not None:
            out["server_stop"] = server.stop()
            out["server_log"] = server_log_summary(server.log_path)
        services.close()
    out["outcomes"] = outcomes.as_dict()
    out["worker_peak_rss_mb"] = rss_mb()
    return out


def mixed_load(cfg: dict[str, Any], server: Server, clients: list[Any], admin: Any, token: str, story: str,
               chapters: list[int], body_text: str, run: str, n: int) -> dict[str, Any]:
    """``--mixed-rate`` commands/s (paced) and ``n`` packet clients for ``--mixed-seconds``.

    Rates count what completed inside the window; latencies cover every request started in it
    (errors and timeouts included: what a client waited), so requests still running when the
    window closes are waited for (``drain_seconds``)."""
    import httpx

    from canon_ledger.infrastructure.http.client import CanonClient

    kind, seconds, rate = cfg["kind"], cfg["mixed_seconds"], cfg["mixed_rate"]
    clock = time.perf_counter
    stop = threading.Event()
    errors: Counter[str] = Counter()
    examples: list[str] = []
    lock = threading.Lock()
    pk: list[tuple[float, float, bool]] = []  # (end, seconds, ok)
    cmd: list[tuple[float, float, bool]] = []
    late: list[float] = []
    rss: list[float] = []
    degraded = [0]
    slots = iter(range(10**9))  # the schedule: slot i is due at start + i / rate
    start = [0.0]

    def error(what: str, detail: str) -> None:
        with lock:
            errors[what] += 1
            if len(examples) < 10:
                examples.append(f"{what}: {detail[:300]}")

    def packets_loop(k: int) -> None:
        c, i = clients[k], k
        while not stop.is_set():
            ch = chapters[i % len(chapters)]
            i += 1
            t = clock()
            ok = False
            try:
                r = c.http.get(f"/v1/stories/{story}/packet", params={"role": "writer", "chapter": ch})
                if r.status_code != 200:
                    error(f"packet HTTP {r.status_code}", r.text)
                else:
                    ok = True
                    if Outcomes.L1_ERROR in r.content:  # served, but a stage failed (less or no L1)
                        with lock:
                            degraded[0] += 1
            except httpx.HTTPError as e:
                error(f"packet {type(e).__name__}", str(e))
            end = clock()
            pk.append((end, end - t, ok))
            if not ok:
                stop.wait(0.05)

    def commands_loop() -> None:
        """One of ``--mixed-senders`` threads taking the next slot of the paced schedule: the offered
        rate holds while a command waits behind packets (up to that many in flight)."""
        c = CanonClient(server.base, token, timeout=60.0)
        targets = [ch - 1 for ch in chapters]
        try:
            while not stop.is_set():
                with lock:
                    i = next(slots)
                due = start[0] + i / rate
                now = clock()
                if due > now and stop.wait(due - now):
                    break
                late.append(max(0.0, clock() - due))
                command = {"type": "record_chapter_summary", "command_id": f"mixed-{run}-{n}-{i}", "story_id": story,
                           "chapter": targets[i % len(targets)], "text": f"MIXED-{run}-{n}-{i:06d} {body_text}"}
                t = clock()
                ok = False
                try:
                    answer = c.apply(command)
                    status = answer["results"][0]["status"] if answer.get("results") else "no result"
                    ok = status == "applied"
                    if not ok:
                        error(f"command {status}", json.dumps(answer.get("results", answer))[:300])
                except Exception as e:  # noqa: BLE001 - counted
                    error(f"command {type(e).__name__}", str(e))
                end = clock()
                cmd.append((end, end - t, ok))
        finally:
            c.close()

    def rss_loop() -> None:
        while not stop.is_set():
            rss.append(proc_status(server.pid).get("VmRSS", 0.0))
            stop.wait(0.5)

    before = _metrics(admin)
    position_before = admin.get("/readyz")["position"]
    threads = [threading.Thread(target=packets_loop, args=(k,)) for k in range(n)]
    threads += [threading.Thread(target=commands_loop) for _ in range(cfg["mixed_senders"])]
    threads.append(threading.Thread(target=rss_loop))
    load0 = loadavg()
    t_start = start[0] = clock()
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    window_end = clock()
    for t in threads:
        t.join()
    wall = clock() - t_start
    after = _metrics(admin)
    ready = admin.get("/readyz")
    d = _diff(after, before)
    window = window_end - t_start
    out = {
        "clients": n, "window_seconds": window, "drain_seconds": wall - window, "rate_offered": rate,
        "senders": cfg["mixed_senders"],
        "commands": {**percentiles([x[1] for x in cmd]), "applied_in_window": sum(1 for e, _, ok in cmd if ok and e <= window_end),
                     "failed": sum(1 for _, _, ok in cmd if not ok), "late_p99_ms": percentiles(late)["p99"],
                     "late_max_ms": percentiles(late)["max"]},
        "packets": {**percentiles([x[1] for x in pk]), "ok_in_window": sum(1 for e, _, ok in pk if ok and e <= window_end),
                    "failed": sum(1 for _, _, ok in pk if not ok)},
        "errors": dict(errors), "error_count": sum(errors.values()), "error_examples": examples,
        "packets_with_failed_stage": degraded[0],
        "server": {"compile_mean_ms": d["compile_sum"] / (d["compile_count"] or 1) * 1e3,
                   "asgi_mean_ms": d["request_sum"] / (d["request_count"] or 1) * 1e3},
        "rss_sampled_max_mb": max(rss) if rss else 0.0,
        # Is it flat? The medians of the first and the last minute of samples (every 0.5 s), and
        # one median a minute between (a long ``--mixed-seconds`` run).
        "rss_first_minute_mb": statistics.median(rss[:120]) if rss else 0.0,
        "rss_last_minute_mb": statistics.median(rss[-120:]) if rss else 0.0,
        "rss_per_minute_mb": [round(statistics.median(rss[i:i + 120]), 1) for i in range(0, len(rss), 120)],
        "server_vmhwm_mb": proc_status(server.pid).get("VmHWM", 0.0),
        "log_growth_events": ready["position"] - position_before,
        "lag_after": {name: m["behind"] for name, m in ready["read_models"].items()},
        "loadavg": [load0, loadavg()],
    }
    out["commands"]["per_s"] = out["commands"]["applied_in_window"] / window
    out["packets"]["per_s"] = out["packets"]["ok_in_window"] / window
    log(f"{kind}: mixed load, {n} packet clients, {window:.0f} s (+{wall - window:.1f} s drain): "
        f"{out['commands']['per_s']:.1f} commands/s applied (p99 {out['commands']['p99']:.1f} ms), "
        f"{out['packets']['per_s']:.1f} packets/s (p50 {out['packets']['p50']:.1f}, p99 {out['packets']['p99']:.1f} ms), "
        f"errors {out['error_count']} {dict(errors)}, server VmHWM {out['server_vmhwm_mb']:.0f} MB")
    return out


# -- the benchmark --------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    started = time.perf_counter()
    story, commands = story_commands(args)
    chapters = chapters_measured(args.chapters)
    logdir = tempfile.mkdtemp(prefix="bench_http_")
    results = []
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                t0 = time.perf_counter()
                loaded = load_story(url, store.kind, commands, args.batch_size)
                setup = run_worker({"kind": store.kind, "url": url}, "--catchup", __file__)
                cfg = {"kind": store.kind, "url": url, "story_id": gen_story.STORY, "chapters": chapters,
                       "token": setup.pop("token"), "also_clients": args.also_clients,
                       "samples": args.samples, "rounds": args.rounds, "warmup": args.warmup, "clients": args.clients,
                       "cli_runs": args.cli_runs, "c2p_samples": args.c2p_samples, "mixed_seconds": args.mixed_seconds,
                       "mixed_rate": args.mixed_rate, "mixed_clients": args.mixed_clients,
                       "mixed_senders": args.mixed_senders, "mixed_also_clients": args.mixed_also_clients,
                       "server_log": os.path.join(logdir, f"server_{store.kind}.log")}
                measured = run_worker(cfg, "--worker", __file__)
                results.append({"store": store.kind, "load": loaded, "catch_up": setup, **measured,
                                "store_seconds": time.perf_counter() - t0})
    info["server_logs"] = logdir
    return {"machine": info, "story": story, "chapters": chapters, "args": vars(args), "targets": TARGETS,
            "results": results, "skipped": skipped, "verdicts": verdicts(results, chapters, args.clients)}


def verdicts(results: list[dict[str, Any]], chapters: list[int], clients: int) -> list[dict[str, Any]]:
    out = []
    for r in results:
        g = r["packets"]["goals"]
        worst = max(g["p50_diff_ms"].values())
        c2p = r["command_to_packet"]["record_true"]["http"]["p50"]
        checks = [
            ("HTTP p50 - in-process p50, one client (worst chapter)", worst, TARGETS["http_minus_inproc_ms"], "ms",
             worst <= TARGETS["http_minus_inproc_ms"]),
            (f"packets/s at {clients} clients / in-process single thread", g["throughput8_vs_inproc"],
             TARGETS["throughput_8_vs_inproc"], "x", g["throughput8_vs_inproc"] >= TARGETS["throughput_8_vs_inproc"]),
            (f"CLI p50 / HTTP p50, chapter {chapters[-1]:,} (expected)", r["cli"]["ratio_vs_http1"],
             TARGETS["cli_vs_http"], "x", r["cli"]["ratio_vs_http1"] >= TARGETS["cli_vs_http"]),
            ("command -> packet over HTTP, p50 (record=true)" + (" (goal set for PostgreSQL)" if r["store"] != "postgres"
                                                                 else ""), c2p, TARGETS["c2p_p50_ms"], "ms",
             c2p <= TARGETS["c2p_p50_ms"]),
            ("mixed load: errors", r["mixed"]["error_count"], TARGETS["mixed_errors"], "",
             r["mixed"]["error_count"] == 0),
            ("server peak RSS (VmHWM), semantic embedder loaded", r["mixed"]["server_vmhwm_mb"],
             TARGETS["server_rss_mb"], "MB", r["mixed"]["server_vmhwm_mb"] <= TARGETS["server_rss_mb"]),
        ]
        for name, value, target, unit, ok in checks:
            out.append({"store": r["store"], "target": name, "value": value, "limit": target, "unit": unit, "pass": ok})
    return out


# -- reporting ------------------------------------------------------------------------------------
def _pq(p: dict[str, float]) -> str:
    return f"{p['p50']:.2f} / {p['p99']:.2f}"


def _outcomes(counts: dict[str, int]) -> str:
    bad = {k: v for k, v in counts.items() if k not in ("200, as in process", "as reference")}
    return ", ".join(f"{k} x{v}" for k, v in bad.items()) or "none"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m, s, chapters = report["machine"], report["story"], report["chapters"]
    a = report["args"]
    first = report["results"][0] if report["results"] else None
    out = [
        *header("bench_http.py", argv, m),
        f"- Story (seed {s['seed']}): {s['commands']:,} commands, {s['events']:,} events, {s['chapters']:,} chapters, "
        f"{s['canon_entries']:,} canon entries.",
    ]
    if first:
        mode_names = ", ".join(["in process", *(f"HTTP x{n}" for n in first["packets"]["clients"])])
        out.append(f"- Packets: {a['rounds']} rounds of {len(first['packets']['clients']) + 1} blocks ({mode_names}; "
                   f"order rotated each round), {first['packets']['per_round']} requests per chapter per block in process "
                   f"and at one client, {max(3, first['packets']['per_round'] * len(chapters) // 2)} per client thread "
                   "with several; record=false; times in ms as p50 / p99.")
    for r in report["results"]:
        ready, cu = r["readyz"], r["catch_up"]
        out.append(f"- {r['store']}: read models caught up before the server (a set-up subprocess): canon "
                   f"{cu['canon_seconds']:.0f} s, knowledge + keyword + vectors {cu['retrieval_seconds']:.0f} s"
                   + (f", then VACUUM ANALYZE {cu['vacuum_analyze_seconds']:.1f} s (autovacuum={cu['autovacuum']})"
                      if "autovacuum" in cu else "")
                   + f"; server answering /healthz {r['server_start_seconds']:.1f} s after launch; /readyz embedder "
                   f"**{ready['embedder']}** (in process: {r['inproc_embedder']}); the server's first request per "
                   "chapter " + ", ".join(f"{int(ch):,}: {ms:.0f} ms" for ch, ms in r["server_first_request_ms"].items()))
    out += ["", "Writer packets, record=false, L1 on (as served), round-robin over the chapters:", "",
            "| Store | Mode | " + " | ".join(f"ch {int(ch):,}" for ch in chapters)
            + " | all | packets/s | vs in-process rate | answers other than the in-process packet |",
            "|---|---|" + "--:|" * len(chapters) + "--:|--:|--:|---|"]
    for r in report["results"]:
        modes = r["packets"]["modes"]
        for mode, md in modes.items():
            label = "in process, 1 thread" if mode == "inproc" else f"HTTP, {mode[4:]} client{'s' if mode != 'http1' else ''}"
            out.append(f"| {r['store']} | {label} | " + " | ".join(_pq(md["by_chapter"][str(ch)]) for ch in chapters)
                       + f" | {_pq(md['all'])} | {md['per_s']:.1f} | {md['per_s'] / modes['inproc']['per_s']:.2f}x "
                       f"| {_outcomes(md['outcomes'])} |")
    out += ["", "Where the HTTP time goes (means in ms, all chapters; server side from its /metrics histograms):", "",
            "| Store | Mode | client sees | server ASGI app | of which compile (thread pool) | ASGI - compile "
            "| outside the app | in-process compile | packet.to_json | /healthz p50 |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        modes = r["packets"]["modes"]
        for mode, md in modes.items():
            if mode == "inproc":
                continue
            sv = md["server"]
            out.append(f"| {r['store']} | HTTP x{mode[4:]} | {md['all']['mean']:.2f} | {sv['asgi_mean_ms']:.2f} "
                       f"| {sv['compile_mean_ms']:.2f} | {sv['asgi_mean_ms'] - sv['compile_mean_ms']:.2f} "
                       f"| {md['all']['mean'] - sv['asgi_mean_ms']:.2f} | {modes['inproc']['all']['mean']:.2f} "
                       f"| {modes['inproc']['to_json']['p50']:.3f} | {r['healthz']['p50']:.2f} |")
    out += ["", f"CLI (chapter {chapters[-1]:,}) and command-to-packet (POST a chapter-{chapters[-1] - 1:,} summary, then "
            f"GET the chapter-{chapters[-1]:,} packet with `after`; p50 / p99 ms):", "",
            "| Store | CLI p50 (runs) | CLI / HTTP p50 | c2p HTTP, record=true | of which POST / GET | c2p HTTP, record=false "
            "| c2p in process, record=true / false | of which apply | in process, L0 only | failures (HTTP / in process) |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        c, c2 = r["cli"], r["command_to_packet"]
        t, f, l0 = c2["record_true"], c2["record_false"], c2["inproc_l0"]
        fails = {k: sum(v["failures"].get(k, 0) for v in c2.values()) for k in ("http", "inproc")}
        out.append(f"| {r['store']} | {c['p50']:.0f} ms ({c['n']}) | {c['ratio_vs_http1']:.0f}x | {_pq(t['http'])} "
                   f"| {t['http']['post']['p50']:.2f} / {t['http']['get']['p50']:.2f} | {_pq(f['http'])} "
                   f"| {t['inproc']['p50']:.2f} / {f['inproc']['p50']:.2f} | {t['inproc']['apply']['p50']:.2f} "
                   f"| {_pq(l0['inproc'])} "
                   f"| {fails['http']} / {fails['inproc']} |")
    out += ["", f"Sustained mixed load ({a['mixed_rate']:g} commands/s offered by {a['mixed_senders']} paced senders, "
            f"packets round-robin with the service default record=true; rates count what completed in the window, "
            "latencies every request, errors and timeouts included; p50 / p99 ms):", "",
            "| Store | Packet clients | Window (+ drain) s | commands/s applied | command p50 / p99 | packets/s "
            "| packet p50 / p99 | server compile / ASGI mean | errors | 200s with a failed stage "
            "| server RSS: start / warm / peak (VmHWM) |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        for key in ("mixed", "mixed_also"):
            x = r.get(key)
            if x is None:
                continue
            out.append(f"| {r['store']} | {x['clients']}{'' if key == 'mixed' else ' (diagnostic)'} "
                       f"| {x['window_seconds']:.0f} (+{x['drain_seconds']:.1f}) | {x['commands']['per_s']:.1f} "
                       f"| {_pq(x['commands'])} | {x['packets']['per_s']:.1f} | {_pq(x['packets'])} "
                       f"| {x['server']['compile_mean_ms']:.1f} / {x['server']['asgi_mean_ms']:.1f} | {x['error_count']} "
                       f"| {x['packets_with_failed_stage']} "
                       f"| {r['server_rss_after_start'].get('VmRSS', 0):.0f} / "
                       f"{r['server_rss_after_warmup'].get('VmRSS', 0):.0f} / {x['server_vmhwm_mb']:.0f} MB |")
    for r in report["results"]:
        for key in ("mixed", "mixed_also"):
            x = r.get(key)
            if x and x["errors"]:
                out += ["", f"{r['store']}, {x['clients']} packet clients, errors: "
                        + ", ".join(f"{k} x{v}" for k, v in x["errors"].items()) + f". First: {x['error_examples'][0]}"]
    out += ["", "Goals:", "", "| Store | Goal | Measured | Limit | Verdict |", "|---|---|--:|--:|---|"]
    for v in report["verdicts"]:
        val = f"{v['value']:.2f}" if isinstance(v["value"], float) else str(v["value"])
        out.append(f"| {v['store']} | {v['target']} | {val} {v['unit']} | {v['limit']:g} {v['unit']} "
                   f"| {'met' if v['pass'] else '**missed**'} |")
    for r in report["results"]:
        sl = r.get("server_log", {})
        if sl.get("tracebacks"):
            out += ["", f"{r['store']}: the server log holds {sl['tracebacks']} traceback(s) "
                    f"({sl['exception_in_asgi_application']} 'Exception in ASGI application', {sl['internal_error_lines']} "
                    f"internal errors, {sl['store_unavailable_lines']} store unavailable); ending in "
                    + ", ".join(f"{k} x{v}" for k, v in sl["final_exceptions"].items())]
    for store, reason in report["skipped"].items():
        out += ["", f"Skipped {store}: {reason}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--worker"], ["--catchup"]):
        run = worker if argv[0] == "--worker" else catch_up
        print(json.dumps(run(json.loads(argv[1])), default=str))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200-chapter story, fewer samples, 10 s mixed load")
    parser.add_argument("--samples", type=int, help="requests per chapter per mode (default 200; 30 with --quick)")
    parser.add_argument("--rounds", type=int, help="alternation rounds (default 10; 3 with --quick)")
    parser.add_argument("--warmup", type=int, help="warmup calls (default 20; 5 with --quick)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients in the packet blocks")
    parser.add_argument("--also-clients", type=int, default=4,
                        help="a third HTTP block type with this many clients (0: none; a diagnostic, not a goal)")
    parser.add_argument("--cli-runs", type=int, help="CLI processes (default 5; 2 with --quick)")
    parser.add_argument("--c2p-samples", type=int, help="command-to-packet samples (default 100; 15 with --quick)")
    parser.add_argument("--mixed-seconds", type=float, help="sustained mixed load (default 60; 10 with --quick)")
    parser.add_argument("--soak", action="store_true",
                        help="let --mixed-seconds run past 60 s (a memory soak: is the server's RSS flat?)")
    parser.add_argument("--mixed-rate", type=float, default=50.0, help="commands/s in the mixed load")
    parser.add_argument("--mixed-clients", type=int, default=8, help="packet clients in the mixed load")
    parser.add_argument("--mixed-also-clients", type=int, default=4,
                        help="then the same mixed load with this many packet clients (0: not run; a diagnostic)")
    parser.add_argument("--mixed-senders", type=int, default=8,
                        help="threads sending the paced commands in the mixed load (at most that many in flight)")
    story_options(parser)
    add_output_options(parser)
    args = parser.parse_args(argv)
    q = args.quick
    args.samples = args.samples or (30 if q else 200)
    args.rounds = args.rounds or (3 if q else 10)
    args.warmup = args.warmup if args.warmup is not None else (5 if q else 20)
    args.cli_runs = args.cli_runs or (2 if q else 5)
    args.c2p_samples = args.c2p_samples or (15 if q else 100)
    args.mixed_seconds = args.mixed_seconds or (10.0 if q else 60.0)
    story_sized(args)
    if args.samples < args.rounds or args.rounds < 1 or args.clients < 1 or args.mixed_clients < 1 or args.mixed_rate <= 0:
        parser.error("samples >= rounds >= 1; clients, mixed clients and mixed rate > 0")
    if not args.soak:
        args.mixed_seconds = min(args.mixed_seconds, 60.0)  # bounded: issue 17 asks for at most a minute
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
