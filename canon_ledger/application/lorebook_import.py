"""Importing a lorebook: each enabled entry becomes a ``propose_canon`` (and, asked, its
``confirm_canon``), in atomic batches.

An entry's kind is ``kind`` (default ``world_rule``); its key a slug of its name, made unique
within the file; its aliases its keys; its text its content; its ``fields`` keep the source's
activation settings whole, under ``lorebook`` (``{"format": ..., "entry": {...}}``). Proposal
and command ids derive from the story and the entry's content, so importing the same file again
appends nothing, and an entry whose content changed is proposed anew (a revision once
confirmed).

Every entry's commands are parsed, bounds checked (``domain.commands``, the bounds of
``domain.bounds``), before the first batch is applied (``plan``). An entry out of bounds (a
content over the canon text limit, too many keys, a key too long, settings too large) is
refused alone, named by its index in the file and its name; the others import, and the report
lists the refusal (``LorebookReport.refused``). Its key is still taken, so the others keep
theirs when it is mended and imported again. ``plan`` is also the dry run: what each entry
would become, written nowhere.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain import recall
from canon_ledger.domain.commands import Command, parse_command
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.lorebook import Budget, LoreEntry, Lorebook, budget, slug

BATCH_ENTRIES = 100


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@dataclass(frozen=True)
class PlannedEntry:
    """One entry of the file as the import brings it: where the file lists it, the canon entry
    it becomes (kind, key, name, aliases), its activation as packets read it (``rule``), its
    budget settings as its source wrote them, and its commands, parsed; or, when one of them is
    out of bounds, no commands and the ``refusal``. A disabled entry has neither."""

    entry: LoreEntry
    kind: str
    key: str
    rule: recall.Rule
    budget: Budget
    commands: tuple[Command, ...] = ()
    refusal: CanonError | None = None

    @property
    def activation(self) -> str:
        """``never``, ``always-on``, ``selective`` (secondary keys too), ``keys``, or ``no keys``."""
        r = self.rule
        if r.never:
            return "never"
        if r.constant:
            return "always-on"
        if not r.keys:
            return "no keys"
        return "selective" if r.secondary else "keys"

    @property
    def status(self) -> str:
        """``import``, ``disabled`` (not imported) or ``refused`` (out of bounds, not imported)."""
        if not self.entry.enabled:
            return "disabled"
        return "refused" if self.refusal is not None else "import"

    def refused(self) -> dict[str, Any]:
        """The refusal, naming the entry (``refusal`` is set)."""
        assert self.refusal is not None
        return {"index": self.entry.index, "uid": self.entry.uid, "name": self.entry.name, "key": self.key,
                **self.refusal.as_dict()}

    def as_dict(self) -> dict[str, Any]:
        r = self.rule
        return {"index": self.entry.index, "uid": self.entry.uid, "name": self.entry.name, "status": self.status,
                "kind": self.kind, "key": self.key, "keys": list(dict.fromkeys(self.entry.keys)),
                "activation": self.activation, "secondary_keys": list(r.secondary),
                "logic": r.logic if r.secondary else None, "chars": len(self.entry.text), "order": self.budget.order,
                "ignore_budget": self.budget.ignore_budget,
                "refusal": self.refusal.as_dict() if self.refusal is not None else None}


def plan(book: Lorebook, story_id: str, *, kind: str = "world_rule", confirm: bool = False,
         valid_from: int = 1) -> list[PlannedEntry]:
    """Every entry of ``book``, in file order, as the import brings it (pure: nothing is written)."""
    used: dict[str, int] = {}
    out = []
    for entry in book.entries:
        lore = {"format": book.format, "entry": entry.source}
        rule = recall.rule(entry.name, entry.keys, {"lorebook": lore}) or recall.default_rule(entry.name, entry.keys)
        settings = budget(book.format, entry.source)
        if not entry.enabled:
            out.append(PlannedEntry(entry, kind, "", rule, settings))
            continue
        base = slug(entry.name)
        used[base] = used.get(base, 0) + 1
        key = base if used[base] == 1 else f"{base}-{used[base]}"
        propose = {"type": "propose_canon", "story_id": story_id, "kind": kind, "key": key, "name": entry.name,
                   "aliases": list(dict.fromkeys(entry.keys)), "text": entry.text, "valid_from": valid_from,
                   "fields": {"lorebook": lore}}
        proposal = f"lore-{_digest([story_id, propose])}"
        propose |= {"proposal_id": proposal, "command_id": f"lore:propose:{proposal}"}
        pair = [propose]
        if confirm:
            pair.append({"type": "confirm_canon", "story_id": story_id, "proposal_id": proposal,
                         "command_id": f"lore:confirm:{proposal}"})
        try:
            out.append(PlannedEntry(entry, kind, key, rule, settings, tuple(parse_command(c) for c in pair)))
        except CanonError as e:
            out.append(PlannedEntry(entry, kind, key, rule, settings, refusal=e))
    return out


def batches(planned: list[PlannedEntry], story_id: str, *, new_story: bool = False,
            title: str | None = None) -> list[list[Command]]:
    """The commands of the entries that import, one list per atomic batch of ``BATCH_ENTRIES``
    entries; with ``new_story``, the first batch starts the story (titled ``title``), as a
    manuscript's does (``InvalidCommand`` if that command is out of bounds)."""
    out: list[list[Command]] = []
    if new_story:
        out.append([parse_command({"type": "start_story", "command_id": f"lore:start:{_digest(story_id)}",
                                   "story_id": story_id, "title": title or story_id, "style_guardrails": [],
                                   "output_contract": ""})])
    for i, p in enumerate(p for p in planned if p.commands):
        if i % BATCH_ENTRIES == 0 and not (i == 0 and new_story):
            out.append([])
        out[-1].extend(p.commands)
    return out


def commands(book: Lorebook, story_id: str, *, kind: str = "world_rule", confirm: bool = False,
             valid_from: int = 1, new_story: bool = False, title: str | None = None) -> list[list[Command]]:
    """The parsed commands of the entries in bounds, one list per atomic batch (``batches``)."""
    return batches(plan(book, story_id, kind=kind, confirm=confirm, valid_from=valid_from), story_id,
                   new_story=new_story, title=title)


@dataclass
class LorebookReport:
    story_id: str
    format: str
    entries: int
    disabled: list[str] = field(default_factory=list)  # names of the entries not imported
    counts: dict[str, int] = field(default_factory=dict)
    failed: dict[str, Any] | None = None
    position: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)  # entries out of bounds: index, uid, name, key, error

    def as_dict(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "format": self.format, "entries": self.entries, "disabled": self.disabled,
                "refused": self.refused, "counts": self.counts, "failed": self.failed, "position": self.position}


def import_lorebook(ledger: CanonLedger, book: Lorebook, story_id: str, *, kind: str = "world_rule",
                    confirm: bool = False, valid_from: int = 1, new_story: bool = False,
                    title: str | None = None) -> LorebookReport:
    """Apply the commands of the lorebook's entries in bounds; stops at the first batch refused
    (importing again resumes). ``new_story``: the story is not started yet, and the first batch
    starts it. Entries out of bounds are in ``refused``, the rest is applied."""
    planned = plan(book, story_id, kind=kind, confirm=confirm, valid_from=valid_from)
    todo = batches(planned, story_id, new_story=new_story, title=title)
    report = LorebookReport(story_id, book.format, len(book.enabled), [e.name for e in book.disabled],
                            refused=[p.refused() for p in planned if p.refusal is not None])
    for batch in todo:
        results = ledger.apply(batch, atomic=True)
        for result in results:
            report.counts[result.status] = report.counts.get(result.status, 0) + 1
        refused = next((r for r in results if not r.ok), None)
        if refused is not None:
            report.failed = refused.as_dict()
            break
    report.position = ledger.event_log.position()
    return report
