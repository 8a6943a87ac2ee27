#!/usr/bin/env python
"""Point-of-view packets (issue 43): the writer packet of a scene with a ``pov`` at chapter
1,000 against the same scene without one, on a serial with 200 characters and 1,000 secrets.

    python benchmarks/bench_pov.py [--store sqlite|postgres|both] [--quick] [--samples N] [--warmup N]
                                   [--characters N] [--secrets N] [--tagged N] [--chapters N]
                                   [--entries N] [--seed N] [--batch-size N] [--pg-url URL]
                                   [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Goal (issue 43): POV packet p50 <= 1.1x the packet without POV.

**The serial.** ``gen_story``'s serial (seed 3, 1,000 chapters) sized so that it has
``--characters`` characters (default 200: 667 canon entries of the eight kinds; ``--entries``
sizes it directly), then, appended after its commands (all through the command path,
``common.load_story``):

* ``--secrets`` (default 1,000) **secret versions** (``fields.secret: true``, the entry's other
  fields kept, a text of what only some know): ``--tagged`` (default 12) characters of the
  chapter-1,000 scene and 2 of its items each get one in force at the last chapter; the rest
  go 80% to characters, 20% to items, factions and locations, each at a random chapter of its
  entry's time in canon (a later version of the entry may supersede it, as in a real serial);
* **knowledge records** (``record_knowledge``) for a part of them: the point-of-view character
  knows half of the tagged secrets (from a chapter between the secret's and the last), and 10%
  of the others; 30% of the other secrets are known to 1-2 random characters in canon then;
* two **scene cards** at the last chapter with the same summary and tags (the point-of-view
  character, the tagged characters and items, a location): ``pov`` with ``pov`` set (a main-cast
  character), ``plain`` without.

**Per store** (a temp SQLite file; a scratch PostgreSQL database ``canon_bench_<hex>``): load;
then fresh worker processes (``common.run_worker``) against the loaded store:

1. ``prepare``: ``bootstrap``, the canon read model caught up over the whole log (timed); on
   PostgreSQL a database-wide ``VACUUM ANALYZE`` (the local server runs with autovacuum off; as
   ``bench_packets.py`` does);
2. ``first`` twice, each a fresh interpreter: ``bootstrap``, then the first writer packet of
   the process (POV first in one, without POV first in the other), then the other one: what a
   process's first request costs (the read models are caught up already);
3. ``measure``: ``--warmup`` calls of each, then ``--samples`` pairs, the two requests
   alternated (POV then plain, plain then POV, ...), ``record=False``, each request the same
   every time (a repeated request); p50 each and their ratio; the packets checked once (the POV
   packet labels every tagged secret the POV does not know and says since when of each it
   knows, at compiler 8; the plain packet carries no label, at compiler 7) and their audit; the
   snapshot reads each packet makes (calls of ``SqlCanonSnapshot`` methods), to say where any
   difference goes.

L0 only (``packets.retriever`` off), as the issue-3 targets of ``bench_packets.py``: L1
retrieval does not read secrets and would only add its own noise.

``--quick``: 200 chapters, 60 characters, 200 secrets, 6 tagged, 30 samples: a smoke run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (add_output_options, add_pg_option, bench_stores, emit, header, load_story, log,  # noqa: E402
                    percentiles, rss_mb, run_worker)

GOAL = 1.1  # POV packet p50 / plain packet p50
STORY = gen_story.STORY
POV_SCENE, PLAIN_SCENE = "pov", "plain"

SECRET_FACTS = (
    "is paid by the Duke of Essery to report every sailing from the harbour",
    "poisoned the old harbourmaster with foxglove from the chapel garden",
    "is the lost heir of House Varen, smuggled out of the burning palace as an infant",
    "survived the wreck of the Marigold and lives under another name at the abbey",
    "set the warehouse fire to destroy the missing tax ledgers",
    "married the magistrate in secret at Saint Brannoc's chapel",
    "carries the grey fever and shows no sign of it yet",
    "killed Captain Dorne on the night of the flood and sank the body in the lock",
    "forged the guild's seal on the ferry charter",
    "owes the smugglers of Corve a debt that will cost a life",
)
THING_FACTS = (
    "is a forgery; the true one was melted down during the siege of Corve",
    "hides a tunnel to the old mint, where the stolen bullion lies buried",
    "is paid by the Duke of Essery, who wants the river tolls for himself",
    "holds the cipher key the wardens have hunted for a decade",
)
HOW = ("told by a friend", "overheard at the inn", "deduced from the ledgers", "read in a stolen letter",
       "confessed to", "saw it happen")


# -- the serial ------------------------------------------------------------------------------------
class Canon:
    """What ``gen_story``'s commands confirm: per entry its kind, name, versions' chapters, fields
    and retirement chapter."""

    def __init__(self, dicts: list[dict[str, Any]]) -> None:
        proposals: dict[str, dict[str, Any]] = {}
        self.kind: dict[str, str] = {}
        self.name: dict[str, str] = {}
        self.aliases: dict[str, list[str]] = {}
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.fields: dict[str, dict[str, Any]] = {}
        self.retired: dict[str, int] = {}
        self.order: list[str] = []  # keys in introduction order
        for d in dicts:
            if d["type"] == "propose_canon":
                proposals[d["proposal_id"]] = d
            elif d["type"] == "confirm_canon":
                p = proposals[d["proposal_id"]]
                key = p["key"]
                if key not in self.kind:
                    self.kind[key], self.name[key], self.aliases[key] = p["kind"], p["name"], p["aliases"]
                    self.first[key] = p["valid_from"]
                    self.order.append(key)
                self.last[key] = max(self.last.get(key, 0), p["valid_from"])
                self.fields[key] = dict(p["fields"])
            elif d["type"] == "retire_canon":
                self.retired[d["key"]] = d["valid_from"]

    def keys(self, kind: str) -> list[str]:
        return [k for k in self.order if self.kind[k] == kind]

    def span(self, key: str, chapters: int) -> tuple[int, int]:
        """[first, end): the chapters the entry is in canon (end: its retirement, or after the last)."""
        return self.first[key], self.retired.get(key, chapters + 1)

    def alive(self, key: str, chapter: int, chapters: int) -> bool:
        a, b = self.span(key, chapters)
        return a <= chapter < b


def sized(args: argparse.Namespace) -> None:
    args.chapters = args.chapters or (200 if args.quick else gen_story.CHAPTERS)
    args.characters = args.characters or (60 if args.quick else 200)
    args.secrets = args.secrets or (200 if args.quick else 1000)
    args.tagged = args.tagged or (6 if args.quick else 12)
    args.samples = args.samples or (30 if args.quick else 200)
    share = gen_story.KIND_PLAN["character"][0] / gen_story.ENTRIES
    args.entries = args.entries or round(args.characters / share)


def build(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The serial's commands and what the benchmark added (the point of view, the tagged keys,
    counts)."""
    rng = random.Random(args.seed * 7919 + 43)
    C = args.chapters
    dicts = gen_story.generate(seed=args.seed, chapters=C, entries=args.entries)
    canon = Canon(dicts)
    chars = canon.keys("character")
    out: list[dict[str, Any]] = []
    n = [0]

    def add(command_type: str, **fields: Any) -> None:
        n[0] += 1
        out.append({"type": command_type, "command_id": f"pov-{n[0]:06d}", "story_id": STORY, **fields})

    secrets: list[tuple[str, int]] = []  # (key, valid_from)

    def secret(key: str, vf: int) -> None:
        kind, name = canon.kind[key], canon.name[key]
        fact = rng.choice(SECRET_FACTS if kind == "character" else THING_FACTS)
        fields = {k: v for k, v in canon.fields[key].items() if k != "hidden_until"}
        fields["secret"] = True
        pid = f"pov-secret-{len(secrets) + 1:05d}"
        add("propose_canon", proposal_id=pid, kind=kind, key=key, name=name, aliases=canon.aliases[key],
            text=f"Secret: {name} {fact}. " + gen_story.prose(rng.randint(12, 30), seed=rng.randrange(1 << 30)),
            fields=fields, valid_from=vf, tags=["secret"])
        add("confirm_canon", proposal_id=pid)
        secrets.append((key, vf))

    # The point of view: the first main-cast character in canon at the last chapter.
    pov = next(k for k in chars[:gen_story.MAIN_CAST] if canon.alive(k, C, C))
    live = [k for k in chars if k != pov and canon.alive(k, C, C)]
    tagged = rng.sample(live, min(args.tagged, len(live)))
    items = [k for k in canon.keys("item") if canon.alive(k, C, C)][:2]
    for key in tagged + items:  # in force at the last chapter: the latest version of the entry
        secret(key, max(canon.last[key], C - rng.randint(0, 60)))
    known_tagged = set(tagged[: len(tagged) // 2])
    others = [k for k in canon.order if canon.kind[k] in ("character", "item", "faction", "location")]
    weights = [0.8 / max(1, len(chars)) if canon.kind[k] == "character" else 0.2 / max(1, len(others) - len(chars))
               for k in others]
    while len(secrets) < args.secrets:
        key = rng.choices(others, weights)[0]
        a, b = canon.span(key, C)
        if a >= b:
            continue
        secret(key, rng.randint(a, min(b, C + 1) - 1))
    # Knowledge: who knows what, from when.
    known: set[tuple[str, str]] = set()

    def knows(character: str, key: str, lo: int, hi: int) -> bool:
        ca, cb = canon.span(character, C)
        ea, eb = canon.span(key, C)
        lo, hi = max(lo, ca, ea), min(hi, cb - 1, eb - 1)
        if lo > hi or (character, key) in known or character == key:
            return False
        known.add((character, key))
        add("record_knowledge", character=character, kind=canon.kind[key], key=key, chapter=rng.randint(lo, hi),
            how=rng.choice(HOW))
        return True

    for key in tagged:
        if key in known_tagged:
            vf = next(v for k, v in secrets if k == key and v >= canon.last[key])
            assert knows(pov, key, vf, C), key
    for key, vf in secrets[len(tagged) + len(items):]:
        if key in tagged or key in items:
            continue
        if rng.random() < 0.10:
            knows(pov, key, vf, C)
        if rng.random() < 0.30:
            for who in rng.sample(chars, 2)[: rng.randint(1, 2)]:
                knows(who, key, vf, C)
    location = next(k for k in canon.keys("location") if canon.alive(k, C, C))
    names = ", ".join(canon.name[k] for k in [pov, *tagged[:3]])
    summary = (f"{names} meet at {canon.name[location]} at night; each keeps what they know to themselves. "
               + gen_story.prose(20, seed=43))
    for scene, p in ((POV_SCENE, pov), (PLAIN_SCENE, None)):
        card = {"chapter": C, "scene_id": scene, "summary": summary, "characters": [pov, *tagged],
                "locations": [location], "threads": [], "callbacks": [], "items": items}
        add("add_scene_card", **card, **({"pov": p} if p else {}))
    added = {"pov": pov, "pov_name": canon.name[pov], "tagged": tagged, "items": items,
             "tagged_known_to_pov": sorted(known_tagged), "tagged_unknown_to_pov": sorted(set(tagged) - known_tagged),
             "secrets": len(secrets), "secret_entries": len({k for k, _ in secrets}),
             "secrets_by_kind": dict(Counter(canon.kind[k] for k, _ in secrets)),
             "knowledge_records": len(known), "pov_knows": sum(1 for c, _ in known if c == pov),
             "characters": len(chars), "location": location}
    return dicts + out, added


# -- the workers (fresh processes against the loaded store) -------------------------------------------
def _services(url: str) -> Any:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    services = bootstrap(url, embedder="hashing")
    services.packets.retriever = None  # L0 only
    return services


def _requests(chapter: int) -> dict[str, Any]:
    from canon_ledger.application.packets.recipes import Request

    return {"pov": Request(STORY, "writer", chapter, scene=POV_SCENE),
            "plain": Request(STORY, "writer", chapter, scene=PLAIN_SCENE)}


def serving_build(services: Any) -> Any:
    canon = services.canon
    return canon.runner(canon.active()) if hasattr(canon, "active") else canon


def prepare(cfg: dict[str, Any]) -> dict[str, Any]:
    services = _services(cfg["url"])
    try:
        runner = serving_build(services)
        goal = services.ledger.event_log.position()
        t0 = time.perf_counter()
        runner.catch_up(goal)
        out: dict[str, Any] = {"log_events": goal, "catch_up_s": time.perf_counter() - t0}
        if cfg["kind"] == "postgres":
            import psycopg

            from common import conninfo

            with psycopg.connect(conninfo(cfg["url"]), autocommit=True) as conn:
                out["autovacuum"] = conn.execute("SELECT setting FROM pg_settings WHERE name = 'autovacuum'"
                                                 ).fetchone()[0]  # type: ignore[index]
                t0 = time.perf_counter()
                conn.execute("VACUUM ANALYZE")
                out["vacuum_analyze_s"] = time.perf_counter() - t0
        return out
    finally:
        services.close()


def first(cfg: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    services = _services(cfg["url"])
    booted = time.perf_counter() - t0
    try:
        reqs = _requests(cfg["chapter"])
        out: dict[str, Any] = {"order": cfg["order"], "bootstrap_s": booted}
        for name in cfg["order"]:
            t = time.perf_counter()
            services.packets.packet(reqs[name], record=False)
            out[f"{name}_ms"] = (time.perf_counter() - t) * 1e3
        for name in cfg["order"]:  # the second request of each, for scale
            t = time.perf_counter()
            services.packets.packet(reqs[name], record=False)
            out[f"{name}_second_ms"] = (time.perf_counter() - t) * 1e3
        return out
    finally:
        services.close()


class Calls:
    """Counts the snapshot reads (``SqlCanonSnapshot`` methods) and their time, per label."""

    METHODS = ("prefetch", "story", "chapter", "scenes", "entries_by_key", "active_entries", "entries_since",
               "entries_page", "superseded_steps", "chapter_summaries", "volume_summaries", "chain_nodes", "texts",
               "knowledge", "lore")

    def __init__(self) -> None:
        from canon_ledger.application.packets import recipes
        from canon_ledger.projections import canon_view

        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.undo: list[tuple[Any, str, Any]] = []
        for name in self.METHODS:
            if name in vars(canon_view.SqlCanonSnapshot):
                self._wrap(canon_view.SqlCanonSnapshot, name, name)
        # The point-of-view rule itself (its reads above are counted inside it too).
        for name in ("_secrets", "point_of_view", "known"):
            if name in vars(recipes.Reading):
                self._wrap(recipes.Reading, name, f"Reading.{name} (POV rule)")
        from canon_ledger.infrastructure.tokenizer import TiktokenCounter

        self._wrap(TiktokenCounter, "count", "tokens.count (tiktoken, whole packet)")

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        inner = vars(owner)[name]
        calls, seconds, clock = self.calls, self.seconds, time.perf_counter

        def timed(*a: Any, **k: Any) -> Any:
            t = clock()
            try:
                return inner(*a, **k)
            finally:
                seconds[label] += clock() - t
                calls[label] += 1

        self.undo.append((owner, name, inner))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, inner in reversed(self.undo):
            setattr(owner, name, inner)


def _summary(packet: Any, added: dict[str, Any]) -> dict[str, Any]:
    kept = [i for i in packet.items if i.status != "dropped"]
    secrets = [i for i in packet.items if "secret" in i.reason]
    return {"compiler": packet.compiler, "items": len(packet.items), "kept": len(kept),
            "used_tokens": packet.used_tokens, "budget": packet.budget,
            "labelled_unknown": sum(1 for i in kept if i.text.startswith("SECRET: the reader knows")),
            "said_known_since": sum(1 for i in kept if "known to " in i.reason and " since chapter " in i.reason),
            "secret_items": len(secrets),
            "tiers": dict(Counter(i.tier for i in kept))}


def check_packets(pov: Any, plain: Any, added: dict[str, Any]) -> list[str]:
    """What the two packets must show; the problems found (empty: fine)."""
    problems = []
    name = added["pov_name"]
    label = f"SECRET: the reader knows; {name} does not, as of chapter "
    by_key = {(i.kind, i.key, i.tier): i for i in pov.items if i.tier == "P1"}
    for key in added["tagged_unknown_to_pov"]:
        item = by_key.get(("character", key, "P1"))
        if item is None or item.status == "dropped":
            problems.append(f"tagged {key} not kept in the POV packet")
        elif not item.text.startswith(label):
            problems.append(f"tagged {key} (unknown to the POV) is not labelled: {item.text[:80]!r}")
    for key in added["tagged_known_to_pov"]:
        item = by_key.get(("character", key, "P1"))
        if item is None or item.status == "dropped":
            problems.append(f"tagged {key} not kept in the POV packet")
        elif item.text.startswith("SECRET") or f"known to {name} since chapter" not in item.reason:
            problems.append(f"tagged {key} (known to the POV) not said known: {item.reason!r}")
    if pov.compiler != 8:
        problems.append(f"POV packet compiler {pov.compiler}, not 8")
    if plain.compiler != 7:
        problems.append(f"plain packet compiler {plain.compiler}, not 7")
    if any(i.text.startswith("SECRET") or "secret:" in i.reason for i in plain.items):
        problems.append("the packet without POV carries a secret label")
    return problems


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    services = _services(cfg["url"])
    try:
        reqs = _requests(cfg["chapter"])
        packets = services.packets
        added = cfg["added"]
        pov_packet = packets.packet(reqs["pov"], record=False)
        plain_packet = packets.packet(reqs["plain"], record=False)
        out: dict[str, Any] = {"problems": check_packets(pov_packet, plain_packet, added),
                               "pov_packet": _summary(pov_packet, added), "plain_packet": _summary(plain_packet, added)}
        for _ in range(cfg["warmup"]):
            packets.packet(reqs["pov"], record=False)
            packets.packet(reqs["plain"], record=False)
        times: dict[str, list[float]] = {"pov": [], "plain": []}
        clock = time.perf_counter
        for i in range(cfg["samples"]):
            for name in (("pov", "plain") if i % 2 == 0 else ("plain", "pov")):
                t = clock()
                p = packets.packet(reqs[name], record=False)
                times[name].append(clock() - t)
                assert p.hash == (pov_packet if name == "pov" else plain_packet).hash
        out["pov"], out["plain"] = percentiles(times["pov"]), percentiles(times["plain"])
        out["ratio_p50"] = out["pov"]["p50"] / out["plain"]["p50"]
        # Paired: each sample pair's own ratio, then their median (less sensitive to drift).
        out["ratio_paired_median"] = sorted(a / b for a, b in zip(times["pov"], times["plain"]))[cfg["samples"] // 2]
        # Where a difference goes: the snapshot reads of one packet of each.
        reads = {}
        for name in ("pov", "plain"):
            calls = Calls()
            n = 20
            t0 = time.perf_counter()
            try:
                for _ in range(n):
                    packets.packet(reqs[name], record=False)
            finally:
                calls.restore()
            reads[name] = {k: {"calls": calls.calls[k] / n, "ms": calls.seconds[k] / n * 1e3}
                           for k in sorted(calls.calls)}
            reads[name]["whole packet (instrumented)"] = {"calls": 1, "ms": (time.perf_counter() - t0) / n * 1e3}
        out["reads"] = reads
        # The recorded packets audit (record=True once each).
        audits = {}
        for name in ("pov", "plain"):
            recorded = packets.packet(reqs[name], record=True)
            audits[name] = services.auditor.audit(recorded.packet_id).ok
        out["audit_ok"] = audits
        out["rss_mb"] = rss_mb()
        return out
    finally:
        services.close()


WORKERS = {"prepare": prepare, "first": first, "measure": measure}


# -- the benchmark ---------------------------------------------------------------------------------
def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from canon_ledger.domain.commands import parse_command

    started = time.perf_counter()
    t0 = time.perf_counter()
    dicts, added = build(args)
    story = gen_story.totals([d for d in dicts if d["type"] in gen_story.EVENTS_PER_COMMAND])
    story["commands"] = len(dicts)
    story["record_knowledge"] = sum(1 for d in dicts if d["type"] == "record_knowledge")
    commands = [parse_command(d) for d in dicts]
    log(f"story: {len(commands):,} commands ({added['characters']} characters, {added['secrets']:,} secrets on "
        f"{added['secret_entries']} entries, {added['knowledge_records']} knowledge records) built in "
        f"{time.perf_counter() - t0:.1f} s")
    results = []
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                loaded = load_story(url, store.kind, commands, args.batch_size)
                cfg = {"kind": store.kind, "url": url, "chapter": args.chapters, "samples": args.samples,
                       "warmup": args.warmup, "added": added}
                r: dict[str, Any] = {"store": store.kind, "load_s": loaded["seconds"], "events": loaded["events"]}
                r["prepare"] = run_worker(cfg, "prepare", __file__)
                log(f"{store.kind}: caught up in {r['prepare']['catch_up_s']:.1f} s")
                r["first"] = [run_worker({**cfg, "order": order}, "first", __file__)
                              for order in (["pov", "plain"], ["plain", "pov"])]
                log(f"{store.kind}: first request: " + "; ".join(
                    f"{f['order'][0]} first {f[f['order'][0] + '_ms']:.0f} ms, then {f['order'][1]} "
                    f"{f[f['order'][1] + '_ms']:.1f} ms" for f in r["first"]))
                r["measure"] = run_worker(cfg, "measure", __file__)
                m = r["measure"]
                log(f"{store.kind}: p50 POV {m['pov']['p50']:.2f} ms, without {m['plain']['p50']:.2f} ms: "
                    f"{m['ratio_p50']:.3f}x (paired {m['ratio_paired_median']:.3f}x); "
                    f"problems: {m['problems'] or 'none'}")
                results.append(r)
    return {"machine": info, "story": story, "added": added, "chapters": args.chapters, "samples": args.samples,
            "warmup": args.warmup, "goal": GOAL, "results": results, "skipped": skipped}


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    a, s = report["added"], report["story"]
    kinds = ", ".join(f"{k} {n:,}" for k, n in s["canon_entries_by_kind"].items())
    out = header("bench_pov.py", argv, report["machine"])
    out += [f"- Serial: {s['commands']:,} commands, {report['chapters']:,} chapters, {s['canon_entries']:,} canon "
            f"entries ({kinds}); {a['secrets']:,} secret versions on {a['secret_entries']} entries "
            f"({', '.join(f'{k} {v}' for k, v in a['secrets_by_kind'].items())}); {a['knowledge_records']} knowledge "
            f"records ({a['pov_knows']} of them the POV's).",
            f"- Scene `{POV_SCENE}` at chapter {report['chapters']:,}: pov `{a['pov']}` ({a['pov_name']}), "
            f"{len(a['tagged'])} tagged characters with a secret in force ({len(a['tagged_known_to_pov'])} known to "
            f"the POV, {len(a['tagged_unknown_to_pov'])} not), {len(a['items'])} items with one; scene "
            f"`{PLAIN_SCENE}`: the same card without pov.",
            f"- {report['samples']} samples of each after {report['warmup']} warmup, alternated; L0 (no retrieval); "
            "ms.", ""]
    out += ["| Store | POV p50 | plain p50 | ratio p50 | paired ratio | POV p90 | plain p90 | first request: POV / "
            "plain (fresh process) | goal <= 1.1x |", "|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in report["results"]:
        m = r["measure"]
        f = {x["order"][0]: x for x in r["first"]}
        first_pov, first_plain = f["pov"]["pov_ms"], f["plain"]["plain_ms"]
        out.append(f"| {r['store']} | {m['pov']['p50']:.2f} | {m['plain']['p50']:.2f} | {m['ratio_p50']:.3f}x | "
                   f"{m['ratio_paired_median']:.3f}x | {m['pov']['p90']:.2f} | {m['plain']['p90']:.2f} | "
                   f"{first_pov:.0f} / {first_plain:.0f} | {'met' if m['ratio_p50'] <= GOAL else 'missed'} |")
    for r in report["results"]:
        m = r["measure"]
        pp, pl = m["pov_packet"], m["plain_packet"]
        out += ["", f"{r['store']}: load {r['load_s']:.0f} s ({r['events']:,} events), catch-up "
                    f"{r['prepare']['catch_up_s']:.1f} s. POV packet: compiler {pp['compiler']}, {pp['kept']} of "
                    f"{pp['items']} items kept, {pp['used_tokens']:,}/{pp['budget']:,} tokens, "
                    f"{pp['labelled_unknown']} secrets labelled unknown, {pp['said_known_since']} said known since; "
                    f"plain: compiler {pl['compiler']}, {pl['kept']} of {pl['items']} kept, "
                    f"{pl['used_tokens']:,} tokens. "
                    f"Problems: {'; '.join(m['problems']) or 'none'}. Audit: {m['audit_ok']}.",
                "", "First requests (fresh process, read models caught up): " + "; ".join(
                    f"{x['order'][0]} first {x[x['order'][0] + '_ms']:.1f} ms then {x['order'][1]} "
                    f"{x[x['order'][1] + '_ms']:.1f} ms (second requests {x[x['order'][0] + '_second_ms']:.1f} / "
                    f"{x[x['order'][1] + '_second_ms']:.1f} ms; bootstrap {x['bootstrap_s']:.2f} s)"
                    for x in r["first"]),
                "", "| call (per packet, instrumented run) | POV calls | POV ms | plain calls | plain ms |",
                "|---|--:|--:|--:|--:|"]
        for k in sorted(set(m["reads"]["pov"]) | set(m["reads"]["plain"])):
            a_, b_ = m["reads"]["pov"].get(k, {"calls": 0, "ms": 0}), m["reads"]["plain"].get(k, {"calls": 0, "ms": 0})
            out.append(f"| {k} | {a_['calls']:.0f} | {a_['ms']:.2f} | {b_['calls']:.0f} | {b_['ms']:.2f} |")
    for kind, why in report["skipped"].items():
        out += ["", f"Skipped {kind}: {why}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in WORKERS:
        print(json.dumps(WORKERS[argv[0]](json.loads(argv[1])), default=str))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 200 chapters, 60 characters, 200 secrets, 6 tagged, 30 samples")
    parser.add_argument("--samples", type=int, help="samples of each packet (default 200; 30 with --quick)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--chapters", type=int, help="chapters (default 1,000; 200 with --quick)")
    parser.add_argument("--characters", type=int, help="characters in the serial (default 200; 60 with --quick)")
    parser.add_argument("--entries", type=int, help="canon entries of the serial (default: what --characters needs)")
    parser.add_argument("--secrets", type=int, help="secret versions (default 1,000; 200 with --quick)")
    parser.add_argument("--tagged", type=int, help="characters with a secret the POV scene tags (default 12)")
    parser.add_argument("--seed", type=int, default=gen_story.DEFAULT_SEED)
    parser.add_argument("--batch-size", type=int, default=100, help="commands per atomic batch when loading")
    add_pg_option(parser)
    add_output_options(parser)
    args = parser.parse_args(argv)
    sized(args)
    if args.samples < 30:
        parser.error("--samples must be at least 30")
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
