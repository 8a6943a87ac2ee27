#!/usr/bin/env python
"""Process time of one CLI call, before and after a change (issue 21: cold start).

    python benchmarks/bench_cold_start.py [--old REF] [--runs 15] [--format markdown|json]

Not part of the pytest run. The old code is checked out at ``REF`` in a temporary git worktree
and run with the same interpreter and packages (``python -m infrastructure.cli`` from that
folder, so its modules are imported, not the installed ones). One demo store (``canon demo``
by the new code) serves both. Each run times old and new back to back, in alternating order,
for: ``canon apply`` of one new command, ``canon events --limit 5``, ``canon packet`` for the
writer (L1: embeds its query) and for the summarizer (no retrieval) with ``--no-record``, and
``canon search`` of the story's chapters. Reported: the median wall time of each and new/old.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cli(code: Path, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("CANON_DATABASE_URL", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "canon_ledger.infrastructure.cli", *args], cwd=code, env=env,
                          capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{code.name}: canon {' '.join(args)} failed: {done.stderr[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="5fc3ced", help="the git ref of the code before the change")
    parser.add_argument("--runs", type=int, default=15, help="runs of each call per side")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cold-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.old], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            return _measure(args, Path(tmp), old)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True)


def _measure(args: argparse.Namespace, tmp: Path, old: Path) -> int:
    url = f"sqlite:///{tmp / 'demo.db'}"
    _cli(ROOT, "--db", url, "demo", "--format", "json")
    commands = tmp / "one.jsonl"
    calls = {
        "apply (one command)": ["apply", str(commands)],
        "events --limit 5": ["events", "--limit", "5"],
        "packet writer ch5 (L1)": ["packet", "--story", "lamplight", "--role", "writer", "--chapter", "5", "--no-record"],
        "packet summarizer ch2": ["packet", "--story", "lamplight", "--role", "summarizer", "--chapter", "2",
                                  "--no-record"],
        "search story:lamplight": ["search", "--collection", "story:lamplight", "who stole lamp 33"],
    }
    times: dict[str, dict[str, list[float]]] = {name: {"old": [], "new": []} for name in calls}
    n = 0
    for run in range(args.runs):
        for name, call in calls.items():
            sides = [("old", old), ("new", ROOT)] if run % 2 == 0 else [("new", ROOT), ("old", old)]
            for side, code in sides:
                n += 1
                commands.write_text(json.dumps({"type": "record_chapter_summary", "command_id": f"cold-{n}",
                                                "story_id": "lamplight", "chapter": 1, "text": f"Summary {n}."}) + "\n")
                times[name][side].append(_cli(code, "--db", url, "--format", "json", *call))
        print(f"run {run + 1}/{args.runs}", file=sys.stderr)
    rows = {name: {side: statistics.median(ts) for side, ts in by.items()} for name, by in times.items()}
    if args.format == "json":
        print(json.dumps({"old": args.old, "runs": args.runs, "medians_s": rows}, indent=2))
        return 0
    print(f"| call | old ({args.old}) median s | new median s | new / old |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['old']:.3f} | {r['new']:.3f} | {r['new'] / r['old']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
