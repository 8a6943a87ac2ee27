#!/usr/bin/env python
"""Chunking time against text size, before and after issue 16 (item 4: linear chunking).

    python benchmarks/bench_chunking.py [--quick] [--sizes 0.1,1,5] [--repeats 3] [--old-timeout 60]
                                        [--kinds unpunctuated,prose,no-cut] [--format json] [--save-json PATH]

``chunk_document`` (256-token children, the default) of three kinds of text, each cut to each
size (MB of characters):

* **unpunctuated**: War and Peace (``../shared/data/novels/war_and_peace.txt``) with every
  ``.``, ``!`` and ``?`` removed and its whitespace collapsed: one paragraph that is one
  enormous sentence, so every child is cut from it on tokens (the issue's case);
* **prose**: War and Peace as it is (3.2 MB; 5 MB is the novel and the start of it again);
* **no-cut**: random hexadecimal digits: no space, no punctuation, one pre-tokenizer piece
  (where the new chunker has no provable cut point and compares windows instead).

**old** is a frozen copy of the chunker before issue 16 (git 0b7d44f, below); **new** is
``domain.chunking``. Each repeat runs old then new on the same text (alternated, so load
drift hits both), and checks that both gave the same chunks (ids, texts, hashes). An old run
that passes ``--old-timeout`` seconds is stopped (SIGALRM) and reported as "> N s"; larger
sizes of that kind are then not tried with old. Reports medians, MB/s, old/new, and each
size's time over the previous size's (linear: the size ratio).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# common puts the checkout on sys.path, for ``tests.unit`` below.
from common import add_output_options, emit, header, loadavg, log, machine_info  # noqa: E402
from gen_story import NOVEL  # noqa: E402

from canon_ledger.domain.chunking import chunk_document  # noqa: E402
from canon_ledger.infrastructure.tokenizer import token_counter  # noqa: E402

MB = 1_000_000

# The chunker before issue 16: one frozen copy, kept beside the test that pins the new one to it.
from tests.unit.test_chunking_linear import old_chunk_document  # noqa: E402


# --- the texts ------------------------------------------------------------------------------


def texts(kinds: list[str], largest: int) -> dict[str, str]:
    with open(NOVEL, encoding="utf-8") as f:
        novel = f.read()
    out: dict[str, str] = {}
    for kind in kinds:
        if kind == "unpunctuated":
            base = " ".join(re.sub(r"[.!?]", "", w) for w in novel.split())
            out[kind] = (base + " ") * (largest // len(base) + 1)
        elif kind == "prose":
            out[kind] = (novel + "\n\n") * (largest // len(novel) + 1)
        elif kind == "no-cut":
            out[kind] = random.Random(16).randbytes(largest // 2 + 1).hex()
        else:
            raise SystemExit(f"unknown kind {kind!r}")
    return out


# --- timing ---------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _as_tuples(sections: list[Any], chunks: list[Any]) -> tuple[list[Any], list[Any]]:
    """The new chunker's output in the old copy's shape, to compare (not timed)."""
    return ([(s.section_id, s.breadcrumb) for s in sections],
            [(c.chunk_id, c.section_id, c.ordinal, c.text, c.hash) for c in chunks])


def run_old(text: str, tokens: Any, timeout: float) -> tuple[float | None, Any]:
    """Seconds and output, or (None, None) if it passed ``timeout``."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    t0 = time.perf_counter()
    try:
        out = old_chunk_document("kb/bench.md", "Bench", text, tokens)
    except _Timeout:
        return None, None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - t0, out


def run_new(text: str, tokens: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    sections, chunks = chunk_document("kb/bench.md", "Bench", text, tokens)
    elapsed = time.perf_counter() - t0
    return elapsed, _as_tuples(sections, chunks)


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    tokens = token_counter()
    sizes = [int(float(s) * MB) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    corpus = texts(kinds, max(sizes))
    report: dict[str, Any] = {"machine": machine_info(None), "tokenizer": tokens.name, "max_tokens": 256,
                              "repeats": args.repeats, "old_timeout_s": args.old_timeout, "results": []}
    for kind in kinds:
        old_gave_up = False
        for size in sizes:
            text = corpus[kind][:size]
            old_s: list[float] = []
            new_s: list[float] = []
            timed_out = False
            same: bool | None = None
            chunks = 0
            for r in range(args.repeats):
                t_old, old_out = None, None
                if not old_gave_up and not timed_out:
                    t_old, old_out = run_old(text, tokens, args.old_timeout)
                    timed_out = t_old is None
                t_new, new_out = run_new(text, tokens)
                new_s.append(t_new)
                chunks = len(new_out[1])
                if t_old is not None:
                    old_s.append(t_old)
                    same = (same is not False) and old_out == new_out
                log(f"{kind} {size / MB:g} MB repeat {r + 1}: old "
                    f"{'-' if t_old is None else f'{t_old:.3f} s'}, new {t_new:.3f} s")
                old_out = new_out = None
            row = {"kind": kind, "size_mb": size / MB, "chunks": chunks,
                   "new_median_s": statistics.median(new_s), "new_runs_s": new_s,
                   "old_median_s": statistics.median(old_s) if old_s else None, "old_runs_s": old_s,
                   "old_timed_out": timed_out, "old_not_run": old_gave_up, "same_chunks": same}
            report["results"].append(row)
            if timed_out or old_gave_up:
                old_gave_up = True
    report["machine"]["loadavg_end"] = loadavg()
    return report


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    m = report["machine"]
    lines = [
        *header("bench_chunking.py", argv, m),
        f"- Tokenizer {report['tokenizer']}; {report['repeats']} repeats, old stopped after "
        f"{report['old_timeout_s']:g} s.",
        "",
        "| Text | Size | Chunks | Old median | New median | New MB/s | Old/new | New growth | Same chunks |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    previous: dict[str, dict[str, Any]] = {}
    for row in report["results"]:
        if row["old_median_s"] is not None:
            old = f"{row['old_median_s']:.3f} s"
            ratio = f"{row['old_median_s'] / row['new_median_s']:.1f}x"
        elif row["old_timed_out"]:
            old, ratio = f"> {report['old_timeout_s']:g} s", f"> {report['old_timeout_s'] / row['new_median_s']:.0f}x"
        else:
            old, ratio = "not run", "-"
        prev = previous.get(row["kind"])
        growth = "-"
        if prev:
            growth = (f"{row['new_median_s'] / prev['new_median_s']:.1f}x for "
                      f"{row['size_mb'] / prev['size_mb']:g}x the size")
        same = {True: "yes", False: "**NO**", None: "-"}[row["same_chunks"]]
        lines.append(f"| {row['kind']} | {row['size_mb']:g} MB | {row['chunks']:,} | {old} | {row['new_median_s']:.3f} s | "
                     f"{row['size_mb'] / row['new_median_s']:.1f} | {ratio} | {growth} | {same} |")
        previous[row["kind"]] = row
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes 0.1,0.2 MB, 1 repeat, old stopped after 20 s")
    parser.add_argument("--sizes", default="0.1,1,5", help="MB of characters, comma-separated")
    parser.add_argument("--kinds", default="unpunctuated,prose,no-cut")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-timeout", type=float, default=60.0, help="seconds before an old run is stopped")
    add_output_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.old_timeout = "0.1,0.2", 1, 20.0
    started = time.perf_counter()
    report = benchmark(args)
    report["machine"]["wall_seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args, markdown(report, sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
