"""One process, many request threads (as ``canon serve`` runs): every thread reads its own
writes, whatever the others append and catch up meanwhile."""

from __future__ import annotations

import json
import threading

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.api import LedgerAPI
from canon_ledger.infrastructure.demo import SAMPLE


def test_threads_read_their_own_writes(rs) -> None:
    api = LedgerAPI(rs)
    assert all(r.ok for r in api.apply(json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()))
    failures: list[str] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            work(n)
        except Exception as e:  # noqa: BLE001 - a thread's error fails the test, not just a warning
            failures.append(f"thread {n}: {type(e).__name__}: {e}")

    def work(n: int) -> None:
        barrier.wait()
        for i in range(6):
            marker = f"Marker-{n}-{i}"
            [result] = api.apply([{"type": "record_chapter_summary", "command_id": f"t-{n}-{i}",
                                   "story_id": "lamplight", "chapter": 4, "text": f"{marker} happened."}])
            if result.status != "applied":
                failures.append(f"{marker}: {result.status}")
                continue
            packet = rs.packets.packet(Request("lamplight", "writer", 5), after=result.position, record=i % 2 == 0)
            summary = next(item for item in packet.items if item.kind == "chapter_summary" and item.key == "4")
            # Another thread may have written a later summary of chapter 4 since: then it shows that one.
            if marker not in (summary.text or "") and summary.sources[0] <= result.position:
                failures.append(f"{marker}: packet at {packet.position} shows {summary.text!r}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
    views = rs.views()
    assert views.chapter("lamplight", 4)["summary_text"].startswith("Chapter 4 summary: Marker-")
