#!/usr/bin/env python
"""``canon import manuscript`` on War and Peace, against bench_import's command path (issue 23).

    python benchmarks/bench_manuscript.py [--stores sqlite,postgres] [--repeats 3] [--save-json PATH]

Not part of the pytest run. Per store and repeat, each in a fresh store, alternated:

- **reference**: bench_import's command path: its commands for the novel (start_story; per
  chapter plan_chapter, submit_draft, accept_draft, record_chapter_summary; per book
  record_volume_summary), parsed before the clock, applied in atomic batches of 100;
- **import**: ``application.manuscript_import.import_manuscript`` as ``canon import
  manuscript`` calls it: the file split (``domain.manuscript.split``), every command built and
  parsed, then applied in atomic batches of 20 chapters (all inside the clock: the user pays it);
- **re-import**: the same call again on that store (all ``duplicate``).

Reports per store the medians of wall seconds and events/s, and import / reference in events/s.
The two workloads differ (the reference also records summaries), so events/s is the measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_common_options, emit, log, machine_info, stores_for  # noqa: E402
from gen_story import NOVEL, novel_commands, read_novel  # noqa: E402

from canon_ledger.application.manuscript_import import import_manuscript  # noqa: E402
from canon_ledger.domain.commands import parse_command  # noqa: E402
from canon_ledger.domain.manuscript import split  # noqa: E402
from canon_ledger.infrastructure.bootstrap import bootstrap  # noqa: E402


def reference(url: str, commands: list[Any]) -> dict[str, float]:
    services = bootstrap(url)
    try:
        t0 = time.perf_counter()
        for i in range(0, len(commands), 100):
            results = services.ledger.apply(commands[i:i + 100], atomic=True)
            assert all(r.status == "applied" for r in results), results[0].as_dict()
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "events": services.ledger.event_log.position()}
    finally:
        services.close()


def imported(url: str, text: str) -> dict[str, float]:
    services = bootstrap(url)
    try:
        t0 = time.perf_counter()
        report = import_manuscript(services.ledger, split(text), "wp", title="War and Peace", new_story=True)
        seconds = time.perf_counter() - t0
        assert report.failed is None and report.counts == {"applied": 1 + 3 * report.chapters}, report.counts
        events = services.ledger.event_log.position()
        t0 = time.perf_counter()
        again = import_manuscript(services.ledger, split(text), "wp", title="War and Peace", new_story=False)
        again_s = time.perf_counter() - t0
        assert set(again.counts) == {"duplicate"} and services.ledger.event_log.position() == events
        return {"seconds": seconds, "events": events, "chapters": report.chapters, "volumes": report.volumes,
                "reimport_seconds": again_s}
    finally:
        services.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=3)
    add_common_options(parser, formats=False)
    args = parser.parse_args(argv)
    with open(NOVEL, encoding="utf-8") as f:
        text = f.read()
    commands = [parse_command(d) for d in novel_commands(read_novel(NOVEL), None)]
    made, skipped = stores_for(args.stores.split(","), args.pg_url)
    stores = {store.kind: store for store in made}
    kinds = list(stores)
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for repeat in range(args.repeats):
            for kind, store in stores.items():
                for name in (("reference", "import") if repeat % 2 == 0 else ("import", "reference")):
                    with store.fresh() as url:
                        run = reference(url, commands) if name == "reference" else imported(url, text)
                    runs.setdefault((kind, name), []).append(run)
                    log(f"{kind} repeat {repeat} {name}: {run['events']:,} events in {run['seconds']:.2f} s = "
                        f"{run['events'] / run['seconds']:,.0f} events/s"
                        + (f"; re-import {run['reimport_seconds']:.2f} s" if "reimport_seconds" in run else ""))
    finally:
        for store in made:
            store.close()
    summary: dict[str, Any] = {}
    for kind in kinds:
        ref = runs[(kind, "reference")]
        imp = runs[(kind, "import")]
        ref_eps = statistics.median(r["events"] / r["seconds"] for r in ref)
        imp_eps = statistics.median(r["events"] / r["seconds"] for r in imp)
        summary[kind] = {
            "reference_seconds": statistics.median(r["seconds"] for r in ref), "reference_events": ref[0]["events"],
            "reference_events_per_s": ref_eps, "import_seconds": statistics.median(r["seconds"] for r in imp),
            "import_events": imp[0]["events"], "import_events_per_s": imp_eps, "ratio": imp_eps / ref_eps,
            "reimport_seconds": statistics.median(r["reimport_seconds"] for r in imp),
            "chapters": imp[0]["chapters"], "volumes": imp[0]["volumes"]}
        s = summary[kind]
        log(f"{kind}: import {s['import_seconds']:.2f} s ({imp_eps:,.0f} events/s) against the command path "
            f"{s['reference_seconds']:.2f} s ({ref_eps:,.0f} events/s): {s['ratio']:.2f}x; re-import "
            f"{s['reimport_seconds']:.2f} s")
    report = {"machine": machine_info(args.pg_url if "postgres" in kinds else None), "summary": summary,
              "skipped": skipped, "runs": {f"{k}/{n}": v for (k, n), v in runs.items()}}
    args.format = "json"
    emit(report, args, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
