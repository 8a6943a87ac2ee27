#!/usr/bin/env python
"""Import with indexing, then the first packet: no slower than a repeated one (issue 40).

    python benchmarks/bench_first_packet.py [BOOK ...] [--stores sqlite,postgres] [--repeats 5]
                                            [--baseline] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Per book (default: the three committed ones, War and Peace,
Moby-Dick, Pride and Prejudice; a ``.gz`` is decompressed to a temp file first) and store (a temp
SQLite file; a scratch PostgreSQL database, created and dropped here), through the installed
``canon`` command, each verb a process of its own as a user runs it, with the default embedder
(``CANON_EMBEDDER`` removed from the environment: what ``canon`` picks, the packaged MiniLM):

1. ``canon init``, then ``canon --format json import manuscript BOOK --story book``: its wall
   seconds, which now include bringing every read model and both search indexes to the log's end
   (the report's ``indexed``: seconds and texts embedded); events/s = log position / wall s (and,
   without the indexing, / (wall s - indexing s): the process start and the commands), texts/s =
   texts embedded / indexing s;
2. ``canon apply``: ``plan_chapter`` of a new last chapter (N + 1) with one goal, so that its
   writer packet has an L1 query (an imported chapter has no goals);
3. ``canon --format json packet --story book --role writer --chapter N+1``: the **first packet**
   after the import (wall seconds; its stderr says whether it had to catch anything up), then the
   same command ``--repeats`` times: the **repeated packet**, median. Goal: first <= repeated
   (within noise: both are a process start, a model load and one packet).

``--baseline``: the same book again with ``import --no-index`` (the import as it was before issue
40), and its first packet, which embeds the whole book first.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import CANON, ROOT, add_common_options, emit, header, loadavg, log, machine_info, stores_for  # noqa: E402

BOOKS = [ROOT / "tests" / "fixtures" / name for name in ("war_and_peace.txt", "moby_dick.txt.gz",
                                                         "pride_and_prejudice.txt.gz")]
STORY = "book"
GOALS = {  # the new last chapter's goal, per book (any goal gives the packet an L1 query)
    "war_and_peace": "Pierre and Natasha at Bald Hills with Nicholas and Princess Mary",
    "moby_dick": "Ishmael tells what became of the Pequod and her crew after the whale",
    "pride_and_prejudice": "Elizabeth and Darcy visit Pemberley after the wedding",
}


def plain(path: Path, folder: str) -> Path:
    """The book as a plain-text file (a ``.gz`` decompressed into ``folder``)."""
    if path.suffix != ".gz":
        return path
    out = Path(folder) / path.stem
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CANON_EMBEDDER", None)  # the default embedder, as a user gets it
    e.pop("CANON_DATABASE_URL", None)
    return e


def run(url: str, *args: str, stdin: str | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([CANON, "--db", url, "--format", "json", *args], input=stdin, capture_output=True,
                          text=True, env=env(), check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"canon {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return seconds, proc


def packets(url: str, chapter: int, repeats: int) -> dict[str, Any]:
    args = ("packet", "--story", STORY, "--role", "writer", "--chapter", str(chapter))
    first_s, first = run(url, *args)
    body = json.loads(first.stdout)
    again = [run(url, *args)[0] for _ in range(repeats)]
    l1 = [i for i in body["items"] if i["reason"].startswith("L1 retrieval")]
    return {"first_packet_s": first_s, "repeated_packet_s": statistics.median(again),
            "repeated_per_run": [round(s, 3) for s in again], "first_stderr": first.stderr.strip(),
            "l1_items": len(l1), "used_tokens": body["used_tokens"], "budget": body["budget"]}


def measure(book: Path, name: str, url: str, repeats: int, no_index: bool) -> dict[str, Any]:
    run(url, "init")
    wall, imported = run(url, "import", "manuscript", str(book), "--story", STORY, "--title", name,
                         *(("--no-index",) if no_index else ()))
    report = json.loads(imported.stdout)
    indexed = report["indexed"]
    chapters = report["chapters"]
    plan = {"type": "plan_chapter", "command_id": "bench-next", "story_id": STORY, "chapter": chapters + 1,
            "volume": max(1, report["volumes"]), "goals": [GOALS.get(name, "what happens next")]}
    run(url, "apply", "-", stdin=json.dumps(plan) + "\n")
    row = {"chapters": chapters, "events": report["position"], "import_s": wall,
           "events_per_s": report["position"] / wall, "indexed_by": indexed["by"],
           "apply_events_per_s": report["position"] / max(wall - indexed["seconds"], 1e-9),
           "index_s": indexed["seconds"], "chunks": indexed["chunks"],
           "chunks_per_s": indexed["chunks"] / indexed["seconds"] if indexed["seconds"] else None,
           **packets(url, chapters + 1, repeats)}
    log(f"{name} {'(--no-index) ' if no_index else ''}{url.split(':')[0]}: import {wall:.1f} s "
        f"(indexing {indexed['seconds']:.1f} s, {indexed['chunks']:,} texts), first packet {row['first_packet_s']:.2f} s, "
        f"repeated {row['repeated_packet_s']:.2f} s; first packet's stderr: {row['first_stderr'] or '-'}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("books", nargs="*", type=Path, help="plain-text or .gz books (default: the committed three)")
    parser.add_argument("--stores", default="sqlite", help="comma list of sqlite,postgres (default sqlite)")
    parser.add_argument("--repeats", type=int, default=5, help="repeated packets, median (default 5)")
    parser.add_argument("--baseline", action="store_true",
                        help="also import with --no-index and time that store's first packet (it embeds the book)")
    add_common_options(parser)
    args = parser.parse_args()
    kinds = [s.strip() for s in args.stores.split(",") if s.strip()]
    stores, skipped = stores_for(kinds, args.pg_url)
    m = machine_info(args.pg_url if "postgres" in kinds else None)
    started = time.perf_counter()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for path in args.books or BOOKS:
                book = plain(path, folder)
                name = book.stem
                for store in stores:
                    for no_index in ((False, True) if args.baseline else (False,)):
                        with store.fresh() as url:
                            rows.append({"book": name, "store": store.kind, "no_index": no_index,
                                         **measure(book, name, url, args.repeats, no_index)})
    finally:
        for store in stores:
            store.close()
    m |= {"wall_seconds": round(time.perf_counter() - started, 1), "loadavg_end": loadavg()}
    lines = header("bench_first_packet.py", sys.argv[1:], m) + [
        "", f"Each verb a `canon` process, default embedder; repeated packet: median of {args.repeats}.", "",
        "| book | store | import | chapters | events | import s | events/s | without indexing: events/s | indexing s "
        "| texts embedded | texts/s | first packet s | repeated packet s | first / repeated | L1 items |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        rate = f"{r['chunks_per_s']:,.1f}" if r["chunks_per_s"] else "-"
        lines.append(
            f"| {r['book']} | {r['store']} | {'--no-index' if r['no_index'] else 'indexing'} | {r['chapters']} "
            f"| {r['events']:,} | {r['import_s']:.1f} | {r['events_per_s']:,.0f} | {r['apply_events_per_s']:,.0f} "
            f"| {r['index_s']:.1f} | {r['chunks']:,} "
            f"| {rate} | {r['first_packet_s']:.2f} | {r['repeated_packet_s']:.2f} "
            f"| {r['first_packet_s'] / r['repeated_packet_s']:.2f} | {r['l1_items']} |")
    for store, reason in skipped.items():
        lines += ["", f"Skipped {store}: {reason}"]
    emit({"machine": m, "rows": rows, "skipped": skipped}, args, "\n".join(lines))


if __name__ == "__main__":
    main()
