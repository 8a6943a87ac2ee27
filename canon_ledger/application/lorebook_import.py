"""Importing a lorebook: each enabled entry becomes a ``propose_canon`` (and, asked, its
``confirm_canon``), in atomic batches.

An entry's kind is ``kind`` (default ``world_rule``); its key a slug of its name, made unique
within the file; its aliases its keys; its text its content; its ``fields`` keep the source's
activation settings whole, under ``lorebook`` (``{"format": ..., "entry": {...}}``). Proposal
and command ids derive from the story and the entry's content, so importing the same file again
appends nothing, and an entry whose content changed is proposed anew (a revision once
confirmed). Every command is parsed, bounds checked, before the first batch is applied.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.lorebook import Lorebook, slug

BATCH_ENTRIES = 100


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def commands(book: Lorebook, story_id: str, *, kind: str = "world_rule", confirm: bool = False,
             valid_from: int = 1, new_story: bool = False, title: str | None = None) -> list[list[Any]]:
    """The parsed commands, one list per atomic batch (``InvalidCommand`` if any is out of bounds);
    with ``new_story``, the first batch starts the story (titled ``title``), as a manuscript's does."""
    used: dict[str, int] = {}
    dicts: list[list[dict[str, Any]]] = []
    if new_story:
        dicts.append([{"type": "start_story", "command_id": f"lore:start:{_digest(story_id)}", "story_id": story_id,
                       "title": title or story_id, "style_guardrails": [], "output_contract": ""}])
    for i, entry in enumerate(book.enabled):
        base = slug(entry.name)
        used[base] = used.get(base, 0) + 1
        key = base if used[base] == 1 else f"{base}-{used[base]}"
        propose = {"type": "propose_canon", "story_id": story_id, "kind": kind, "key": key, "name": entry.name,
                   "aliases": list(dict.fromkeys(entry.keys)), "text": entry.text, "valid_from": valid_from,
                   "fields": {"lorebook": {"format": book.format, "entry": entry.source}}}
        proposal = f"lore-{_digest([story_id, propose])}"
        propose |= {"proposal_id": proposal, "command_id": f"lore:propose:{proposal}"}
        pair = [propose]
        if confirm:
            pair.append({"type": "confirm_canon", "story_id": story_id, "proposal_id": proposal,
                         "command_id": f"lore:confirm:{proposal}"})
        if i % BATCH_ENTRIES == 0 and not (i == 0 and new_story):
            dicts.append([])
        dicts[-1].extend(pair)
    return [[parse_command(c) for c in batch] for batch in dicts]


@dataclass
class LorebookReport:
    story_id: str
    format: str
    entries: int
    disabled: list[str] = field(default_factory=list)  # names of the entries not imported
    counts: dict[str, int] = field(default_factory=dict)
    failed: dict[str, Any] | None = None
    position: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "format": self.format, "entries": self.entries, "disabled": self.disabled,
                "counts": self.counts, "failed": self.failed, "position": self.position}


def import_lorebook(ledger: CanonLedger, book: Lorebook, story_id: str, *, kind: str = "world_rule",
                    confirm: bool = False, valid_from: int = 1, new_story: bool = False,
                    title: str | None = None) -> LorebookReport:
    """Apply the lorebook's commands; stops at the first batch refused (importing again resumes).
    ``new_story``: the story is not started yet, and the first batch starts it."""
    batches = commands(book, story_id, kind=kind, confirm=confirm, valid_from=valid_from, new_story=new_story,
                       title=title)
    report = LorebookReport(story_id, book.format, len(book.enabled), [e.name for e in book.disabled])
    for batch in batches:
        results = ledger.apply(batch, atomic=True)
        for result in results:
            report.counts[result.status] = report.counts.get(result.status, 0) + 1
        refused = next((r for r in results if not r.ok), None)
        if refused is not None:
            report.failed = refused.as_dict()
            break
    report.position = ledger.position()
    return report
