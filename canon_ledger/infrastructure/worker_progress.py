"""How ``canon worker`` shows its progress: bars with totals on a terminal, JSON lines with
``--format json``."""

from __future__ import annotations

import sys
from typing import Any

from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.progress import bar, bar_to
from canon_ledger.infrastructure.worker import Progress


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

    def applied(self, model: str, share: str, events: int, position: int, kind: str = "story") -> None:
        shown = self.bars.pop(f"{model}/{share}", None)
        if shown is not None:
            shown.close()
        print(f"{model}/{share}: {events} event(s) applied, at {position}", file=sys.stderr)

    def fault(self, model: str, error: str) -> None:
        print(f"{model}: {error} (retrying)", file=sys.stderr)


class JsonProgress(Progress):
    """One JSON line on stdout each time a model catches up or the store fails: no bars."""

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None:
        print(dumps({"model": model, "status": "caught_up", "position": position, "positions": events,
                     "seconds": round(seconds, 3)}), flush=True)

    def applied(self, model: str, share: str, events: int, position: int, kind: str = "story") -> None:
        print(dumps({"model": model, kind: share, "status": "applied", "events": events, "position": position}),
              flush=True)

    def fault(self, model: str, error: str) -> None:
        print(dumps({"model": model, "status": "fault", "error": error}), flush=True)


class IndexProgress(TerminalProgress):
    """A verb's own catch-up of every read model before it returns (``canon import``,
    ``indexing.index_now``): on a terminal (``shown``), a bar of log positions per model while it
    catches up, as the worker shows, and one bar for the texts the vector index embeds, whose
    total (``texts``, counted before the first slice) spans every slice, so its ETA is the
    whole embedding's. It counts what was embedded (``embedded``) and prints nothing else."""

    def __init__(self, shown: bool, texts: int = 0) -> None:
        super().__init__()
        self.shown = shown
        self.texts = texts
        self.embedded = 0  # texts embedded in the slices done
        self._slice = 0  # texts of the slice in flight

    def behind(self, model: str, position: int, goal: int) -> None:
        if self.shown:
            super().behind(model, position, goal)

    def moved(self, model: str, position: int, goal: int) -> None:
        if model == "vectors":  # a slice is written: its texts are embedded
            self.embedded += self._slice
            self._slice = 0
        if self.shown:
            super().moved(model, position, goal)

    def embedding(self, model: str, done: int, total: int) -> None:
        self._slice = total
        if self.shown:
            shown = self._bar(f"{model}:embed", "embed", "text")
            bar_to(shown, self.embedded + done, max(self.texts, self.embedded + total))

    def caught_up(self, model: str, position: int, events: int, seconds: float) -> None:
        for key in [k for k in self.bars if k == model or k.startswith(f"{model}:")]:
            self.bars.pop(key).close()

    def close(self) -> None:
        while self.bars:
            self.bars.popitem()[1].close()
