"""The CLI verbs of live projection: ``canon worker`` (follow the log, keep read models
current) and ``canon status`` (how far each read model trails the log)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from canon_ledger.infrastructure.cli.parsing import add_verb, bounded
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.progress import quiet
from canon_ledger.infrastructure.worker import SPLIT_AFTER

MODELS = ("canon", "authoring", "knowledge", "retrieval", "vectors")


def cmd_worker(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.worker import Progress, ProjectionWorker
    from canon_ledger.infrastructure.worker_progress import JsonProgress, TerminalProgress

    # A SIGTERM while the store and models load (a service manager stopping a worker that has
    # just started) is kept, and the worker stops as soon as it exists: exit 0, as any stop.
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: early.append(signal.SIGTERM))
    services = bootstrap(args.db, indexed_by_worker=True, page_size=args.page_size)  # None: each model's own
    progress: Progress = JsonProgress() if args.format == "json" else TerminalProgress() if not quiet(args.format) \
        else Progress()
    worker = ProjectionWorker(services, args.projection or None, progress=progress, split=args.split,
                              split_after=args.split_after)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop(0))  # finish the page in flight, then leave
    if early:
        worker.stop(0)
    if not quiet(args.format):
        print(f"canon worker on {services.config.display}: {', '.join(worker.names)}"
              + (" (until caught up)" if args.once else " (Ctrl-C to stop)"), file=sys.stderr)
    try:
        worker.run(until=worker.caught_up if args.once else None)
    except KeyboardInterrupt:
        pass
    finally:
        worker.stop(0)
        services.close()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db, indexed_by_worker=True) as services:  # a status read catches nothing up
        end = services.ledger.event_log.position()
        statuses = services.status(explain_outdated=True)  # the verb that explains an outdated store
        outdated = [name for name, s in statuses.items() if s.outdated is not None]
        body = {"position": end, "read_models": {name: s.as_dict() for name, s in statuses.items()},
                "embedder": services.embedder_name, "quarantined": len(services.quarantined()),
                "outdated": outdated, "at": time.time()}
    if args.format == "json":
        print(dumps(body))
        return 0
    print(f"log at position {end}; embedder {body['embedder']}; {body['quarantined']} event(s) quarantined")
    for name, s in statuses.items():
        if s.outdated is not None:
            tag, version, current = s.outdated
            print(f"  {name:<10} at {s.position:<8} OUTDATED: build {tag} is schema version {version}; this "
                  f"version reads schema version {current}: run `canon rebuild`")
            continue
        behind = f"{s.pending}{'+' if s.capped else ''} event(s) behind, {s.seconds:.1f} s" if s.pending else "current"
        texts = f"; {s.texts} text(s) waiting" if s.texts else ""
        print(f"  {name:<10} at {s.position:<8} {behind}{texts}")
        for share in s.shares:  # a split build: what workers took past its low-water mark
            print(f"    {share.share:<20} at {share.position:<8} {share.behind} position(s) behind the log")
    if outdated:
        print(f"an upgrade outdated {', '.join(outdated)}: what reads them is refused with read_model_outdated "
              "until `canon rebuild` has made current builds (the log is untouched: `canon audit` still replays it)")
    return 0


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "worker", common,
                 "follow the log and keep read models current (the vector index embeds here)")
    p.add_argument("--projection", action="append", choices=MODELS, metavar="NAME",
                   help=f"only this read model (repeat for several; default: all of {', '.join(MODELS)})")
    p.add_argument("--once", action="store_true", help="catch up to the log's end, then exit")
    p.add_argument("--split", action="store_true",
                   help="share the work with other `canon worker --split` processes (PostgreSQL): canon and "
                        "authoring story by story, knowledge, retrieval and vectors collection by collection, each "
                        "share claimed by one worker at a time")
    p.add_argument("--split-after", type=bounded(0, 1_000_000_000), default=SPLIT_AFTER, metavar="N",
                   help=f"with --split: share a model by story or collection only while it trails the log by more than N "
                        f"positions (default {SPLIT_AFTER}; closer, one whole-model step is cheaper)")
    p.add_argument("--page-size", type=bounded(1, 100_000), metavar="N",
                   help="events per read-model transaction, 1..100,000 (default: each read model's own size)")
    p.set_defaults(run=cmd_worker)

    p = add_verb(verbs, "status", common,
                 "each read model's position, how far it trails the log, the embedding backlog")
    p.set_defaults(run=cmd_status)
