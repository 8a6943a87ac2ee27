#!/usr/bin/env python
"""The read path, old code against new: the chapter-1,000 writer packet (L0) and
command-to-packet, alternated in one session.

    python benchmarks/bench_read_path.py [--old REF] [--old-dir DIR] [--store sqlite|postgres|both]
                                         [--rounds 4] [--samples 100] [--quick] [--format markdown|json]

Not part of the pytest run. The old code is ``REF`` (default ``b844b3c``, the last commit before
the read-path redesign) checked out in a git worktree at ``DIR`` (default /tmp/read-path-old;
made if missing, removed after unless it was there before) and run by the same interpreter
with that folder first on PYTHONPATH. The new code is this checkout.

Per store: the generated serial (``gen_story``: 1,000 chapters, 10,000 confirmed entries) is
loaded once through the command path into a template (a SQLite file; a PostgreSQL database),
and each code gets its own copy (the file copied; ``CREATE DATABASE .. TEMPLATE``), so each
builds its own read models. One long-lived process per code bootstraps its copy, catches canon
up and then, each round, takes ``--samples`` writer packets at the last chapter
(``packets.packet(Request(story, "writer", last), record=False)``, L1 off as in
``bench_packets.py``: L0 fills the budget there) and ``--samples`` / 2 commands-to-packet (one
``record_chapter_summary`` of the chapter before, then that packet with ``after``, which must
carry the new summary). The rounds run ABBA (old, new, new, old, ...), so a machine's drift
falls on both. Reported: each round's p50, the median of those per code, new / old, and the
median of each round's new / old (the two measured back to back, so the drift cancels); the
goal is within 5%. On PostgreSQL each copy gets one ``VACUUM ANALYZE`` after its catch-up. Every packet's hash must be the same from both codes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (add_output_options, conninfo, emit, header, load_story, log, machine_info,  # noqa: E402
                    old_worktree, percentiles, scratch, story_commands, story_options, story_sized)

ROOT = Path(__file__).resolve().parents[1]
OLD = "b844b3c"

# The process each code runs: JSON lines in (commands), JSON lines out (answers).
SIDE = r'''
import json, sys, time, uuid
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
try:
    from canon_ledger.infrastructure.bootstrap import bootstrap
except ImportError:  # before the read-path redesign the composition root was in services.py
    from canon_ledger.infrastructure.services import bootstrap

cfg = json.loads(sys.argv[1])
services = bootstrap(cfg["url"])
packets = services.packets
packets.retriever = None  # L0 alone, as bench_packets.py measures the packet
t0 = time.perf_counter()
catch_up = getattr(services.canon, "catch_up_serving", None) or services.canon.catch_up  # renamed since
catch_up(services.ledger.event_log.position())
story, last = cfg["story"], cfg["last"]
request = Request(story, "writer", last)
for _ in range(cfg["warmup"]):
    packets.packet(request, record=False)
print(json.dumps({"catch_up_s": time.perf_counter() - t0, "hash": packets.packet(request, record=False).hash}),
      flush=True)
body = " ".join(["the river", "rose", "and the ferry", "waited"] * 15)
for line in sys.stdin:
    ask = json.loads(line)
    if ask["do"] == "stop":
        break
    times = []
    for _ in range(ask["samples"]):
        t = time.perf_counter()
        packets.packet(request, record=False)
        times.append(time.perf_counter() - t)
    c2p, failures = [], 0
    for i in range(ask["c2p"]):
        marker = f"C2P-{uuid.uuid4().hex[:12]}"
        cmd = {"type": "record_chapter_summary", "command_id": marker, "story_id": story, "chapter": last - 1,
               "text": f"{marker} {body}"}
        t = time.perf_counter()
        [result] = services.ledger.apply([parse_command(cmd)])
        packet = packets.packet(request, after=result.position, record=False)
        c2p.append(time.perf_counter() - t)
        failures += not any(marker in it.text for it in packet.items if it.status != "dropped")
    print(json.dumps({"packet": times, "c2p": c2p, "failures": failures}), flush=True)
services.close()
'''


class Side:
    """One code's long-lived process over its own copy of the store."""

    def __init__(self, name: str, code: Path, url: str, story: str, last: int, warmup: int) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(code), "CANON_EMBEDDER": "hashing"}
        cfg = {"url": url, "story": story, "last": last, "warmup": warmup}
        self.proc = subprocess.Popen([sys.executable, "-c", SIDE, json.dumps(cfg)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=str(code))
        self.ready = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} code's process ended (exit {self.proc.wait()})")
        return json.loads(line)

    def round(self, samples: int, c2p: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"do": "round", "samples": samples, "c2p": c2p}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"do": "stop"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)


def _copies(kind: str, template: str) -> tuple[dict[str, str], list[Any]]:
    """A copy of the template store per code: {name: url}, and what removes them."""
    urls: dict[str, str] = {}
    undo: list[Any] = []
    if kind == "sqlite":
        path = Path(template.removeprefix("sqlite:///"))
        for name in ("old", "new"):
            copy = path.with_name(f"{path.stem}-{name}.db")
            shutil.copyfile(path, copy)
            urls[name] = f"sqlite:///{copy}"
            undo.append(lambda p=copy: p.unlink(missing_ok=True))
        return urls, undo
    import psycopg

    source = template.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(conninfo(template, "postgres"), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (source,))
        for name in ("old", "new"):
            db = f"{source}_{name}"
            admin.execute(f'CREATE DATABASE "{db}" TEMPLATE "{source}"')
            urls[name] = template.replace(f"/{source}", f"/{db}", 1)

            def drop(db: str = db) -> None:
                with psycopg.connect(conninfo(template, "postgres"), autocommit=True) as a:
                    a.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

            undo.append(drop)
    return urls, undo


def measure(kind: str, args: argparse.Namespace, commands: list[Any], story: str, last: int,
            old_code: Path) -> dict[str, Any]:
    template, cleanup = scratch(kind, args.pg_url)
    sides: list[Side] = []
    undo: list[Any] = []
    try:
        loaded = load_story(template, kind, commands, args.batch_size)
        urls, undo = _copies(kind, template)
        sides = [Side("old", old_code, urls["old"], story, last, args.warmup),
                 Side("new", ROOT, urls["new"], story, last, args.warmup)]
        if kind == "postgres":  # as autovacuum would (this server may run without it); see bench_packets.py
            import psycopg

            for url in urls.values():
                with psycopg.connect(conninfo(url), autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE")
        hashes = {s.name: s.ready["hash"] for s in sides}
        if hashes["old"] != hashes["new"]:
            raise SystemExit(f"{kind}: the packets differ: {hashes}")
        rounds: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
        # ABBA over rounds: round r runs old then new when r is even, new then old when odd.
        for r in range(args.rounds):
            pair = (sides[0], sides[1]) if r % 2 == 0 else (sides[1], sides[0])
            for s in pair:
                got = s.round(args.samples, args.samples // 2)
                if got["failures"]:
                    raise SystemExit(f"{kind}: {got['failures']} command-to-packet sample(s) of the {s.name} code "
                                     "missed the new summary")
                rounds[s.name].append({"packet": percentiles(got["packet"]), "c2p": percentiles(got["c2p"])})
                log(f"{kind}: round {r + 1} {s.name}: packet p50 {rounds[s.name][-1]['packet']['p50']:.2f} ms, "
                    f"command-to-packet p50 {rounds[s.name][-1]['c2p']['p50']:.2f} ms")
        out: dict[str, Any] = {"load": loaded, "hash": hashes["new"],
                               "catch_up_s": {s.name: round(s.ready["catch_up_s"], 1) for s in sides}}
        for what in ("packet", "c2p"):
            med = {name: statistics.median(r[what]["p50"] for r in rs) for name, rs in rounds.items()}
            paired = [n[what]["p50"] / o[what]["p50"] for n, o in zip(rounds["new"], rounds["old"])]
            out[what] = {"rounds": {name: [round(r[what]["p50"], 3) for r in rs] for name, rs in rounds.items()},
                         "median_p50_ms": {k: round(v, 3) for k, v in med.items()},
                         "new_over_old": round(med["new"] / med["old"], 3),
                         # each round's new / old, the two measured back to back: the drift cancels
                         "paired_new_over_old": round(statistics.median(paired), 3)}
        return out
    finally:
        for s in sides:
            s.stop()
        for u in undo:
            u()
        cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_options(parser)
    story_options(parser)
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200-chapter story, 20 samples (smoke run)")
    parser.add_argument("--old", default=OLD, help=f"the old code's commit (default {OLD})")
    parser.add_argument("--old-dir", default="/tmp/read-path-old", help="its worktree (made if missing)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--samples", type=int, help="packets per round (default 100; 20 with --quick)")
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    story_sized(args)
    args.samples = args.samples or (20 if args.quick else 100)
    started = time.perf_counter()
    old_code = Path(args.old_dir)
    made = old_worktree(args.old, old_code)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(old_code / "canon_ledger")], check=True)
    try:
        info = machine_info(args.pg_url if args.store != "sqlite" else None)
        story_info, commands = story_commands(args)
        story, last = story_info["story_id"], args.chapters
        report: dict[str, Any] = {"machine": info, "old": args.old, "rounds": args.rounds, "samples": args.samples,
                                  "story": story_info, "stores": {}}
        for kind in (["sqlite", "postgres"] if args.store == "both" else [args.store]):
            report["stores"][kind] = measure(kind, args, commands, story, last, old_code)
    finally:
        if made:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_code)], cwd=ROOT, check=False)
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    lines = header("bench_read_path.py", sys.argv[1:], info)
    lines += ["", f"Old code {args.old}, new code this checkout; {args.rounds} rounds ABBA of {args.samples} packets "
                  f"and {args.samples // 2} commands-to-packet; chapter {last} writer packet, L0.", "",
              "| Store | Packet p50, old | new | new / old (paired) | Command-to-packet p50, old | new | new / old (paired) |",
              "|---|--:|--:|--:|--:|--:|--:|"]
    for kind, r in report["stores"].items():
        p, c = r["packet"], r["c2p"]
        lines.append(f"| {kind} | {p['median_p50_ms']['old']:.2f} ms | {p['median_p50_ms']['new']:.2f} ms | "
                     f"{p['new_over_old']:.2f}x ({p['paired_new_over_old']:.2f}x) | {c['median_p50_ms']['old']:.2f} ms | "
                     f"{c['median_p50_ms']['new']:.2f} ms | {c['new_over_old']:.2f}x ({c['paired_new_over_old']:.2f}x) |")
    emit(report, args, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
