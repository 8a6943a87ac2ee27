"""The CLI verbs of live projection: ``canon worker`` (follow the log, keep read models
current) and ``canon status`` (how far each read model trails the log)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from infrastructure.jsonout import dumps
from infrastructure.progress import bar, bar_to, quiet
from infrastructure.worker import Progress, ProjectionWorker
from projections.runner import PAGE_SIZE

MODELS = ("canon", "authoring", "knowledge", "retrieval", "vectors")


class TerminalProgress(Progress):
    """A bar per model while it catches up (log positions, with a total and an ETA), and one
    for the texts the vector index embeds."""

    def __init__(self) -> None:
        self.bars: dict[str, Any] = {}

    def _bar(self, key: str, desc: str, unit: str) -> Any:
        if key not in self.bars:
            self.bars[key] = bar(desc, unit, disable=False)
        return self.bars[key]

    def behind(self, model: str, position: int, goal: int) -> None:
        shown = self._bar(model, model, "pos")
        shown.n = position
        bar_to(shown, position, goal)

    def moved(self, model: str, position: int, goal: int) -> None:
        bar_to(self._bar(model, model, "pos"), position, goal)

    def embedding(self, model: str, done: int, total: int) -> None:
        shown = self._bar(f"{model}:embed", "embed", "text")
        if done < shown.n:  # a new slice
            shown.reset(total)
        bar_to(shown, done, total)

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None:
        for key in [k for k in self.bars if k == model or k.startswith(f"{model}:")]:
            self.bars.pop(key).close()
        print(f"{model}: caught up at {position} ({events} positions in {seconds:.1f} s)", file=sys.stderr)

    def fault(self, model: str, error: str) -> None:
        print(f"{model}: {error} (retrying)", file=sys.stderr)


class JsonProgress(Progress):
    """One JSON line on stdout each time a model catches up or the store fails: no bars."""

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None:
        print(dumps({"model": model, "status": "caught_up", "position": position, "positions": events,
                     "seconds": round(seconds, 3)}), flush=True)

    def fault(self, model: str, error: str) -> None:
        print(dumps({"model": model, "status": "fault", "error": error}), flush=True)


def cmd_worker(args: argparse.Namespace) -> int:
    from infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db, fed=True, page_size=args.page_size)
    progress: Progress = JsonProgress() if args.format == "json" else TerminalProgress() if not quiet(args.format) \
        else Progress()
    worker = ProjectionWorker(services, args.projection or None, progress=progress)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop(0))  # finish the page in flight, then leave
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
    from infrastructure.bootstrap import bootstrap

    services = bootstrap(args.db, fed=True)  # a status read catches nothing up
    try:
        end = services.ledger.position()
        statuses = services.status()
        body = {"position": end, "read_models": {name: s.as_dict() for name, s in statuses.items()},
                "embedder": services.embedder.name, "quarantined": len(services.quarantined()),
                "at": time.time()}
    finally:
        services.close()
    if args.format == "json":
        print(dumps(body))
        return 0
    print(f"log at position {end}; embedder {body['embedder']}; {body['quarantined']} event(s) quarantined")
    for name, s in statuses.items():
        behind = f"{s.pending}{'+' if s.capped else ''} event(s) behind, {s.seconds:.1f} s" if s.pending else "current"
        texts = f"; {s.texts} text(s) waiting" if s.texts else ""
        print(f"  {name:<10} at {s.position:<8} {behind}{texts}")
    return 0


def add_verbs(verbs: Any, common: argparse.ArgumentParser, bounded: Callable[[int, int], Any]) -> None:
    p = verbs.add_parser("worker", parents=[common],
                         help="follow the log and keep read models current (the vector index embeds here)")
    p.add_argument("--projection", action="append", choices=MODELS, metavar="NAME",
                   help=f"only this read model (repeat for several; default: all of {', '.join(MODELS)})")
    p.add_argument("--once", action="store_true", help="catch up to the log's end, then exit")
    p.add_argument("--page-size", type=bounded(1, 100_000), default=PAGE_SIZE, metavar="N",
                   help=f"events per read-model transaction (default {PAGE_SIZE})")
    p.set_defaults(run=cmd_worker)

    p = verbs.add_parser("status", parents=[common],
                         help="each read model's position, how far it trails the log, the embedding backlog")
    p.set_defaults(run=cmd_status)
