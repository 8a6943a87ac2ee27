#!/usr/bin/env python
"""Words in, words stored: ``canon import manuscript`` of real books loses no text (issue 40).

    python benchmarks/bench_book_words.py [BOOK ...] [--format markdown|json] [--save-json PATH]

Not part of the pytest run (``tests/unit/test_manuscript.py`` checks the split word for word).
Per book (default: the three committed ones, War and Peace, Moby-Dick, Pride and Prejudice; a
``.gz`` is read decompressed), into a fresh SQLite store on the hashing embedder, through
``import_manuscript`` as the CLI calls it, then read back from the store:

- **words in**: the file's words once its heading lines are taken out (``manuscript.body_lines``);
- **stored**: the words of every chapter's accepted text in the store, plus the front matter
  (which is reported, not imported): equal to *words in* when nothing is lost;
- chapters and volumes found, front-matter words, the import's wall seconds and events/s.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import ROOT, add_output_options, emit, header, loadavg, machine_info  # noqa: E402

from canon_ledger.application.manuscript_import import accepted, import_manuscript  # noqa: E402
from canon_ledger.domain.manuscript import body_lines, split  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402

BOOKS = [ROOT / "tests" / "fixtures" / name for name in ("war_and_peace.txt", "moby_dick.txt.gz",
                                                         "pride_and_prejudice.txt.gz")]


def read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8-sig")


def measure(path: Path) -> dict[str, Any]:
    text = read(path)
    book = split(text)
    words_in = len(" ".join(body_lines(text)).split())
    with tempfile.TemporaryDirectory() as folder:
        services = bootstrap(f"sqlite:///{Path(folder) / 'book.db'}", embedder="hashing")
        try:
            t0 = time.perf_counter()
            report = import_manuscript(services.ledger, book, "book", title=path.stem, new_story=True)
            seconds = time.perf_counter() - t0
            texts = accepted(services.ledger, "book", [c.number for c in book.chapters])
            stored = sum(len(t.split()) for _, t in texts.values())
        finally:
            services.close()
    front = len(book.front_matter.split())
    return {"book": path.name, "chapters": len(book.chapters), "volumes": len(book.volumes),
            "chapters_stored": len(texts), "words_in": words_in, "words_stored": stored, "front_matter_words": front,
            "lost": words_in - stored - front, "import_seconds": round(seconds, 3),
            "events_per_s": round(report.position / seconds, 1), "failed": report.failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("books", nargs="*", type=Path, help="plain-text or .gz books (default: the committed three)")
    add_output_options(parser)
    args = parser.parse_args()
    m = machine_info()
    started = time.perf_counter()
    rows = [measure(p) for p in (args.books or BOOKS)]
    m |= {"wall_seconds": round(time.perf_counter() - started, 1), "loadavg_end": loadavg()}
    lines = header("bench_book_words.py", sys.argv[1:], m) + [
        "", "| book | chapters | volumes | words in | stored in chapters | front matter | lost | import s | events/s |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['book']} | {r['chapters']} | {r['volumes']} | {r['words_in']:,} | {r['words_stored']:,} | "
              f"{r['front_matter_words']:,} | {r['lost']:,} | {r['import_seconds']} | {r['events_per_s']:,.0f} |"
              for r in rows]
    emit({"machine": m, "books": rows}, args, "\n".join(lines))
    if any(r["lost"] or r["failed"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
