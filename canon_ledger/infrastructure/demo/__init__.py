"""``canon demo``: the project's own short serial, applied through the command path, then
the chapter-5 writer packet compiled from what was confirmed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from canon_ledger.application.packets.render import render_text
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_line

if TYPE_CHECKING:
    from canon_ledger.infrastructure.services import Services

SAMPLE = Path(__file__).with_name("sample_story.jsonl")
STORY = "lamplight"


def sample_commands() -> list[str]:
    return [line for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_demo(services: Services, fmt: str) -> int:
    ledger = services.ledger
    results = ledger.apply([parse_line(line) for line in sample_commands()])
    counts = Counter(r.status for r in results)
    failed = [r.as_dict() for r in results if not r.ok]
    packet = services.packets.packet(Request(STORY, "writer", 5))
    if fmt == "json":
        print(json.dumps({"db": services.config.display, "results": dict(counts), "failed": failed,
                          "position": ledger.event_log.position(), "packet": packet.as_dict()}, ensure_ascii=False))
        return 0 if not failed else 1
    print(f"Canon Ledger demo on {services.config.display}")
    print(f"  {SAMPLE.name}: {len(results)} commands -> " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print("  (five chapters; one rejected draft, one rejected proposal, one unconfirmed proposal,")
    print("   a draft in progress, and a revision of Ilse from chapter 4: none of the drafts or")
    print("   unconfirmed text below, all of the confirmed canon that the scene card asks for)")
    print(f"  log position {ledger.event_log.position()}; run it again and every command reports duplicate")
    print()
    print("The chapter-5 writer packet:")
    print()
    print(render_text(packet))
    return 0 if not failed else 1
