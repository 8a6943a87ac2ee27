#!/usr/bin/env python
"""Budget a writer packet uses on a real book, compiler 6 against compiler 7 (issue 40).

    python benchmarks/bench_book_packets.py [BOOK ...] [--embedder hashing|default] [--repeats N]
                                            [--format markdown|json] [--save-json PATH]

Not part of the pytest run (``tests/integration/test_packets_use_their_budget.py`` holds the
>= 80% goal on ten chapters of Pride and Prejudice). Per book (default: the three committed
ones), into a fresh SQLite store: import the manuscript, plan chapter N+1 (N: the book's last
chapter) with one goal, and compile its writer packet at the default budget (12,000) in one
snapshot with compiler 6 (``replay.compile_packet(..., compiler=6)``: a fixed 8 L1 passages,
no chapter ending) and with compiler 7 (the current one), alternated ``--repeats`` times:

- tokens used of 12,000 by each (the goal: >= 80% with 7), the P2 and P4 tokens, L1 passages;
- the same after ``canon summarize`` (offline) recorded every chapter's summary (P2 fills);
- the median compile time of each (the same retriever: the catch-up is done before timing).

The hashing embedder (the default here) keeps a whole book's embedding to seconds; the
packet's budget use does not depend on which embedder ranks the passages.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import ROOT, add_output_options, emit, header, loadavg, machine_info, median  # noqa: E402

from canon_ledger.application.manuscript_import import import_manuscript  # noqa: E402
from canon_ledger.application.packets import replay  # noqa: E402
from canon_ledger.application.packets.compiler import compile_packet  # noqa: E402
from canon_ledger.application.packets.recipes import Request  # noqa: E402
from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.domain.manuscript import split  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

BOOKS = [ROOT / "tests" / "fixtures" / name for name in ("war_and_peace.txt", "moby_dick.txt.gz",
                                                         "pride_and_prejudice.txt.gz")]
GOAL = "The story goes on from where the last chapter ended"


def _read(path: Path) -> str:
    import gzip

    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8-sig")


def _shape(packet: Any) -> dict[str, Any]:
    tiers = {t["tier"]: t["tokens"] for t in packet.tiers()}
    return {"used": packet.used_tokens, "share": round(packet.used_tokens / packet.budget, 3), "p2": tiers["P2"],
            "p4": tiers["P4"], "passages": sum(i.kind == "chunk" and i.status != "dropped" for i in packet.items),
            "truncate": packet.stages[-1].detail}


def _compare(services: Any, request: Request, repeats: int) -> dict[str, Any]:
    packets, seconds = {}, {6: [], 7: []}
    services.packets.packet(request, record=False)  # every read model and index caught up first
    retriever, tokens = services.packets.retriever, services.packets.tokens
    for _ in range(repeats):
        for version in (6, 7):
            with services.packets.reader.snapshot() as snap:
                t0 = time.perf_counter()
                packets[version] = (compile_packet(snap, request, tokens, retriever) if version == 7 else
                                    replay.compile_packet(snap, request, tokens, retriever, compiler=6))
                seconds[version].append(time.perf_counter() - t0)
    return {v: {**_shape(p), "ms": round(median(seconds[v]) * 1e3, 1)} for v, p in packets.items()}


def measure(path: Path, embedder: str, repeats: int) -> dict[str, Any]:
    book = split(_read(path))
    last = book.chapters[-1].number
    with tempfile.TemporaryDirectory() as folder:
        services = bootstrap(f"sqlite:///{Path(folder) / 'book.db'}", embedder=None if embedder == "default" else embedder)
        try:
            assert import_manuscript(services.ledger, book, "book", title=path.stem, new_story=True).failed is None
            [planned] = services.ledger.apply([parse_command({
                "type": "plan_chapter", "command_id": "next", "story_id": "book", "chapter": last + 1,
                "volume": book.chapters[-1].volume, "goals": [GOAL]})])
            assert planned.ok, planned.as_dict()
            request = Request("book", "writer", last + 1)
            bare = _compare(services, request, repeats)
            report = services.summarizer("offline").run("book")
            summarised = _compare(services, request, repeats)
        finally:
            services.close()
    return {"book": path.name, "chapters": len(book.chapters), "next": last + 1, "bare": bare,
            "summarised": summarised, "summaries": getattr(report, "summarised", None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("books", nargs="*", type=Path, help="plain-text or .gz books (default: the committed three)")
    parser.add_argument("--embedder", default="hashing", help="hashing (default) or default (the shipped model)")
    parser.add_argument("--repeats", type=int, default=5)
    add_output_options(parser)
    args = parser.parse_args()
    m = machine_info()
    started = time.perf_counter()
    rows = [measure(p, args.embedder, args.repeats) for p in (args.books or BOOKS)]
    m |= {"wall_seconds": round(time.perf_counter() - started, 1), "loadavg_end": loadavg()}
    lines = header("bench_book_packets.py", sys.argv[1:], m) + [
        "", "| book | chapter | summaries | compiler | used of 12,000 | share | P2 | P4 | L1 passages | compile ms |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        for label in ("bare", "summarised"):
            for v in (6, 7):
                x = r[label][v]
                lines.append(f"| {r['book']} | {r['next']} | {'yes' if label == 'summarised' else 'no'} | {v} | "
                             f"{x['used']:,} | {x['share']:.0%} | {x['p2']:,} | {x['p4']:,} | {x['passages']} | "
                             f"{x['ms']} |")
    emit({"machine": m, "books": rows}, args, "\n".join(lines))
    if any(r[label][7]["share"] < 0.8 for r in rows for label in ("bare", "summarised")):
        sys.exit(1)


if __name__ == "__main__":
    main()
