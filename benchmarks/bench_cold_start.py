#!/usr/bin/env python
"""Process time of one CLI call, old code against new (issue 21; issue 39: cold start).

    python benchmarks/bench_cold_start.py [--old REF] [--old-dir DIR] [--runs 15] [--first-runs 5]
                                          [--format markdown|json]

Not part of the pytest run. The old code is ``REF`` (default HEAD: the last commit, so the
working tree's changes are what is measured) checked out in a git worktree at ``DIR`` (default
/tmp/cold-old; made if missing, reused if it is already a worktree at ``REF``, and removed
after unless it was there before) and run with the same interpreter and packages: ``python -m
canon_ledger.infrastructure.cli`` with that folder first on PYTHONPATH, so its modules are
imported, not the installed ones. The new code is this checkout. Both trees are compiled to
bytecode first, as an install is: in an environment with PYTHONDONTWRITEBYTECODE a fresh
worktree would otherwise compile every module on every call.

One demo store (``canon demo`` by the new code) serves both. Each run times old and new back to
back, in alternating order, for: ``canon packet`` for the writer (L1: embeds its query; the
issue's command, recorded, ``--format json``) and the summarizer (no retrieval, ``--no-record``),
``canon apply`` of one new command, ``canon events --limit 5``, ``canon status`` and ``canon
search`` of the story's chapters. Reported: the median wall time of each, new/old, and the median
CPU time (user + system) of the process, which another load on the machine disturbs less.

The user cache (``CANON_CACHE_DIR``: the tokenizer's rank table, the model's optimized graph;
``canon_ledger/infrastructure/user_cache.py``) is a folder made for this run, filled by one
untimed call: what every call after the first one on an install sees. ``--first-runs`` times
the writer packet with an empty cache each time (the first call after an install, which builds
the cache) beside the old code. Before timing, the writer packet's bytes and the demo's packet
hash are checked to be the same from both.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import old_worktree  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STORY = ["--story", "lamplight"]
CALLS = {
    "packet writer ch5 (L1, recorded)": ["packet", *STORY, "--role", "writer", "--chapter", "5"],
    "packet summarizer ch2": ["packet", *STORY, "--role", "summarizer", "--chapter", "2", "--no-record"],
    "apply (one command)": ["apply", "{commands}"],
    "events --limit 5": ["events", "--limit", "5"],
    "status": ["status"],
    "search story:lamplight": ["search", "--collection", "story:lamplight", "who stole lamp 33"],
}
FIRST = "packet writer ch5, empty user cache"


def _cli(code: Path, cache: Path, *args: str) -> tuple[float, float, str]:
    """(wall s, CPU s of the process: user + system, stdout) of one call of the CLI in ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "CANON_CACHE_DIR": str(cache)}
    env.pop("CANON_DATABASE_URL", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "canon_ledger.infrastructure.cli", *args], cwd=code, env=env,
                                 stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{code}: canon {' '.join(args)} failed: {err.read().decode(errors='replace')[-500:]}")
        return elapsed, usage.ru_utime + usage.ru_stime, out.read().decode()


def _compile(code: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "canon_ledger")], check=True,
                   capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="HEAD", help="the git ref of the code before the change (default HEAD)")
    parser.add_argument("--old-dir", type=Path, default=Path("/tmp/cold-old"),
                        help="where the old code's worktree is, or is made (default /tmp/cold-old)")
    parser.add_argument("--runs", type=int, default=15, help="runs of each call per side")
    parser.add_argument("--first-runs", type=int, default=5,
                        help="runs of the writer packet with an empty user cache (0: none)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args()
    made = old_worktree(args.old, args.old_dir)
    try:
        with tempfile.TemporaryDirectory(prefix="cold-") as tmp:
            return _measure(args, Path(tmp), args.old_dir)
    finally:
        if made:
            subprocess.run(["git", "worktree", "remove", "--force", str(args.old_dir)], cwd=ROOT, capture_output=True)


def _check_same_bytes(tmp: Path, old: Path, cache: Path) -> str:
    """The demo's packet hash and the writer packet's bytes, the same from old and new code."""
    hashes = []
    for side, code in (("old", old), ("new", ROOT)):
        _, _, out = _cli(code, cache, "--db", f"sqlite:///{tmp / f'check-{side}.db'}", "demo")
        hashes.append([line.split()[-1] for line in out.splitlines() if line.startswith("hash ")][-1])
    if hashes[0] != hashes[1]:
        raise SystemExit(f"the demo's packet hash differs: old {hashes[0]}, new {hashes[1]}")
    url = f"sqlite:///{tmp / 'check-new.db'}"
    packets = [_cli(code, cache, "--db", url, "--format", "json", *CALLS["packet writer ch5 (L1, recorded)"],
                    "--no-record")[2] for code in (old, ROOT)]
    if packets[0] != packets[1]:
        raise SystemExit("the writer packet's bytes differ between old and new code")
    return hashes[1]


def _measure(args: argparse.Namespace, tmp: Path, old: Path) -> int:
    for code in (old, ROOT):
        _compile(code)
    cache = tmp / "user-cache"
    demo_hash = _check_same_bytes(tmp, old, cache)  # also fills the new code's user cache
    url = f"sqlite:///{tmp / 'demo.db'}"
    _cli(ROOT, cache, "--db", url, "demo", "--format", "json")
    commands = tmp / "one.jsonl"
    load = [os.getloadavg()[0]]
    started = datetime.now(timezone.utc)
    names = list(CALLS) + ([FIRST] if args.first_runs > 0 else [])
    wall: dict[str, dict[str, list[float]]] = {name: {"old": [], "new": []} for name in names}
    cpu: dict[str, dict[str, list[float]]] = {name: {"old": [], "new": []} for name in names}
    n = 0
    for run in range(max(args.runs, args.first_runs)):
        for name in names:
            if run >= (args.first_runs if name == FIRST else args.runs):
                continue
            call = CALLS["packet writer ch5 (L1, recorded)" if name == FIRST else name]
            sides = [("old", old), ("new", ROOT)] if run % 2 == 0 else [("new", ROOT), ("old", old)]
            for side, code in sides:
                n += 1
                commands.write_text(json.dumps({"type": "record_chapter_summary", "command_id": f"cold-{n}",
                                                "story_id": "lamplight", "chapter": 1, "text": f"Summary {n}."}) + "\n")
                side_cache = cache
                if name == FIRST:  # an install's first call: nothing cached yet
                    side_cache = tmp / f"empty-cache-{n}"
                argv = [a.replace("{commands}", str(commands)) for a in call]
                w, c, _ = _cli(code, side_cache, "--db", url, "--format", "json", *argv)
                wall[name][side].append(w)
                cpu[name][side].append(c)
                if side_cache != cache:
                    shutil.rmtree(side_cache, ignore_errors=True)
        load.append(os.getloadavg()[0])
        print(f"run {run + 1}/{max(args.runs, args.first_runs)}", file=sys.stderr)
    rows = {name: {"old_wall_s": statistics.median(wall[name]["old"]), "new_wall_s": statistics.median(wall[name]["new"]),
                   "old_cpu_s": statistics.median(cpu[name]["old"]), "new_cpu_s": statistics.median(cpu[name]["new"]),
                   "runs": len(wall[name]["new"])} for name in names}
    for r in rows.values():
        r["wall_ratio"] = r["new_wall_s"] / r["old_wall_s"]
        r["cpu_ratio"] = r["new_cpu_s"] / r["old_cpu_s"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    old_commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=old, capture_output=True,
                                text=True).stdout.strip()
    meta = {"started": started.isoformat(timespec="seconds"), "old": f"{args.old} ({old_commit})",
            "new": commit.strip() + (" + working tree" if dirty else ""),
            "python": platform.python_version(), "cpus": os.cpu_count(), "load_1min": [min(load), max(load)],
            "demo_hash": demo_hash}
    if args.format == "json":
        print(json.dumps({**meta, "medians": rows}, indent=2))
        return 0
    print(f"{meta['started']}, old {meta['old']} vs new {meta['new']}; Python {meta['python']}, {meta['cpus']} CPUs, "
          f"load (1 min) {min(load):.1f}-{max(load):.1f}; same packet bytes, demo hash {demo_hash[:24]}")
    print()
    print("| call | runs | old median s | new median s | new / old | old CPU s | new CPU s | CPU new / old |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for name, r in rows.items():
        print(f"| {name} | {r['runs']} | {r['old_wall_s']:.3f} | {r['new_wall_s']:.3f} | **{r['wall_ratio']:.2f}x** | "
              f"{r['old_cpu_s']:.3f} | {r['new_cpu_s']:.3f} | {r['cpu_ratio']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
