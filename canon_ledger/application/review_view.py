"""What the review queue shows of a pending proposal, computed from read-view rows (pure, no I/O).

A card sets the whole proposal (name, valid_from, aliases, ``hidden_until``, text, every field,
tags) beside the confirmed version it would follow: the step of the entry in force at the
proposal's ``valid_from`` (``domain.canon.in_force``, the rule of ``CanonEntry.as_of``). Each
attribute is one row marked ``same``, ``added``, ``removed`` or ``changed``; a list marks each
element, a text marks each word (``difflib``; lines for long texts). A card also says when the
proposal would hold once confirmed (it is confirmed after every step there is), and names the
other pending proposals for the same entry: two proposals for a new (kind, key) are not two new
entries, the one confirmed second revises the first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from canon_ledger.domain.canon_rules import InForce, in_force

SAME, ADDED, REMOVED, CHANGED = "same", "added", "removed", "changed"
WORD_DIFF_TOKENS = 4_000  # a text of more tokens (words and the spaces between) is compared line by line
LINE_DIFF_LINES = 4_000  # ... and one of more lines than this, as a whole
HIDDEN = "hidden_until"

Part = tuple[str, str]  # (same | added | removed, the text shown)


@dataclass(frozen=True)
class Row:
    """One attribute of the proposal beside the confirmed version's: what each side shows, as
    parts marked ``same``/``added``/``removed`` (the confirmed side has no ``added``, the
    proposed side no ``removed``), and the attribute's change."""

    name: str
    change: str
    before: list[Part]
    after: list[Part]


@dataclass
class Card:
    proposal: dict[str, Any]
    current: dict[str, Any] | None  # the confirmed step in force at the proposal's valid_from (a retirement too)
    current_span: InForce | None
    rows: list[Row]
    would: InForce  # when the proposal would hold, confirmed next
    overridden_by: dict[str, Any] | None  # the confirmed step that takes over from ``would.end``
    first_from: int | None  # the entry's earliest valid_from (None: no confirmed step)
    competing: list[str] = field(default_factory=list)  # other pending proposals for the same entry
    rendered: bool = False  # the confirmed side is the canon row's rendered text (no version as proposed)

    @property
    def new_entry(self) -> bool:
        return self.first_from is None

    @property
    def changes(self) -> int:
        return sum(row.change != SAME for row in self.rows)


def tokens(text: str) -> list[str]:
    """Words, runs of whitespace and single punctuation marks, in order: joined, they give
    ``text`` back ("ward;" is "ward" and ";": a word keeps its mark when only the stop changed)."""
    return re.findall(r"\w+|\s+|[^\w\s]", text)


def text_diff(before: str, after: str) -> tuple[list[Part], list[Part]]:
    """Each side's parts: the words kept, removed (before) and added (after). Word by word up to
    ``WORD_DIFF_TOKENS`` tokens a side, then line by line up to ``LINE_DIFF_LINES`` lines, then
    whole (the cost of ``SequenceMatcher`` grows with the product of the two lengths)."""
    if before == after:
        return [(SAME, before)] if before else [], [(SAME, after)] if after else []
    a, b = tokens(before), tokens(after)
    if max(len(a), len(b)) > WORD_DIFF_TOKENS:
        a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
        if max(len(a), len(b)) > LINE_DIFF_LINES:
            return ([(REMOVED, before)] if before else []), ([(ADDED, after)] if after else [])
    old: list[Part] = []
    new: list[Part] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            _add(old, SAME, a[i1:i2])
            _add(new, SAME, b[j1:j2])
            continue
        _add(old, REMOVED, a[i1:i2])
        _add(new, ADDED, b[j1:j2])
    return _fold(old, REMOVED), _fold(new, ADDED)


def _fold(parts: list[Part], mark: str) -> list[Part]:
    """Whitespace kept between two changed runs joins them: "since the winter" is one removal,
    not three with kept spaces between."""
    out: list[Part] = []
    for i, (kind, text) in enumerate(parts):
        if (kind == SAME and not text.strip() and 0 < i < len(parts) - 1
                and parts[i - 1][0] == mark and parts[i + 1][0] == mark):
            kind = mark
        _add(out, kind, [text])
    return out


def _add(parts: list[Part], mark: str, pieces: list[str]) -> None:
    text = "".join(pieces)
    if not text:
        return
    if parts and parts[-1][0] == mark:
        parts[-1] = (mark, parts[-1][1] + text)
    else:
        parts.append((mark, text))


def shown(value: Any) -> str:
    """A field's value as the card shows it: a string as itself, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _scalar(name: str, before: Any, after: Any, show: Any = shown) -> Row:
    if before is None and after is None:
        return Row(name, SAME, [], [])
    if before is None:
        return Row(name, ADDED, [], [(ADDED, show(after))])
    if after is None:
        return Row(name, REMOVED, [(REMOVED, show(before))], [])
    if before == after:
        return Row(name, SAME, [(SAME, show(before))], [(SAME, show(after))])
    return Row(name, CHANGED, [(REMOVED, show(before))], [(ADDED, show(after))])


def _listed(name: str, before: list[Any] | None, after: list[Any], existed: bool) -> Row:
    """A list compared element by element (order kept; an element moved is not a change)."""
    old = [shown(x) for x in before or []]
    new = [shown(x) for x in after]
    gone, came = [x for x in old if x not in new], [x for x in new if x not in old]
    change = SAME if not gone and not came else ADDED if not existed or not old else REMOVED if not new else CHANGED
    return Row(name, change, [(REMOVED if x in gone else SAME, x) for x in old],
               [(ADDED if x in came else SAME, x) for x in new])


def _text(before: str | None, after: str) -> Row:
    if before is None:
        return Row("text", ADDED, [], [(ADDED, after)]) if after else Row("text", SAME, [], [])
    old, new = text_diff(before, after)
    return Row("text", SAME if before == after else CHANGED if before and after else ADDED if after else REMOVED,
               old, new)


def _chapter(value: Any) -> str:
    return f"ch. {value}"


def compare(proposal: dict[str, Any], current: dict[str, Any] | None) -> list[Row]:
    """The proposal's attributes beside ``current``'s (a confirmed version as proposed, with
    ``name``, ``valid_from``, ``aliases``, ``text``, ``fields``, ``tags``; None, or a retirement:
    nothing to compare with, every attribute is ``added``)."""
    version = current if current is not None and not current.get("retired") else None
    fields_before: dict[str, Any] = dict(version.get("fields") or {}) if version else {}
    fields_after: dict[str, Any] = dict(proposal.get("fields") or {})
    rows = [
        _scalar("name", version["name"] if version else None, proposal["name"]),
        _scalar("valid_from", version["valid_from"] if version else None, proposal["valid_from"], _chapter),
        _listed("aliases", version.get("aliases") if version else None, list(proposal.get("aliases") or []),
                version is not None),
        _scalar(HIDDEN, fields_before.get(HIDDEN), fields_after.get(HIDDEN), _chapter),
        _text(version.get("text") if version else None, str(proposal.get("text") or "")),
    ]
    for name in sorted(set(fields_before) | set(fields_after)):
        if name != HIDDEN:
            rows.append(_scalar(f"fields.{name}", fields_before.get(name), fields_after.get(name)))
    rows.append(_listed("tags", version.get("tags") if version else None, list(proposal.get("tags") or []),
                        version is not None))
    return rows


def competing(proposals: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """For each pending proposal, the other pending proposals for the same (kind, key), in order."""
    by_entry: dict[tuple[str, str], list[str]] = {}
    for p in proposals:
        by_entry.setdefault((p["kind"], p["key"]), []).append(p["proposal_id"])
    return {pid: [other for other in ids if other != pid] for ids in by_entry.values() for pid in ids}


def card(proposal: dict[str, Any], steps: list[dict[str, Any]], others: Sequence[str] = ()) -> Card:
    """The card of ``proposal`` given its entry's confirmed ``steps`` in confirmation order
    (``StoryViews.review``'s rows: ``valid_from``, ``retired``, the version as proposed)."""
    timeline = [(s["valid_from"], bool(s["retired"])) for s in steps]
    spans = in_force(timeline)  # as confirmed now
    would = in_force([*timeline, (proposal["valid_from"], False)])[-1]  # confirmed next, after every step there is
    at = proposal["valid_from"]
    index = next((i for i, span in enumerate(spans) if span.holds_at(at)), None)
    current = steps[index] if index is not None else None
    rendered = current is not None and not current["retired"] and current.get("text") is None
    if rendered:  # no version as proposed beside the step (a read model older than its log): what packets read
        assert current is not None
        current = {**current, "text": current.get("rendered"), "aliases": current.get("aliases") or [], "fields": {},
                   "tags": []}
    overridden = None
    if would.end is not None:  # the step that takes over: the first by (valid_from, step) after the proposal
        overridden = min((s for s in steps if s["valid_from"] == would.end), key=lambda s: s["step"], default=None)
    return Card(proposal, current, spans[index] if index is not None else None, compare(proposal, current), would,
                overridden, min((s["valid_from"] for s in steps), default=None), list(others), rendered)


def cards(pending: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[Card]:
    """Every pending proposal's card, in ``pending``'s order (``StoryViews.review``'s answer)."""
    by_entry: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for step in steps:
        by_entry.setdefault((step["kind"], step["key"]), []).append(step)
    rivals = competing(pending)
    return [card(p, by_entry.get((p["kind"], p["key"]), []), rivals.get(p["proposal_id"], [])) for p in pending]


# -- a submitted draft's continuity findings -------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    """A run of a draft's text: plain, or inside the spans of ``findings`` (their ids), marked
    with the gravest of their severities; ``anchors``: the findings whose span starts here."""

    text: str
    findings: tuple[str, ...] = ()
    severity: str = ""
    anchors: tuple[str, ...] = ()

    @property
    def mark_id(self) -> str | None:
        """The finding whose anchor is the mark itself (the others get an empty anchor before it)."""
        return next((fid for fid in self.anchors if fid in self.findings), None)


def highlighted(text: str, findings: Sequence[dict[str, Any]]) -> list[Segment]:
    """``text`` cut at every finding's span bounds (``span.start`` inclusive, ``span.end``
    exclusive, clamped to the text), in order: joined, the segments give ``text`` back. Spans
    may overlap; an empty span anchors where it stands, marking nothing."""
    spans = []
    for f in findings:
        start = min(max(int(f["span"]["start"]), 0), len(text))
        spans.append((start, min(max(int(f["span"]["end"]), start), len(text)), f["id"], f["severity"]))
    cuts = sorted({0, len(text), *(s for s, _, _, _ in spans), *(e for _, e, _, _ in spans)})
    out: list[Segment] = []
    for a, b in zip(cuts, cuts[1:] + [None], strict=True):
        anchors = tuple(fid for s, _, fid, _ in spans if s == a)
        if b is None:  # the text's end: only spans starting there (empty ones) are left to anchor
            if anchors:
                out.append(Segment("", (), "", anchors))
            continue
        covering = [(fid, sev) for s, e, fid, sev in spans if s <= a and b <= e]
        severity = "error" if any(sev == "error" for _, sev in covering) else "warning" if covering else ""
        out.append(Segment(text[a:b], tuple(fid for fid, _ in covering), severity, anchors))
    return [s for s in out if s.text or s.anchors]
