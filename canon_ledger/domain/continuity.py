"""The continuity check's data: a canon entry's timeline as the check reads it, and what it finds.

The rules live in ``domain.continuity_rules``; this module holds the shapes every layer shares:
``Step`` (one step of an entry's timeline, read from the canon read model), ``Evidence`` and
``Finding`` (the check's JSON contract), and ``facts_of`` (which of a version's ``fields`` are
structured facts a draft can contradict).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from canon_ledger.domain.canon_rules import hidden_at, holds_at

# Fields that steer the ledger rather than state a fact of the story.
CONTROL_FIELDS = frozenset({"hidden_until", "recall", "lorebook", "nodes", "secret"})
MAX_FACT = 200  # characters: a longer string field is prose, not a fact a sentence can contradict
MAX_FACTS = 64  # facts kept per version

ERROR, WARNING = "error", "warning"


def facts_of(fields: dict[str, Any]) -> dict[str, Any]:
    """The structured facts of a version's ``fields``: scalar values (a string of at most
    MAX_FACT characters, a number, a boolean) under a key that is not a control field, at most
    MAX_FACTS of them in key order. ``{"eyes": "grey", "age": 17, "state": "dead"}``."""
    out: dict[str, Any] = {}
    for name in sorted(fields):
        value = fields[name]
        if name in CONTROL_FIELDS or not isinstance(name, str) or len(name) > 80:
            continue
        if isinstance(value, str) and value.strip() and len(value) <= MAX_FACT or (
                isinstance(value, (int, float)) and not isinstance(value, bool) and value == value) or isinstance(
                value, bool):
            out[name] = value
            if len(out) == MAX_FACTS:
                break
    return out


@dataclass(frozen=True)
class Step:
    """One step of an entry's timeline, as the canon read model holds it: a version
    (``retired`` False) or a retirement, in force from ``valid_from`` until ``valid_to`` (None:
    still in force; equal to ``valid_from``: superseded before it took effect). ``keys``: what
    recall matches for it (its rule's plain keys, or its name and aliases). ``text``: its rendered
    canon text; ``source``: the log position of the event that made it."""

    kind: str
    key: str
    step: int
    valid_from: int
    valid_to: int | None
    retired: bool
    name: str
    aliases: tuple[str, ...]
    keys: tuple[str, ...]
    state: str | None
    hidden_until: int | None
    text: str
    source: int
    facts: dict[str, Any] = field(default_factory=dict)
    secret: bool = False  # fields.secret: known only to the characters recorded knowing it

    def holds_at(self, chapter: int) -> bool:
        return holds_at(self.valid_from, self.valid_to, chapter)


@dataclass(frozen=True)
class Evidence:
    """A canon step that proves a finding: its text, the chapter it takes effect, and the log
    position of its event (``source``). ``hidden_until``: the step's, when it has one."""

    text: str
    valid_from: int
    source: int
    hidden_until: int | None = None

    def shown_at(self, chapter: int) -> bool:
        """May a reader at ``chapter`` (a worker's packet) see this step's text: it is in force
        by then and not hidden past it."""
        return self.valid_from <= chapter and not hidden_at(self.hidden_until, chapter)

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "valid_from": self.valid_from, "source": self.source,
                "hidden_until": self.hidden_until}


@dataclass(frozen=True)
class Finding:
    """One contradiction between a draft and the canon in force at its chapter. ``start``/``end``:
    the span of the draft text it is about (Python string indices, end exclusive); ``id``: a
    digest of the draft, the type, the entry, the span and the evidence positions, stable for
    the same draft and canon."""

    id: str
    type: str
    severity: str
    kind: str
    key: str
    name: str
    start: int
    end: int
    text: str
    evidence: tuple[Evidence, ...]
    message: str

    def withheld(self, chapter: int) -> Finding:
        """This finding as a reader at ``chapter`` may see it: the text of evidence not yet in
        force or hidden past the chapter (a spoiler's secret, a later version) withheld, its
        chapter and position kept. A worker's packet and a key that may not see spoilers get this."""
        if all(e.shown_at(chapter) for e in self.evidence):
            return self
        evidence = tuple(e if e.shown_at(chapter) else replace(e, text=withheld_text(e, chapter))
                         for e in self.evidence)
        return replace(self, evidence=evidence)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "severity": self.severity,
                "entry": {"kind": self.kind, "key": self.key, "name": self.name},
                "span": {"start": self.start, "end": self.end, "text": self.text},
                "evidence": [e.as_dict() for e in self.evidence], "message": self.message}


def withheld_text(e: Evidence, chapter: int) -> str:
    why = (f"hidden until chapter {e.hidden_until}" if hidden_at(e.hidden_until, chapter)
           else f"in canon from chapter {e.valid_from}")
    return f"(withheld at chapter {chapter}: {why}; the author sees it in `canon check`)"
