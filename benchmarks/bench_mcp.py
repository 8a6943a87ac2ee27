#!/usr/bin/env python
"""``get_packet`` through MCP (stdio and streamable HTTP) against the API's packet endpoint,
on the 1,000-chapter benchmark story (issue 20).

    python benchmarks/bench_mcp.py [--store sqlite|postgres] [--quick] [--samples N] [--markdown]
                                   [--save-json PATH]

Not part of the pytest run. Goal: a ``get_packet`` round trip over each MCP transport takes at
most 1.5x the API's ``GET /v1/stories/{story}/packet?role=writer&chapter=N`` (p50), at chapter
1,000. All three ask for the same packet with the service default record=true, so they do the
same work: the first request records it, every later identical one finds it recorded.

The story, its loading and the server are as in ``bench_viewer`` (``gen_story`` seed 3 loaded by
``common.load_story``; ``bench_http.catch_up`` for an admin key and caught-up models;
``bench_http.Server``: a real ``canon serve`` subprocess). The stdio server is a second real
process, ``canon --db URL mcp --no-worker`` (the serve process's worker keeps the models
current), launched by the SDK's own ``Client``. The three clients live in this process's one
event loop: the API through ``httpx.AsyncClient`` (keep-alive), ``/mcp`` through the SDK's
``Client`` over ``streamable_http_client`` with the bearer key, stdio through ``Client`` over
``StdioServerParameters``. After warm-up, requests are alternated API, HTTP MCP, stdio MCP,
API, ...; each is timed from the call to the parsed answer (the API's body bytes; the tool
result's text). Every answer's packet bytes are checked equal to the API's.

``--quick``: a 200-chapter story at chapter 200, 30 samples: a smoke run, not comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_http  # noqa: E402
import gen_story  # noqa: E402
from bench_http import Server  # noqa: E402
from common import (CANON, PostgresStores, SQLiteStores, emit, header, load_story, loadavg, log,  # noqa: E402
                    machine_info, percentiles, run_worker, story_commands, story_options, story_sized)

GOAL = 1.5  # MCP / API, p50, per transport
SIDES = ("api", "mcp_http", "mcp_stdio")


async def rounds(server: Server, url: str, token: str, story: str, chapter: int, samples: int,
                 warmup: int) -> dict[str, Any]:
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    arguments = {"story": story, "role": "writer", "chapter": chapter}
    env = {k: v for k, v in os.environ.items() if k not in ("CANON_DATABASE_URL", "CANON_MCP_KEY")}
    stdio = Client(StdioServerParameters(command=CANON, args=["--db", url, "mcp", "--no-worker"], env=env),
                   read_timeout_seconds=300)
    bearer = {"Authorization": f"Bearer {token}"}
    http = Client(streamable_http_client(f"{server.base}/mcp",
                                         http_client=httpx2.AsyncClient(headers=bearer, timeout=300)),
                  read_timeout_seconds=300)
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    bodies: dict[str, str] = {}
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=server.base, headers=bearer, timeout=300) as api, http as h, stdio as s:
        log(f"clients connected in {time.perf_counter() - started:.1f} s")

        async def call_api() -> str:
            r = await api.get(f"/v1/stories/{story}/packet", params={"role": "writer", "chapter": chapter})
            r.raise_for_status()
            return r.text

        async def call_tool(client: Any) -> str:
            result = await client.call_tool("get_packet", arguments)
            if result.is_error:
                raise RuntimeError(result.content[0].text)
            return result.content[0].text

        calls = {"api": call_api, "mcp_http": lambda: call_tool(h), "mcp_stdio": lambda: call_tool(s)}
        for n in range(warmup + samples):
            for side in SIDES:
                t0 = time.perf_counter()
                body = await calls[side]()
                elapsed = time.perf_counter() - t0
                if n >= warmup:
                    times[side].append(elapsed)
                bodies.setdefault(side, body)
                if body != bodies["api"]:
                    raise AssertionError(f"{side}: the packet differs from the API's")
    out = {side: percentiles(times[side]) for side in SIDES}
    return {"sides": out, "bytes": len(bodies["api"].encode()),
            "ratio_p50": {side: out[side]["p50"] / out["api"]["p50"] for side in SIDES[1:]},
            "ratio_mean": {side: out[side]["mean"] / out["api"]["mean"] for side in SIDES[1:]}}


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    story, commands = story_commands(args)
    store = SQLiteStores() if args.store == "sqlite" else PostgresStores(args.pg_url)
    info = machine_info(args.pg_url if args.store == "postgres" else None)
    logdir = tempfile.mkdtemp(prefix="bench_mcp_")
    result: dict[str, Any] = {"store": store.kind, "chapter": args.chapters}
    try:
        with store.fresh() as url:
            result["load"] = load_story(url, store.kind, commands, args.batch_size)
            del commands
            gc.collect()
            setup = run_worker({"kind": store.kind, "url": url}, "--catchup", bench_http.__file__)
            token = setup.pop("token")
            server = Server(url, os.path.join(logdir, f"server_{store.kind}.log"))
            try:
                result["server_start_seconds"] = server.start()
                result["loadavg_before"] = loadavg()
                result["round_trip"] = asyncio.run(rounds(server, url, token, gen_story.STORY, args.chapters,
                                                          args.samples, args.warmup))
                r = result["round_trip"]
                log(f"{store.kind}: p50 API {r['sides']['api']['p50']:.2f} ms, MCP HTTP "
                    f"{r['sides']['mcp_http']['p50']:.2f} ms ({r['ratio_p50']['mcp_http']:.2f}x), MCP stdio "
                    f"{r['sides']['mcp_stdio']['p50']:.2f} ms ({r['ratio_p50']['mcp_stdio']:.2f}x); "
                    f"{r['bytes']:,} bytes")
                result["loadavg_after"] = loadavg()
            finally:
                server.stop()
    finally:
        store.close()
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    r = result["round_trip"]
    verdicts = [{"goal": f"get_packet p50, MCP {side[4:]} / API", "value": r["ratio_p50"][side], "limit": GOAL,
                 "pass": r["ratio_p50"][side] <= GOAL} for side in SIDES[1:]]
    return {"machine": info, "story": story, "args": vars(args), "result": result, "verdicts": verdicts}


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    r = report["result"]["round_trip"]
    lines = [*header("bench_mcp.py", argv, report["machine"]),
             f"- {report['result']['store']}, chapter {report['result']['chapter']:,}, {r['bytes']:,}-byte packet, "
             f"{r['sides']['api']['n']} samples per side", "", "| side | p50 ms | p90 ms | mean ms | p50 / API |", "|---|---|---|---|---|"]
    for side in SIDES:
        s = r["sides"][side]
        ratio = "1" if side == "api" else f"{r['ratio_p50'][side]:.2f}x"
        lines.append(f"| {side} | {s['p50']:.2f} | {s['p90']:.2f} | {s['mean']:.2f} | {ratio} |")
    lines += ["", *(f"- {v['goal']}: {v['value']:.2f}x (goal <= {v['limit']}x): {'pass' if v['pass'] else 'MISSED'}"
                    for v in report["verdicts"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="200-chapter story at chapter 200, 30 samples")
    parser.add_argument("--samples", type=int, help="round trips per side (default 200; 30 with --quick)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up round trips per side")
    story_options(parser)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table (default: the JSON report)")
    parser.add_argument("--save-json", metavar="PATH", help="also write the JSON report to PATH")
    args = parser.parse_args(argv)
    args.samples = args.samples or (30 if args.quick else 200)
    story_sized(args)
    args.format = "markdown" if args.markdown else "json"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
