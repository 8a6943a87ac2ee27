#!/usr/bin/env python
"""The packet viewer page against the JSON endpoint, on the 1,000-chapter benchmark story (issue 19).

    python benchmarks/bench_viewer.py [--store sqlite|postgres] [--quick] [--samples N]
                                      [--browser-samples N] [--no-profile] [--markdown] [--save-json PATH]

Not part of the pytest run. Goal: the viewer page (``GET /stories/{story}/packet?role=writer&
chapter=N``, server-rendered HTML, logged in by the ``canon_session`` cookie) takes at most 2x the
time of the JSON endpoint for the same packet (``GET /v1/stories/{story}/packet?role=writer&
chapter=N``, bearer key), at chapter 1,000. Both sides use the service default record=true, so
they do the same work: the first request records the packet, every later identical one finds it
recorded.

Reused from ``bench_http`` (issue 17), not copied: the story and its loading (``gen_story``,
seed 3: 1,000 chapters, 10,000 canon entries; ``common.load_story``: ``ledger.apply``
in atomic batches of 100 into a temp SQLite file or a scratch PostgreSQL database
``canon_bench_<hex>``, created and dropped), the set-up subprocess (``bench_http.catch_up``:
an admin key through the CLI, canon and the retrieval models caught up over the log (not
authoring: the first page request may catch it up), ``VACUUM ANALYZE`` on PostgreSQL), and
the server (``bench_http.Server``: ``canon --db URL serve --port P --log-level warning
--no-access-log`` as a real subprocess, waited for on ``/healthz``). As in ``bench_http``, no
``CANON_EMBEDDER`` is set: the server loads the product default (MiniLM); ``/readyz`` names
it. At chapter 1,000 the packet has no L1 (L0 spends the budget), so the embedder does not
enter the timed requests.

1. **TTFB** (httpx, this process's main thread, nothing else running): one keep-alive
   ``httpx.Client`` per side (the page's with the ``canon_session`` cookie from ``POST /login``,
   the JSON's with ``Authorization: Bearer``), requests alternated page, JSON, page, JSON ...
   after warm-up. Per request, with ``client.stream``: the time to the response headers
   (TTFB), to the first body chunk, and to the last byte. The server's own ``/metrics``
   (``canon_http_request_seconds`` by route) before and after: the mean time inside the app.
2. **Browser**: Debian's chromium (``/usr/bin/chromium``) through Playwright. Three contexts,
   one tab each: the page (cookie set with ``add_cookies``; the browser cache on, so
   ``/static/viewer.css`` is fetched once and then comes from the cache), the JSON URL
   (``extra_http_headers`` with the bearer key; the browser cache off through CDP
   ``Network.setCacheDisabled``, since the route answers a conditional request with a 304 and
   the body would then not be sent), and, a diagnostic, the page with the cache off (the CSS
   fetched on every load). Each sample navigates the tab to ``about:blank`` (untimed), then
   times ``page.goto(url, wait_until="load")``; the navigation's own timing
   (``performance.getEntriesByType('navigation')``: responseStart, responseEnd,
   domContentLoadedEventEnd, loadEventEnd), the CSS's resource timing, the document's element
   count and the renderer's CDP ``Performance.getMetrics`` counters (task, script, style,
   layout time; diffed around the load) are read after it. Alternated page, JSON, page (no
   cache).
3. **Where the page's time goes** (``--no-profile`` to skip; after the server has stopped):
   the app in this process (``create_app(url, worker=False)`` under Starlette's
   ``TestClient``), the page's steps timed by wrapping ``pages._story``, ``pages._packet``,
   ``services.packet``, ``Packet.to_json``, ``pages.budget_bar`` / ``by_tier`` and
   ``pages.render`` and ``jinja2.Template.render``, page and JSON requests alternated; the SQL
   statements ``pages._story`` runs (SQLAlchemy cursor events while inside it); and, a
   counterfactual, page and JSON again with ``pages._story`` answered from a dict kept from its
   first call (what the page costs without its story read).

``--quick``: a 200-chapter story at chapter 200, 20 TTFB and 8 browser samples per side: a
smoke run, not comparable with the full run. SIGTERM unwinds like an error: the server is
stopped, the scratch database dropped, the temp file removed.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_http  # noqa: E402
import gen_story  # noqa: E402
from bench_http import Server, server_log_summary  # noqa: E402
from common import (PostgresStores, SQLiteStores, emit, header, load_story, loadavg, log, machine_info,  # noqa: E402
                    percentiles, proc_status, run_worker, story_commands, story_options, story_sized)

PAGE_ROUTE = "/stories/{story}/packet"
JSON_ROUTE = "/v1/stories/{story}/packet"
GOAL = 2.0  # page / JSON, p50, TTFB and full load
CHROMIUM = "/usr/bin/chromium"
PERF_COUNTERS = ("TaskDuration", "ScriptDuration", "RecalcStyleDuration", "LayoutDuration")  # CDP Performance, s
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
NAV_JS = """() => {
  const n = performance.getEntriesByType('navigation')[0];
  const css = performance.getEntriesByType('resource').filter(r => r.name.endsWith('/static/viewer.css'))[0];
  return {nav: n ? n.toJSON() : null, css: css ? css.toJSON() : null,
          elements: document.getElementsByTagName('*').length};
}"""


def route_metrics(text: str) -> dict[str, dict[str, float]]:
    """The server's ``canon_http_request_seconds`` sum and count per route template (GET)."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        for kind in ("sum", "count"):
            prefix = f"canon_http_request_seconds_{kind}{{"
            if line.startswith(prefix) and 'method="GET"' in line:
                route = line.split('route="', 1)[1].split('"', 1)[0]
                slot = out.setdefault(route, {"sum": 0.0, "count": 0.0})
                slot[kind] += float(line.rsplit(" ", 1)[1])
    return out


def server_means(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Mean ms inside the app per route between two ``/metrics`` reads."""
    out = {}
    for name, route in (("page", PAGE_ROUTE), ("json", JSON_ROUTE)):
        a, b = after.get(route, {"sum": 0.0, "count": 0.0}), before.get(route, {"sum": 0.0, "count": 0.0})
        n = a["count"] - b["count"]
        out[name] = {"mean_ms": (a["sum"] - b["sum"]) / n * 1e3 if n else float("nan"), "requests": n}
    return out


def ratio(page: float, json_: float) -> float:
    return page / json_ if json_ else float("nan")


# -- 1. TTFB over httpx ---------------------------------------------------------------------------
def timed_get(client: Any, url: str, params: dict[str, Any]) -> dict[str, Any]:
    """One GET: seconds to the headers, to the first body chunk, to the last byte; status, bytes, ETag."""
    clock = time.perf_counter
    t0 = clock()
    with client.stream("GET", url, params=params) as r:
        t_headers = clock()
        body = bytearray()
        t_first = None
        for chunk in r.iter_raw():
            if t_first is None:
                t_first = clock()
            body += chunk
        t_end = clock()
    return {"headers": t_headers - t0, "first": (t_first or t_end) - t0, "full": t_end - t0, "status": r.status_code,
            "bytes": len(body), "etag": r.headers.get("etag"), "body": bytes(body)}


def check(side: str, got: dict[str, Any], packet_hash: str | None) -> None:
    if got["status"] != 200:
        raise RuntimeError(f"{side}: HTTP {got['status']}: {got['body'][:300]!r}")
    if packet_hash is not None and f"<code>{packet_hash}</code>".encode() not in got["body"] and \
            got["etag"] != f'"{packet_hash}"':
        raise RuntimeError(f"{side}: not the packet {packet_hash}")


def ttfb(server: Server, token: str, story: str, chapter: int, samples: int, warmup: int) -> dict[str, Any]:
    import httpx

    page_url, json_url = f"/stories/{story}/packet", f"/v1/stories/{story}/packet"
    params = {"role": "writer", "chapter": chapter}
    out: dict[str, Any] = {}
    with httpx.Client(base_url=server.base, timeout=60.0) as pc, \
            httpx.Client(base_url=server.base, timeout=60.0, headers={"Authorization": f"Bearer {token}"}) as jc:
        from canon_ledger.infrastructure.web.session import COOKIE

        login = pc.post("/login", data={"key": token, "next": "/"}, follow_redirects=False)
        if login.status_code != 303 or not pc.cookies.get(COOKIE):
            raise RuntimeError(f"POST /login: {login.status_code}, cookie {pc.cookies.get(COOKIE) is not None}")
        first_json = timed_get(jc, json_url, params)  # records the packet (the one write)
        check("json", first_json, None)
        packet_hash = first_json["etag"].strip('"')
        first_page = timed_get(pc, page_url, params)  # finds it recorded, as every later request does
        check("page", first_page, packet_hash)
        out["first_ms"] = {"json": first_json["full"] * 1e3, "page": first_page["full"] * 1e3}
        out["packet_hash"] = packet_hash
        out["bytes"] = {"json": first_json["bytes"], "page": first_page["bytes"]}
        for _ in range(warmup):
            check("page", timed_get(pc, page_url, params), packet_hash)
            check("json", timed_get(jc, json_url, params), packet_hash)
        before = route_metrics(jc.get("/metrics").text)
        got: dict[str, dict[str, list[float]]] = {s: {"headers": [], "first": [], "full": []} for s in ("page", "json")}
        for i in range(samples):
            for side, client, url in (("page", pc, page_url), ("json", jc, json_url)):
                r = timed_get(client, url, params)
                check(side, r, packet_hash)
                for k in ("headers", "first", "full"):
                    got[side][k].append(r[k])
        after = route_metrics(jc.get("/metrics").text)
    out["samples"] = samples
    out["sides"] = {side: {k: percentiles(v) for k, v in d.items()} for side, d in got.items()}
    out["server"] = server_means(before, after)
    out["ratio_p50"] = {k: ratio(out["sides"]["page"][k]["p50"], out["sides"]["json"][k]["p50"])
                        for k in ("headers", "first", "full")}
    out["ratio_p90"] = {k: ratio(out["sides"]["page"][k]["p90"], out["sides"]["json"][k]["p90"])
                        for k in ("headers", "first", "full")}
    out["raw_ms"] = {side: [round(x * 1e3, 3) for x in d["headers"]] for side, d in got.items()}
    return out


# -- 2. full load in chromium ---------------------------------------------------------------------
def browser(server: Server, token: str, story: str, chapter: int, samples: int, warmup: int,
            packet_hash: str) -> dict[str, Any]:
    import httpx
    from playwright.sync_api import sync_playwright

    base = server.base
    query = f"role=writer&chapter={chapter}"
    urls = {"page": f"{base}/stories/{story}/packet?{query}", "json": f"{base}/v1/stories/{story}/packet?{query}",
            "page_nocache": f"{base}/stories/{story}/packet?{query}"}
    clock = time.perf_counter
    out: dict[str, Any] = {}
    wall: dict[str, list[float]] = {s: [] for s in urls}
    nav: dict[str, dict[str, list[float]]] = {s: defaultdict(list) for s in urls}
    css: dict[str, list[dict[str, Any]]] = {s: [] for s in urls}
    perf: dict[str, dict[str, list[float]]] = {s: defaultdict(list) for s in urls}
    with sync_playwright() as p:
        t0 = clock()
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        out["launch_seconds"] = clock() - t0
        out["chromium"] = b.version
        try:
            tabs, sessions = {}, {}
            for side in urls:
                if side == "json":
                    context = b.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
                else:
                    from canon_ledger.infrastructure.web.session import COOKIE

                    login = httpx.post(f"{base}/login", data={"key": token, "next": "/"}, timeout=60.0)
                    context = b.new_context()  # a session of its own, as a person's login gives it
                    context.add_cookies([{"name": COOKIE, "value": login.cookies[COOKIE], "url": base}])
                tab = context.new_page()
                cdp = sessions[side] = context.new_cdp_session(tab)
                cdp.send("Performance.enable")  # the renderer's own counters: task, layout, style time
                if side != "page":  # the cache off: every load fetches everything
                    cdp.send("Network.enable")
                    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
                tabs[side] = tab

            def counters(side: str) -> dict[str, float]:
                return {m["name"]: m["value"] for m in sessions[side].send("Performance.getMetrics")["metrics"]}

            def load(side: str, keep: bool) -> None:
                tab = tabs[side]
                tab.goto("about:blank")
                was = counters(side)
                t = clock()
                response = tab.goto(urls[side], wait_until="load")
                dt = clock() - t
                if response is None or response.status != 200:
                    raise RuntimeError(f"browser {side}: {response and response.status} at {tab.url}")
                now = counters(side)
                seen = tab.evaluate(NAV_JS)
                if not keep:
                    return
                wall[side].append(dt)
                for k in PERF_COUNTERS:  # a new renderer process starts its counters at 0
                    d = now.get(k, 0.0) - was.get(k, 0.0)
                    perf[side][k].append(d if d >= 0 else now.get(k, 0.0))
                perf[side]["elements"].append(seen["elements"])
                n = seen["nav"]
                for k in ("responseStart", "responseEnd", "domContentLoadedEventEnd", "loadEventEnd"):
                    nav[side][k].append(n[k] / 1e3)
                nav[side]["requestStart"].append(n["requestStart"] / 1e3)
                nav[side]["transferSize"].append(n.get("transferSize", 0))
                if seen["css"] is not None:
                    c = seen["css"]
                    css[side].append({"transferSize": c.get("transferSize"), "duration": c.get("duration"),
                                      "responseStatus": c.get("responseStatus")})

            first = {}
            for side in urls:
                t = clock()
                load(side, False)
                first[side] = (clock() - t) * 1e3
            html = tabs["page"].content()
            if packet_hash not in html:
                raise RuntimeError("browser: the page does not show the packet's hash")
            if packet_hash not in httpx.get(urls["json"], headers={"Authorization": f"Bearer {token}"}).text:
                raise RuntimeError("JSON: not the packet")
            out["first_ms"] = first
            for _ in range(warmup):
                for side in urls:
                    load(side, False)
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as mc:
                before = route_metrics(mc.get("/metrics").text)
                for _ in range(samples):
                    for side in urls:
                        load(side, True)
                after = route_metrics(mc.get("/metrics").text)
            out["server"] = server_means(before, after)
            # the page loads twice per round (cached and uncached CSS): the means mix both
            out["server"]["page"]["note"] = "page and page_nocache together"
        finally:
            b.close()
    out["samples"] = samples
    out["sides"] = {}
    for side in urls:
        n = nav[side]
        sizes = Counter_of([c["transferSize"] for c in css[side]])
        out["sides"][side] = {
            "goto_load": percentiles(wall[side]),
            "response_start": percentiles(n["responseStart"]), "response_end": percentiles(n["responseEnd"]),
            "dom_content_loaded": percentiles(n["domContentLoadedEventEnd"]),
            "load_event_end": percentiles(n["loadEventEnd"]),
            "request_start": percentiles(n["requestStart"]),
            "transfer_bytes": statistics.median(n["transferSize"]) if n["transferSize"] else 0,
            "css_transfer_sizes": sizes,
            "css_duration_ms_p50": statistics.median([c["duration"] for c in css[side]]) if css[side] else None,
            "renderer": {k: percentiles(v) for k, v in perf[side].items() if k != "elements"},
            "elements": statistics.median(perf[side]["elements"]) if perf[side]["elements"] else 0,
        }
    s = out["sides"]
    out["ratio_p50"] = {k: ratio(s["page"][k]["p50"], s["json"][k]["p50"])
                        for k in ("goto_load", "response_start", "response_end", "dom_content_loaded", "load_event_end")}
    out["ratio_p50_nocache"] = {k: ratio(s["page_nocache"][k]["p50"], s["json"][k]["p50"])
                                for k in ("goto_load", "response_start", "response_end", "dom_content_loaded", "load_event_end")}
    out["raw_ms"] = {side: [round(x * 1e3, 2) for x in v] for side, v in wall.items()}
    return out


def Counter_of(values: list[Any]) -> dict[str, int]:  # noqa: N802 - a JSON-friendly Counter
    counts: dict[str, int] = {}
    for v in values:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return counts


# -- 3. where the page's time goes (in process) ------------------------------------------------
def profile(url: str, token: str, story: str, chapter: int, samples: int, warmup: int) -> dict[str, Any]:
    """The app in this process; the page's steps timed by wrapping them where the route finds
    them (module globals, the services object, classes), so nothing of the page is rebuilt here."""
    from fastapi.testclient import TestClient
    from jinja2 import Template

    import canon_ledger.infrastructure.web.pages as pages
    from canon_ledger.application.packets.packet import Packet
    from canon_ledger.infrastructure.http.app import create_app

    clock = time.perf_counter
    mode = ["warmup"]
    timings: dict[tuple[str, str], list[float]] = defaultdict(list)
    restore: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        restore.append((owner, name, original))

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = clock()
            try:
                return original(*args, **kwargs)
            finally:
                timings[(mode[0], label)].append(clock() - t)

        setattr(owner, name, timed)

    params = {"role": "writer", "chapter": chapter}
    page_h: dict[str, str] = {}  # the session cookie, once the app runs
    json_h = {"Authorization": f"Bearer {token}"}
    out: dict[str, Any] = {}

    def alternate(tc: Any, label: str, n: int, skip: int) -> dict[str, list[float]]:
        total: dict[str, list[float]] = {"page": [], "json": []}
        for i in range(skip + n):
            for side, path, headers in (("page", f"/stories/{story}/packet", page_h),
                                        ("json", f"/v1/stories/{story}/packet", json_h)):
                mode[0] = (label or side) if i >= skip else "warmup"
                t = clock()
                r = tc.get(path, params=params, headers=headers)
                dt = clock() - t
                if r.status_code != 200:
                    raise RuntimeError(f"profile {side} ({label or 'as served'}): HTTP {r.status_code}")
                if i >= skip:
                    total[side].append(dt)
        mode[0] = "untimed"
        return total

    t0 = clock()
    try:
        with TestClient(create_app(url, worker=False)) as tc:
            out["app_start_seconds"] = clock() - t0
            opened = tc.app.state.ctx.keys.open_session(token, 3600)
            if opened is None:
                raise RuntimeError("the benchmark's key opens no viewer session")
            page_h["Cookie"] = f"canon_session={opened[0]}"
            services = tc.app.state.ctx.services
            steps = ((pages, "_story", "pages._story (the story read)"),
                     (pages, "_packet", "pages._packet: packet + to_json + json.loads"),
                     (services, "packet", "services.packet (compile)"),
                     (Packet, "to_json", "Packet.to_json"),
                     (pages, "budget_bar", "budget_bar"), (pages, "by_tier", "by_tier"),
                     (pages, "render", "pages.render (template + HTMLResponse)"),
                     (Template, "render", "of which jinja2 Template.render"))
            out["step_order"] = [label for _, _, label in steps]
            for owner, name, label in steps:
                wrap(owner, name, label)
            total = alternate(tc, "", samples, warmup)
            out["story_statements"] = story_statements(tc, services, pages, story, params, page_h, samples)
            # a counterfactual: the page when its story read is free (``_story`` answered from a
            # dict kept from its first call); the page's code is otherwise unchanged
            real_story = pages._story
            kept: dict[Any, Any] = {}

            def kept_story(request: Any, principal: Any, story_id: str, **kwargs: Any) -> Any:
                key = (story_id, tuple(sorted(kwargs.items())))
                if key not in kept:
                    kept[key] = real_story(request, principal, story_id, **kwargs)
                return kept[key]

            pages._story = kept_story
            try:
                free = alternate(tc, "story_free", samples, warmup)
            finally:
                pages._story = real_story
            out["story_free"] = {side: percentiles(v) for side, v in free.items()}
            r = tc.get(f"/v1/stories/{story}/packet", params=params, headers=json_h)
            packet = r.json()
            out["items"] = len(packet["items"])
            out["items_with_text"] = sum(1 for it in packet["items"] if it.get("text"))
            out["items_by_status"] = Counter_of([it["status"] for it in packet["items"]])
            out["html_chars"] = len(tc.get(f"/stories/{story}/packet", params=params, headers=page_h).text)
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)
    out["samples"] = samples
    out["total"] = {side: percentiles(v) for side, v in total.items()}
    out["steps"] = {side: {label: percentiles(v) for (m, label), v in timings.items() if m == side}
                    for side in ("page", "json")}
    return out


def story_statements(tc: Any, services: Any, pages: Any, story: str, params: dict[str, Any],
                     page_h: dict[str, str], samples: int) -> dict[str, Any]:
    """The SQL statements ``pages._story`` runs in a page request (SQLAlchemy cursor events on the
    read engine, kept only while inside it). A statement's time runs from its execute to the next
    one's (to the end of ``_story`` for the last): its fetch and the rows' dicts included."""
    import re

    from sqlalchemy import event

    clock = time.perf_counter
    engine = services.canon.read_engine
    per: dict[str, list[float]] = defaultdict(list)
    marks: list[tuple[str, float]] = []
    inside = [False]
    real_story = pages._story

    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if inside[0]:
            marks.append((re.sub(r"\s+", " ", statement).strip()[:110], clock()))

    def traced(*args: Any, **kwargs: Any) -> Any:
        marks.clear()
        inside[0] = True
        try:
            return real_story(*args, **kwargs)
        finally:
            inside[0] = False
            end = clock()
            for (sql, at), (_, until) in zip(marks, [*marks[1:], ("", end)]):
                per[sql].append(until - at)

    event.listen(engine, "before_cursor_execute", before)
    pages._story = traced
    try:
        for _ in range(samples):
            if tc.get(f"/stories/{story}/packet", params=params, headers=page_h).status_code != 200:
                raise RuntimeError("profile: the page failed while tracing its story read")
    finally:
        pages._story = real_story
        event.remove(engine, "before_cursor_execute", before)
    return {k: percentiles(v) for k, v in sorted(per.items(), key=lambda kv: -sum(kv[1]))}


# -- the benchmark --------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    story, commands = story_commands(args)
    chapter = args.chapters
    store = SQLiteStores() if args.store == "sqlite" else PostgresStores(args.pg_url)
    info = machine_info(args.pg_url if args.store == "postgres" else None)
    logdir = tempfile.mkdtemp(prefix="bench_viewer_")
    result: dict[str, Any] = {"store": store.kind, "chapter": chapter}
    try:
        with store.fresh() as url:
            result["load"] = load_story(url, store.kind, commands, args.batch_size)
            del commands
            gc.collect()
            setup = run_worker({"kind": store.kind, "url": url}, "--catchup", bench_http.__file__)
            token = setup.pop("token")
            result["catch_up"] = setup
            server = Server(url, os.path.join(logdir, f"server_{store.kind}.log"))
            try:
                result["server_start_seconds"] = server.start()
                import httpx

                result["readyz"] = httpx.get(server.base + "/readyz", headers={"Authorization": f"Bearer {token}"},
                                             timeout=60).json()
                log(f"{store.kind}: server pid {server.pid} on port {server.port}; embedder "
                    f"{result['readyz'].get('embedder')}; RSS {proc_status(server.pid).get('VmRSS', 0):.0f} MB")
                result["loadavg_before_ttfb"] = loadavg()
                result["ttfb"] = ttfb(server, token, gen_story.STORY, chapter, args.samples, args.warmup)
                t = result["ttfb"]
                log(f"{store.kind}: TTFB p50 page {t['sides']['page']['headers']['p50']:.2f} ms, JSON "
                    f"{t['sides']['json']['headers']['p50']:.2f} ms ({t['ratio_p50']['headers']:.2f}x); full "
                    f"{t['ratio_p50']['full']:.2f}x; bytes {t['bytes']}")
                result["loadavg_before_browser"] = loadavg()
                result["browser"] = browser(server, token, gen_story.STORY, chapter, args.browser_samples,
                                            args.warmup, t["packet_hash"])
                br = result["browser"]
                log(f"{store.kind}: browser goto(load) p50 page {br['sides']['page']['goto_load']['p50']:.1f} ms, "
                    f"JSON {br['sides']['json']['goto_load']['p50']:.1f} ms ({br['ratio_p50']['goto_load']:.2f}x); "
                    f"page, cache off {br['sides']['page_nocache']['goto_load']['p50']:.1f} ms")
                result["loadavg_after_browser"] = loadavg()
                result["server_rss"] = proc_status(server.pid)
            finally:
                result["server_stop"] = server.stop()
                result["server_log"] = server_log_summary(server.log_path)
            if args.profile:
                result["profile"] = profile(url, token, gen_story.STORY, chapter, args.samples, args.warmup)
                pr = result["profile"]
                log(f"{store.kind}: in process, page {pr['total']['page']['p50']:.2f} ms, JSON "
                    f"{pr['total']['json']['p50']:.2f} ms; page with its story read free "
                    f"{pr['story_free']['page']['p50']:.2f} ms")
    finally:
        store.close()
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    info["server_logs"] = logdir
    t, br = result["ttfb"], result["browser"]
    verdicts = [
        {"goal": "TTFB p50, page / JSON (httpx)", "value": t["ratio_p50"]["headers"], "limit": GOAL,
         "pass": t["ratio_p50"]["headers"] <= GOAL},
        {"goal": "full load p50, page / JSON (chromium, page.goto load)", "value": br["ratio_p50"]["goto_load"],
         "limit": GOAL, "pass": br["ratio_p50"]["goto_load"] <= GOAL},
    ]
    return {"machine": info, "story": story, "args": vars(args), "result": result, "verdicts": verdicts}


# -- reporting ------------------------------------------------------------------------------------
def _pq(p: dict[str, float], digits: int = 2) -> str:
    return f"{p['p50']:.{digits}f} / {p['p90']:.{digits}f}"


def _x(page: float, json_: float) -> str:
    """A ratio, unless the JSON side is under a millisecond (then the two values say more)."""
    return f"{ratio(page, json_):.2f}x" if json_ >= 1.0 else "-"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m, s, r = report["machine"], report["story"], report["result"]
    t, br = r["ttfb"], r["browser"]
    kind = r["store"]
    out = [
        *header("bench_viewer.py", argv, m),
        f"- Load average {r['loadavg_before_ttfb']} before the TTFB part, {r['loadavg_before_browser']} before the "
        f"browser part, {r['loadavg_after_browser']} after it; chromium {br['chromium']}",
        f"- Story (seed {s['seed']}): {s['commands']:,} commands, {s['events']:,} events, {s['chapters']:,} chapters; "
        f"load {r['load']['seconds']:.0f} s, catch-up canon {r['catch_up']['canon_seconds']:.0f} s + retrieval "
        f"{r['catch_up']['retrieval_seconds']:.0f} s; server embedder {r['readyz'].get('embedder')}",
        f"- Writer packet at chapter {r['chapter']:,}, record=true: {t['bytes']['json']:,} bytes of JSON, "
        f"{t['bytes']['page']:,} bytes of HTML; first request JSON {t['first_ms']['json']:.1f} ms (records it), "
        f"then page {t['first_ms']['page']:.1f} ms",
        "",
        f"httpx, {t['samples']} samples per side alternated, ms p50 / p90:",
        "",
        "| Store | Measure | page | JSON | page / JSON p50 | page / JSON p90 |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for k, label in (("headers", "TTFB (headers)"), ("first", "first body chunk"), ("full", "last byte")):
        out.append(f"| {kind} | {label} | {_pq(t['sides']['page'][k])} | {_pq(t['sides']['json'][k])} "
                   f"| **{t['ratio_p50'][k]:.2f}x** | {t['ratio_p90'][k]:.2f}x |")
    sv = t["server"]
    out.append(f"| {kind} | inside the app (server /metrics, mean) | {sv['page']['mean_ms']:.2f} | "
               f"{sv['json']['mean_ms']:.2f} | {ratio(sv['page']['mean_ms'], sv['json']['mean_ms']):.2f}x (means) | |")
    bs = br["sides"]
    out += ["", f"chromium {br['chromium']} (Playwright), {br['samples']} samples per side alternated, ms p50 / p90:", "",
            "| Store | Measure | page (cache on) | page (cache off) | JSON (cache off) | page / JSON p50 | page (cache off) / JSON p50 |",
            "|---|---|--:|--:|--:|--:|--:|"]
    for k, label in (("goto_load", "page.goto(load), wall"), ("response_start", "navigation responseStart"),
                     ("response_end", "navigation responseEnd"),
                     ("dom_content_loaded", "navigation domContentLoadedEventEnd"),
                     ("load_event_end", "navigation loadEventEnd")):
        out.append(f"| {kind} | {label} | {_pq(bs['page'][k], 1)} | {_pq(bs['page_nocache'][k], 1)} "
                   f"| {_pq(bs['json'][k], 1)} | **{br['ratio_p50'][k]:.2f}x** | {br['ratio_p50_nocache'][k]:.2f}x |")
    for k in PERF_COUNTERS:
        out.append(f"| {kind} | renderer {k} (CDP) | {_pq(bs['page']['renderer'][k], 1)} "
                   f"| {_pq(bs['page_nocache']['renderer'][k], 1)} | {_pq(bs['json']['renderer'][k], 1)} "
                   f"| {_x(bs['page']['renderer'][k]['p50'], bs['json']['renderer'][k]['p50'])} "
                   f"| {_x(bs['page_nocache']['renderer'][k]['p50'], bs['json']['renderer'][k]['p50'])} |")
    out.append(f"| {kind} | elements in the document | {bs['page']['elements']:,.0f} | {bs['page_nocache']['elements']:,.0f} "
               f"| {bs['json']['elements']:,.0f} | | |")
    out.append(f"| {kind} | viewer.css transferSize (count) | {bs['page']['css_transfer_sizes']} "
               f"| {bs['page_nocache']['css_transfer_sizes']} | - | | |")
    pr = r.get("profile")
    if pr:
        out += ["", f"In process (TestClient, {pr['samples']} requests per side alternated), ms p50 / p90:", "",
                "| Step | page | JSON |", "|---|--:|--:|"]
        out.append(f"| whole request (TestClient) | {_pq(pr['total']['page'])} | {_pq(pr['total']['json'])} |")
        labels = list(dict.fromkeys([*pr.get("step_order", []), *pr["steps"]["page"], *pr["steps"]["json"]]))
        for label in labels:
            pg, js = pr["steps"]["page"].get(label), pr["steps"]["json"].get(label)
            if pg is None and js is None:
                continue
            out.append(f"| {label} | {_pq(pg) if pg else '-'} | {_pq(js) if js else '-'} |")
        sf = pr["story_free"]
        out.append(f"| whole request, `_story` answered from a dict (counterfactual) | {_pq(sf['page'])} "
                   f"| {_pq(sf['json'])} |")
        out += ["", "`pages._story` in a page request, by SQL statement (p50 / p90 ms; fetch included):", "",
                "| Statement | p50 / p90 |", "|---|--:|"]
        for sql, st in pr["story_statements"].items():
            out.append(f"| `{sql}` | {_pq(st)} |")
        out.append(f"\n{pr['items']} items ({pr['items_by_status']}), {pr['items_with_text']} with text; "
                   f"{pr['html_chars']:,} characters of HTML.")
    out += ["", "| Store | Goal | Measured | Limit | Verdict |", "|---|---|--:|--:|---|"]
    for v in report["verdicts"]:
        out.append(f"| {kind} | {v['goal']} | {v['value']:.2f}x | {v['limit']:g}x | {'met' if v['pass'] else '**missed**'} |")
    sl = r.get("server_log", {})
    if sl.get("tracebacks"):
        out += ["", f"The server log holds {sl['tracebacks']} traceback(s): {sl['final_exceptions']}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="200-chapter story at chapter 200, fewer samples")
    parser.add_argument("--samples", type=int, help="TTFB samples per side (default 100; 20 with --quick); also "
                                                    "the in-process profile's")
    parser.add_argument("--browser-samples", type=int, help="browser loads per side (default 40; 8 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per side (default 5; 3 with --quick)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the in-process split of the page's time")
    story_options(parser)
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (default: the JSON report)")
    parser.add_argument("--save-json", metavar="PATH", help="also write the JSON report to PATH")
    args = parser.parse_args(argv)
    q = args.quick
    args.samples = args.samples or (20 if q else 100)
    args.browser_samples = args.browser_samples or (8 if q else 40)
    args.warmup = args.warmup if args.warmup is not None else (3 if q else 5)
    story_sized(args)
    args.format = "markdown" if args.markdown else "json"
    if args.samples < 2 or args.browser_samples < 2:
        parser.error("at least 2 samples")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: server stopped, scratch database dropped
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
