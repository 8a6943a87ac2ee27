"""The store's keeping: ``quarantine`` lists the events a read model could not apply (skipped,
with their error; a rebuild retries them), and ``demo`` fills a store with the bundled sample
serial and shows it."""

from __future__ import annotations

import argparse
from typing import Any

from canon_ledger.infrastructure.cli.errors import OK
from canon_ledger.infrastructure.cli.output import emit
from canon_ledger.infrastructure.cli.parsing import add_verb


def cmd_quarantine(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        for name in ("canon", "authoring", "knowledge", "retrieval"):  # what the log holds now
            services.read_models[name].catch_up_serving()
        rows = services.quarantined()
    if args.format == "json":
        for row in rows:
            emit(row)
        return OK
    if not rows:
        print("no quarantined events: every read model applied every event")
    for row in rows:
        print(f"{row['projection']:<28} {row['position']:>8}  {row['event_type']:<24} {row['scope'] or '-':<20} "
              f"{row['error']}")
    return OK


def cmd_demo(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.demo import run_demo

    with bootstrap(args.db) as services:
        return run_demo(services, args.format)


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "quarantine", common,
                 "events a read model could not apply (skipped, with their error); a rebuild retries them")
    p.set_defaults(run=cmd_quarantine)

    p = add_verb(verbs, "demo", common, "apply the bundled sample serial to an embedded store and show it",
                 "Apply the bundled sample serial to a store (default sqlite:///canon-demo.db, created if\n"
                 "missing), then show its packets, an audit, a search and a rebuild.")
    p.set_defaults(run=cmd_demo)
