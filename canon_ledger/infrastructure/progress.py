"""Progress bars for long work (ingest, embedding, rebuilds, a worker's catch-up): on stderr,
on a terminal only, never with ``--format json``; each with a total, so it shows an ETA."""

from __future__ import annotations

import sys
from typing import Any


def quiet(fmt: str) -> bool:
    """No bar: JSON output was asked for, or stderr is not a terminal."""
    return fmt == "json" or not sys.stderr.isatty()


def bar(desc: str, unit: str, *, disable: bool, total: int | None = None) -> Any:
    from tqdm import tqdm

    return tqdm(desc=desc, unit=unit, total=total, disable=disable, file=sys.stderr)


def bar_to(progress: Any, done: int, total: int) -> None:
    """Move ``progress`` to ``done`` of ``total`` (a total learnt, or grown, on the way)."""
    progress.total = max(total, 1)
    progress.update(done - progress.n)
