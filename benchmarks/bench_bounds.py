#!/usr/bin/env python
"""What the command bounds cost (issue 16): ``canon apply``'s in-process path, JSON line ->
parse -> validate -> ``ledger.apply``, before and after the bounds, alternated in one session.

    python benchmarks/bench_bounds.py --old-ref 41a4b14 [--commands 1500] [--repeats 5]
                                      [--stores sqlite,postgres] [--save-json PATH]

The old code is checked out (``git worktree``) into a temporary folder and run in its own
process with that folder first on ``sys.path``; the new code is this checkout. Each repeat
runs old then new (then new then old on the next repeat), each on a fresh store, over the
same lines (the story of ``bench_apply.generate_story``, one command per transaction). It
reports the median commands/s and the median per-line parse+validate time of each, and the
ratios new/old. Not part of the test run.
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
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from canon_ledger.domain.commands import parse_line
from canon_ledger.infrastructure.stores import open_ledger
lines = open(sys.argv[3], encoding="utf-8").read().splitlines()
t0 = time.perf_counter()
for line in lines:
    parse_line(line)
parse = (time.perf_counter() - t0) / len(lines)
ledger = open_ledger(sys.argv[2])
t0 = time.perf_counter()
for line in lines:
    [r] = ledger.apply([parse_line(line)])
    assert r.ok, r.as_dict()
apply = time.perf_counter() - t0
ledger.close()
print(json.dumps({"parse_us": parse * 1e6, "commands_per_s": len(lines) / apply}))
"""


def _store(kind: str, tmp: Path) -> tuple[str, str | None]:
    if kind == "sqlite":
        return f"sqlite:///{tmp / f'b{uuid.uuid4().hex[:8]}.db'}", None
    import psycopg

    name = f"canon_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:5432/{name}", name


def _drop(name: str | None) -> None:
    if name is None:
        return
    import psycopg

    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(code: Path, url: str, lines: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, "-c", WORKER, str(code), url, str(lines)], capture_output=True, text=True,
                         env=env, cwd=code, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-ref", required=True, help="the commit before the bounds")
    parser.add_argument("--commands", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--save-json", metavar="PATH")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_apply import generate_story

    report: dict = {"old_ref": args.old_ref, "commands": args.commands, "repeats": args.repeats,
                    "started": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "stores": {}}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        old = tmp / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old_ref], check=True,
                       capture_output=True)
        try:
            lines = tmp / "story.jsonl"
            lines.write_text("\n".join(json.dumps(c) for c in generate_story(args.commands)) + "\n", encoding="utf-8")
            for kind in args.stores.split(","):
                runs: dict[str, list[dict]] = {"old": [], "new": []}
                for repeat in range(args.repeats):
                    order = [("old", old), ("new", ROOT)] if repeat % 2 == 0 else [("new", ROOT), ("old", old)]
                    for label, code in order:
                        url, name = _store(kind, tmp)
                        try:
                            runs[label].append(_run(code, url, lines))
                        finally:
                            _drop(name)
                        print(f"{kind} {label} #{repeat + 1}: {runs[label][-1]}", file=sys.stderr)
                med = {label: {k: statistics.median(r[k] for r in rs) for k in ("parse_us", "commands_per_s")}
                       for label, rs in runs.items()}
                report["stores"][kind] = {
                    "median": med, "runs": runs,
                    "throughput_new_over_old": med["new"]["commands_per_s"] / med["old"]["commands_per_s"],
                    "parse_new_over_old": med["new"]["parse_us"] / med["old"]["parse_us"]}
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    print(json.dumps(report["stores"] and {k: {kk: vv for kk, vv in v.items() if kk != "runs"}
                                           for k, v in report["stores"].items()}, indent=2))
    if args.save_json:
        Path(args.save_json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
