"""``canon demo``: the project's own short serial, applied through the command path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from application.ledger import CanonLedger
from application.parsing import parse_line

SAMPLE = Path(__file__).with_name("sample_story.jsonl")


def sample_commands() -> list[str]:
    return [line for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_demo(ledger: CanonLedger, display: str, fmt: str) -> int:
    results = ledger.apply([parse_line(line) for line in sample_commands()])
    counts = Counter(r.status for r in results)
    failed = [r.as_dict() for r in results if not r.ok]
    kinds = Counter(e.type for e in ledger.history(story_id="lamplight"))
    if fmt == "json":
        print(json.dumps({"db": display, "results": dict(counts), "failed": failed,
                          "position": ledger.position(), "events": dict(kinds)}))
    else:
        print(f"Canon Ledger demo on {display}")
        print(f"  sample serial: {SAMPLE.name}, {len(results)} commands -> "
              + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        print(f"  log position: {ledger.position()}  (run the demo again: every command reports duplicate)")
        print("  events of story 'lamplight':")
        for kind, n in sorted(kinds.items()):
            print(f"    {n:>4}  {kind}")
        print("  (context packets arrive with the packet compiler; see `canon events --story lamplight`)")
    return 0 if not failed else 1
