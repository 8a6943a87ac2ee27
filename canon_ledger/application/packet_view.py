"""What the context viewer shows of a packet, computed from the packet's JSON (pure, no I/O).

The viewer renders the packet exactly as ``GET /v1/stories/{story}/packet`` answers it: every
item with its tier, status and reason. This module turns that JSON into the budget bar (one
segment per tier sized by the tokens the tier uses, plus what is left: the segments always
sum to the budget, and the tiers' to ``used_tokens``) and compares two packets of the same
request at two positions (items added, removed, with changed text or changed status).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("included", "trimmed", "dropped")


@dataclass(frozen=True)
class Segment:
    """One part of the budget bar: a tier's used tokens, or ``left`` (the unused budget)."""

    name: str
    tokens: int
    share: float  # of the budget, 0..1


def budget_bar(packet: dict[str, Any]) -> list[Segment]:
    """A segment per tier (P0..P4, in order) with the tokens it uses, then what is left. A
    budget of 0 gives shares of 0 (nothing to divide)."""
    budget = int(packet["budget"])
    segments = [Segment(t["tier"], int(t["tokens"]), t["tokens"] / budget if budget else 0.0) for t in packet["tiers"]]
    left = max(0, budget - int(packet["used_tokens"]))
    segments.append(Segment("left", left, left / budget if budget else 0.0))
    return segments


def by_tier(packet: dict[str, Any], status: str | None = None) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(tier row, its items in packet order), for every tier; with ``status``, only its items."""
    groups: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for tier in packet["tiers"]:
        items = [i for i in packet["items"] if i["tier"] == tier["tier"] and (status is None or i["status"] == status)]
        groups.append((tier, items))
    return groups


def item_key(item: dict[str, Any]) -> tuple[str, str, str]:
    return (item["tier"], item["kind"], item["key"])


@dataclass
class Change:
    """One difference between two packets of the same request: an item ``added``, ``removed``,
    or ``changed`` (its text or status differ; both versions kept)."""

    change: str
    key: tuple[str, str, str]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    what: list[str] = field(default_factory=list)  # for ``changed``: "text", "status", "tokens", "reason"


def _keyed(items: list[dict[str, Any]]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Items by (tier, kind, key, occurrence): the same key twice in one tier stays two items."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for item in items:
        k = item_key(item)
        out[(*k, seen[k])] = item
        seen[k] += 1
    return out


def diff_packets(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """What changed from ``before`` to ``after``, in ``after``'s item order, removed items
    last (in ``before``'s order). Unchanged items are left out."""
    old, new = _keyed(before["items"]), _keyed(after["items"])
    changes: list[Change] = []
    for k, item in new.items():
        was = old.get(k)
        if was is None:
            changes.append(Change("added", k[:3], None, item))
            continue
        what = [f for f in ("text", "status", "tokens", "reason") if was.get(f) != item.get(f)]
        if what:
            changes.append(Change("changed", k[:3], was, item, what))
    changes += [Change("removed", k[:3], item, None) for k, item in old.items() if k not in new]
    return changes


def previous_change(packet: dict[str, Any], planned_at: int | None = None) -> int | None:
    """The position to compare ``packet`` from by default: the one just before the latest event
    the packet cites (the highest source position among its items, at or before the packet's
    own ``position``, the last that changed its story). The packet there lacks that event, so it
    differs: this is the packet's latest change that it shows, found without compiling another
    packet. None when there is no earlier packet: that event is the one that planned the chapter
    (``planned_at``, the chapter's ``goals_source``) or an earlier one, or the packet cites nothing.

    A change that only took an item away (a retirement, a thread resolved) is cited by no item:
    when one came later, the packet also differs at positions after the one answered."""
    cited = [int(s) for item in packet["items"] for s in item.get("sources") or () if s <= packet["position"]]
    if not cited:
        return None
    latest = max(cited)
    if planned_at is not None and latest <= planned_at:
        return None
    return latest - 1
