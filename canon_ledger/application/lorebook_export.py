"""Exporting a story's confirmed canon as a lorebook (``canon export lorebook``).

The entries are those in force at chapter K (``StoryViews.canon_as_of``: confirmed, not
retired, the step with the latest ``valid_from <= K``), optionally of some kinds only, in log
order (an import's entries in their file's order). Each step's version (name, aliases, text,
fields, with ``fields.lorebook`` as the import kept it) is read from the log event at the
step's ``source`` position, in pages over the positions wanted: the read model renders text
and keeps no fields.

Invariant: nothing hidden at K is written. An entry whose ``fields.hidden_until`` is later
than K is left out; a development chain's nodes hidden after K are dropped from its fields.
The export appends nothing to the log; a refusal (unknown story, a chapter out of
bounds, an unknown kind or format) is a ``CanonError``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.application.ports import StoredEvents, StoryReads
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.canon import CanonEntry, require_kind
from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.errors import InvalidCommand, NotFound, unknown_story
from canon_ledger.domain.lorebook_export import TARGETS, ExportedEntry, document, source_format
from canon_ledger.domain.topics import stored_topics

STEP_TOPICS = stored_topics(CanonEntry.Established, CanonEntry.Revised)
PAGE = 500  # canon steps read per query


@dataclass
class LorebookExport:
    """The lorebook document and what went into it."""

    document: dict[str, Any]
    story_id: str
    as_of: int
    format: str
    entries: int
    hidden: int  # entries in force at ``as_of`` but hidden then: left out
    hidden_nodes: int  # development-chain nodes hidden then: dropped from their chains
    by_source: dict[str, int] = field(default_factory=dict)  # entries by the format they were imported from

    def report(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "as_of": self.as_of, "format": self.format, "entries": self.entries,
                "hidden": self.hidden, "hidden_nodes": self.hidden_nodes, "by_source": self.by_source}


def export_lorebook(views: StoryReads, log: StoredEvents, story_id: str, as_of: int, target: str,
                    kinds: Sequence[str] = ()) -> LorebookExport:
    """The story's canon in force at chapter ``as_of`` as a ``target`` lorebook (``TARGETS``)."""
    if target not in TARGETS:
        raise InvalidCommand("invalid_field", f"format must be one of {', '.join(TARGETS)}", "format")
    if isinstance(as_of, bool) or not isinstance(as_of, int) or not 1 <= as_of <= MAX_CHAPTER:
        raise InvalidCommand("invalid_field", f"as_of must be a chapter number, 1..{MAX_CHAPTER:,}", "as_of")
    for kind in kinds:
        require_kind(kind)
    head = views.story_head(story_id)
    if head is None:
        raise unknown_story(story_id)
    steps = sorted((row for row in views.canon_as_of(story_id, as_of) if not kinds or row["kind"] in kinds),
                   key=lambda row: int(row["source"]))
    versions = _versions(log, [int(row["source"]) for row in steps])
    shown: list[ExportedEntry] = []
    hidden = hidden_nodes = 0
    for row in steps:
        version = versions[int(row["source"])]
        fields = dict(version.get("fields") or {})
        if hidden_at(fields.get("hidden_until"), as_of):
            hidden += 1
            continue
        nodes = fields.get("nodes")
        if isinstance(nodes, list):
            fields["nodes"] = [n for n in nodes if not (isinstance(n, dict) and hidden_at(n.get("hidden_until"), as_of))]
            hidden_nodes += len(nodes) - len(fields["nodes"])
        shown.append(ExportedEntry(row["kind"], row["key"], {**version, "fields": fields}))
    doc = document(target, shown, story_id=story_id, name=str(head.get("title") or story_id))
    return LorebookExport(doc, story_id, as_of, target, len(shown), hidden, hidden_nodes,
                          dict(sorted(Counter(source_format(e) for e in shown).items())))


def _versions(log: StoredEvents, positions: list[int]) -> dict[int, dict[str, Any]]:
    """The ``version`` of the canon step at each position, read in pages of canon steps, each
    starting at the next position still wanted (``NotFound`` if one holds no canon step: the
    read model is ahead of, or apart from, this log)."""
    wanted = sorted(set(positions))
    wanted_set = set(wanted)
    found: dict[int, dict[str, Any]] = {}
    i = 0
    while i < len(wanted):
        page = log.records(wanted[i], PAGE, wanted[-1], STEP_TOPICS)
        for record in page:
            if record.id in wanted_set:
                found[record.id] = dict(log.decode(record).version)
        if len(page) < PAGE:
            break
        i = bisect_right(wanted, page[-1].id)
    missing = [p for p in wanted if p not in found]
    if missing:
        raise NotFound("canon_step_not_in_log", f"log position {missing[0]} holds no canon step (rebuild the read "
                       "models: canon rebuild)", None)
    return found
