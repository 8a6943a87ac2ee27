"""The continuity check on a real novel: War and Peace (../shared/data/novels/war_and_peace.txt,
public domain) imported as it is, with a small hand-made canon of who dies when (Prince Andrew,
Pétya, Karatáev, the old prince; each dead from the chapter after the one that tells it). Every
chapter after the first of those deaths is submitted again as a draft of its own chapter and
checked. In the novel the dead do not act after they die, so every ``unavailable_character``
finding is a false alarm, and the script prints each with its context.

    python benchmarks/bench_continuity_war_and_peace.py [--book PATH]   # ~30 s

Prints the chapters checked, the findings by type and entry, the check's p50 and max per chapter,
and exits 0 (it measures; it does not judge).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap

BOOK = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "novels" / "war_and_peace.txt"
STORY = "wp"
# (name, aliases, a sentence of the chapter that tells the death)
DEATHS = {
    "andrew": ("Prince Andrew", ["Andrew", "Prince Andrew Bolkónski"], '"Where has he gone? Where is he now?..."'),
    "petya": ("Pétya", ["Pétya Rostóv"], "in which Pétya’s body was lying"),
    "karataev": ("Platón Karatáev", ["Karatáev"], "where Karatáev had been sitting, came the sound of a shot"),
    "old-prince": ("Prince Nicholas Bolkónski", ["the old prince"], "old prince died the Marshal went away"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", type=Path, default=BOOK)
    args = parser.parse_args(argv)
    url = f"sqlite:///{tempfile.mkdtemp()}/wp.db"
    env = {**os.environ, "CANON_EMBEDDER": "hashing"}
    canon = [sys.executable, "-m", "canon_ledger.infrastructure.cli", "--db", url]
    subprocess.run([*canon, "init"], check=True, env=env, capture_output=True)
    subprocess.run([*canon, "--format", "json", "import", "manuscript", str(args.book), "--story", STORY,
                    "--no-index"], check=True, env=env, capture_output=True)
    s = bootstrap(url, embedder="hashing")
    texts = {d["chapter"]: d["text"] for d in s.views().drafts(STORY, status="accepted")}
    died = {key: next(n for n, t in texts.items() if marker in t) for key, (_, _, marker) in DEATHS.items()}
    commands = []
    for key, (name, aliases, _) in DEATHS.items():
        for step, (valid_from, state) in enumerate([(1, "alive"), (died[key] + 1, "dead")]):
            pid = f"{key}-{step}"
            commands += [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": STORY, "proposal_id": pid,
                          "kind": "character", "key": key, "name": name, "aliases": aliases, "text": f"{name}.",
                          "fields": {"state": state}, "valid_from": valid_from},
                         {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": STORY, "proposal_id": pid}]
    first = min(died.values()) + 1
    drafts = [{"type": "submit_draft", "command_id": f"d{n}", "story_id": STORY, "chapter": n, "draft_id": f"re{n}",
               "text": texts[n]} for n in sorted(texts) if n >= first]
    results = s.ledger.apply([parse_command(c) for c in commands + drafts])
    assert all(r.ok for r in results), [r.as_dict() for r in results if not r.ok][:3]
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    seconds, shown = [], []
    for d in drafts:
        t = time.perf_counter()
        report = s.continuity().check(STORY, d["draft_id"]).as_dict()
        seconds.append(time.perf_counter() - t)
        for f in report["findings"]:
            found[(f["type"], f["entry"]["key"])] += 1
            at = f["span"]["start"]
            shown.append(f"  ch {d['chapter']} {f['type']} {f['entry']['key']}: ..."
                         + d["text"][max(0, at - 80):at + 80].replace("\n", " ") + "...")
    seconds.sort()
    print(f"deaths told in chapters {died}; {len(drafts)} real chapters ({first}-{max(texts)}) checked")
    print(f"check per chapter: p50 {seconds[len(seconds) // 2] * 1000:.1f} ms, max {seconds[-1] * 1000:.1f} ms")
    print(f"findings: {dict(found) or 'none'}")
    print("\n".join(shown))
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
