#!/usr/bin/env python
"""Mention-activated recall: writer-packet latency with and without it, at chapter 1,000 with
10,000 entries carrying aliases (issue 23).

    python benchmarks/bench_recall.py [--store sqlite|postgres|both] [--quick] [--samples N]
                                      [--expect-hashes PATH] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. The story is ``benchmarks/gen_story.py``'s (seeded: 1,000 chapters,
10,000 confirmed entries) with two changes, so that recall has work to do: every entry carries
aliases (a character its surname, any other entry its name without "The"), and every scene
summary names two entries introduced by then (by name or alias, tagged or not). Prose words
match other entries' aliases by chance too, as in a real book. Per store (a temp SQLite file; a
scratch PostgreSQL database, dropped after) the story is loaded through the command path
(atomic batches of 100), the canon read model caught up, and then, in this one process:

1. per chapter (10, 100, 1,000), after a warm-up, N samples **alternated** of the same writer
   request compiled from one snapshot by compiler 4 (no mention recall, no always-on read),
   compiler 5 (compiler 4 with both) and the current compiler (5's recall, and what came later:
   the previous chapter's ending, L1 filling the room L0 left, the lore cap):
   ``compile_packet(snap, request, tokens, retriever, compiler=v)`` inside
   ``reader.snapshot(story)``, ``record=False``-like (nothing recorded). Ratios: p50(5) / p50(4)
   and p50(current) / p50(4), goal <= 1.1 at chapter 1,000. Every sample's packet hash must be
   the first one's (a kept search or read changes no byte), and, with ``--expect-hashes``, the
   hashes of a saved run (the code before a change: the same bytes);
2. the **matcher build**: the reader's cache of the story's automaton cleared before each of N/4
   compiler-5 packets at chapter 1,000 (as after a canon change): p50 of that packet, and of
   ``LoreIndex`` built alone from the rows (that packet's hash must be the warm one's);
3. **command-to-packet** after a canon change (a new confirmed entry: the matcher is built
   again) and after a chapter summary (canon unchanged: the matcher is reused), alternated,
   through ``packets.packet(request, after=position, record=False)``.

Reports how many items each compiler's chapter-1,000 packet holds by reason, so the work done
is visible next to its cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_story  # noqa: E402
from common import (add_common_options, bench_stores, chapters_measured, emit, header, load_story, log,  # noqa: E402
                    percentiles)

from canon_ledger.application.packets.compiler import COMPILER  # noqa: E402
from canon_ledger.application.packets.replay import compile_packet  # noqa: E402
from canon_ledger.application.packets.recipes import Request  # noqa: E402
from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

GOAL = 1.1  # p50(compiler 5) / p50(compiler 4), and p50(current) / p50(compiler 4), at chapter 1,000
VERSIONS = (4, 5, COMPILER)  # without mention recall, with it, the current compiler


def with_mentions(dicts: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The generated story with aliases on every entry and two entries named per scene summary."""
    rng = random.Random(seed)
    aliases: dict[str, list[str]] = {}
    introduced: list[tuple[int, str]] = []  # (valid_from, a name or alias), in log order
    for d in dicts:
        if d["type"] != "propose_canon":
            continue
        if d["key"] not in aliases:
            name = d["name"]
            own = name.split()[-1] if d["kind"] == "character" else name.removeprefix("The ")
            aliases[d["key"]] = list(dict.fromkeys([*d["aliases"], own]))
            introduced.append((d["valid_from"], rng.choice([name, *aliases[d["key"]]])))
        d["aliases"] = aliases[d["key"]]
    introduced.sort()
    for d in dicts:
        if d["type"] == "add_scene_card":
            known = [said for vf, said in introduced if vf <= d["chapter"]]
            if known:
                a, b = rng.choice(known), rng.choice(known)
                d["summary"] += f" They speak of {a} and of {b}."
    return dicts


def _compile(services: Any, request: Request, version: int, retriever: Any = "default") -> Any:
    packets = services.packets
    with packets.reader.snapshot(request.story_id) as snap:
        return compile_packet(snap, request, packets.tokens,
                              packets.retriever if retriever == "default" else retriever, compiler=version)


def _reasons(packet: Any) -> dict[str, int]:
    """Items by status and kind of read (mentions and L1 hits counted together)."""
    def label(reason: str) -> str:
        for short in ("mentioned", "tagged", "L1 retrieval", "development chain", "hidden until", "no space"):
            if reason.startswith(short) or short in reason:
                return short
        return reason
    return dict(Counter(f"{i.status}: {label(i.reason)}" for i in packet.items))


def measure(url: str, kind: str, story: str, chapters: list[int], samples: int, warmup: int) -> dict[str, Any]:
    from canon_ledger.projections.canon_view import LORE
    from canon_ledger.projections.lore_index import LoreIndex

    services = bootstrap(url, embedder="hashing")
    try:
        t0 = time.perf_counter()
        first = services.packets.packet(Request(story, "writer", chapters[-1]), record=False)
        catch_up = time.perf_counter() - t0
        log(f"{kind}: caught up and compiled the first packet in {catch_up:.1f} s")
        out: dict[str, Any] = {"catch_up_and_first_packet_s": round(catch_up, 2), "chapters": {}}
        for chapter in chapters:
            request = Request(story, "writer", chapter)
            row: dict[str, Any] = {}
            for mode, retriever in (("default", services.packets.retriever), ("l0", None)):
                hashes = {v: _compile(services, request, v, retriever).hash for v in VERSIONS}
                for _ in range(warmup):
                    for version in VERSIONS:
                        _compile(services, request, version, retriever)
                times: dict[int, list[float]] = {v: [] for v in VERSIONS}
                for i in range(samples):
                    for version in VERSIONS[i % 3:] + VERSIONS[:i % 3]:
                        t = time.perf_counter()
                        packet = _compile(services, request, version, retriever)
                        times[version].append(time.perf_counter() - t)
                        assert packet.hash == hashes[version], f"{kind} ch {chapter} {mode} v{version}: bytes moved"
                p4, p5, pc = (percentiles(times[v]) for v in VERSIONS)
                row[mode] = {"v4": p4, "v5": p5, "current": pc, "compiler": COMPILER,
                             "ratio_p50": p5["p50"] / p4["p50"], "ratio_current_p50": pc["p50"] / p4["p50"],
                             "hashes": {str(v): h for v, h in hashes.items()},
                             "items_v4": _reasons(_compile(services, request, 4, retriever)),
                             "items_v5": _reasons(_compile(services, request, 5, retriever))}
                log(f"{kind} ch {chapter} {mode}: p50 v4 {p4['p50']:.2f} ms, v5 {p5['p50']:.2f} ms, "
                    f"v{COMPILER} {pc['p50']:.2f} ms; ratios {row[mode]['ratio_p50']:.3f}, "
                    f"{row[mode]['ratio_current_p50']:.3f}")
            out["chapters"][chapter] = row

        last = Request(story, "writer", chapters[-1])
        reader = services.packets.reader
        cold, build = [], []
        warm = out["chapters"][chapters[-1]]["default"]["hashes"]["5"]
        for _ in range(max(4, samples // 4)):
            reader._lore.clear()  # as after a canon change: the next packet builds the matcher
            t = time.perf_counter()
            packet = _compile(services, last, 5)
            cold.append(time.perf_counter() - t)
            assert packet.hash == warm, f"{kind}: the packet with a fresh matcher is not the warm one"
            with reader.snapshot(story) as snap:
                rows = snap._rows(LORE, story=story)
                t = time.perf_counter()
                LoreIndex(rows)
                build.append(time.perf_counter() - t)
        out["cold_matcher_packet"] = percentiles(cold)
        out["matcher_build_alone"] = percentiles(build)
        out["lore_rows"] = len(rows)
        log(f"{kind}: packet with a fresh matcher p50 {out['cold_matcher_packet']['p50']:.1f} ms "
            f"(build alone {out['matcher_build_alone']['p50']:.1f} ms over {len(rows):,} steps)")

        c2p: dict[str, list[float]] = {"canon change": [], "summary": []}
        for i in range(max(4, samples // 4)):
            for what in (("canon change", "summary") if i % 2 == 0 else ("summary", "canon change")):
                n = uuid.uuid4().hex[:10]
                if what == "summary":
                    commands = [{"type": "record_chapter_summary", "command_id": f"b-{n}", "story_id": story,
                                 "chapter": chapters[-1] - 1, "text": f"Summary {n}."}]
                else:
                    commands = [{"type": "propose_canon", "command_id": f"b-{n}", "story_id": story,
                                 "proposal_id": f"bp-{n}", "kind": "world_rule", "key": f"bench-{n}",
                                 "name": f"Rule {n}", "aliases": [f"law {n}"], "text": f"Rule {n}.", "fields": {},
                                 "valid_from": 1},
                                {"type": "confirm_canon", "command_id": f"bc-{n}", "story_id": story,
                                 "proposal_id": f"bp-{n}"}]
                t = time.perf_counter()
                results = services.ledger.apply([parse_command(c) for c in commands], atomic=True)
                assert all(r.status == "applied" for r in results), results[0].as_dict()
                services.packets.packet(last, after=results[-1].position, record=False)
                c2p[what].append(time.perf_counter() - t)
        out["command_to_packet"] = {k: percentiles(v) for k, v in c2p.items()}
        out["command_to_packet_ratio_p50"] = (out["command_to_packet"]["canon change"]["p50"]
                                              / out["command_to_packet"]["summary"]["p50"])
        log(f"{kind}: command-to-packet p50 after a canon change "
            f"{out['command_to_packet']['canon change']['p50']:.1f} ms, after a summary "
            f"{out['command_to_packet']['summary']['p50']:.1f} ms")
        assert first.items
        return out
    finally:
        services.close()


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    dicts = with_mentions(gen_story.generate(seed=args.seed, chapters=args.chapters, entries=args.entries), args.seed)
    story = gen_story.totals(dicts)
    commands = [parse_command(d) for d in dicts]
    log(f"story: {story['commands']:,} commands, {story['chapters']:,} chapters, "
        f"{story['canon_entries']:,} canon entries, every one with aliases")
    chapters = chapters_measured(args.chapters)
    results = []
    with bench_stores(args, started) as (stores, skipped, info):
        for store in stores:
            with store.fresh() as url:
                loaded = load_story(url, store.kind, commands, 100)
                results.append({"store": store.kind, "load": loaded,
                                **measure(url, store.kind, gen_story.STORY, chapters, args.samples, args.warmup)})
    report = {"machine": info, "story": story, "chapters": chapters, "samples": args.samples, "goal": GOAL,
              "results": results, "skipped": skipped}
    if args.expect_hashes:
        report["same_hashes_as"] = same_hashes(report, args.expect_hashes)
    return report


def packet_hashes(report: dict[str, Any]) -> dict[str, str]:
    """Every packet hash of a report, by "store/chapter/packet/compiler"."""
    return {f"{r['store']}/{chapter}/{mode}/{v}": h for r in report["results"]
            for chapter, rows in r["chapters"].items() for mode, row in rows.items()
            for v, h in row.get("hashes", {}).items()}


def same_hashes(report: dict[str, Any], path: str) -> str:
    """Refuses a run whose packets are not the bytes of the saved run at ``path`` (its JSON
    report), compared where both compiled the packet; says how many were compared."""
    with open(path, encoding="utf-8") as f:
        expected = packet_hashes(json.load(f))
    got = packet_hashes(report)
    both = sorted(set(expected) & set(got))
    moved = [k for k in both if expected[k] != got[k]]
    assert both and not moved, f"packet bytes differ from {path}: {moved or 'no packet in common'}"
    log(f"the same packet bytes as {path}: {len(both)} packets")
    return f"{path}: {len(both)} packets, the same bytes"


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    out = [*header("bench_recall.py", argv, report["machine"]),
           f"- {report['samples']} samples per compiler, alternated; current compiler: {COMPILER}",
           *([f"- packet hashes checked against {report['same_hashes_as']}"] if "same_hashes_as" in report else []),
           "", "| store | chapter | packet | p50 v4 (ms) | p50 v5 (ms) | p50 current | v5 / v4 | current / v4 "
               "| p95 v4 | p95 v5 | p95 current |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["results"]:
        for chapter, rows in r["chapters"].items():
            for mode, row in rows.items():
                what = "default (L0 + L1)" if mode == "default" else "L0 alone"
                out.append(f"| {r['store']} | {chapter} | {what} | {row['v4']['p50']:.2f} | {row['v5']['p50']:.2f} | "
                           f"{row['current']['p50']:.2f} | **{row['ratio_p50']:.3f}** | "
                           f"**{row['ratio_current_p50']:.3f}** | {row['v4']['p95']:.2f} | {row['v5']['p95']:.2f} | "
                           f"{row['current']['p95']:.2f} |")
    out += ["", "| store | packet, fresh matcher p50 | matcher build alone p50 | steps | "
                "command-to-packet p50: canon change | : summary | ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in report["results"]:
        c2p = r["command_to_packet"]
        out.append(f"| {r['store']} | {r['cold_matcher_packet']['p50']:.1f} ms | {r['matcher_build_alone']['p50']:.1f} ms"
                   f" | {r['lore_rows']:,} | {c2p['canon change']['p50']:.1f} ms | {c2p['summary']['p50']:.1f} ms | "
                   f"{r['command_to_packet_ratio_p50']:.2f} |")
    for r in report["results"]:
        last = r["chapters"][max(r["chapters"])]["default"]
        out += ["", f"{r['store']}, chapter {max(r['chapters'])} items: v4 {last['items_v4']}; v5 {last['items_v5']}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200 chapters, 2,000 entries, 30 samples (smoke run)")
    parser.add_argument("--samples", type=int)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--expect-hashes", metavar="PATH",
                        help="a saved run's JSON (--save-json): every packet both compiled must be the same bytes")
    parser.add_argument("--seed", type=int, default=gen_story.DEFAULT_SEED)
    add_common_options(parser)
    args = parser.parse_args(argv)
    args.chapters = 200 if args.quick else gen_story.CHAPTERS
    args.entries = 2_000 if args.quick else gen_story.ENTRIES
    args.samples = args.samples or (30 if args.quick else 200)
    report = benchmark(args)
    emit(report, args, markdown(report, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
