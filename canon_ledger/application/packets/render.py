"""Every string a packet carries that the compiler makes: the texts it composes (chat's story
line, the summarizer's role lists, a trimmed item), its stages' details, and the viewer's text.

The texts of canon facts are rendered once, when their event is projected
(``projections/rendering.py``); a packet carries them as stored. Changing a string here
changes packet bytes: bump ``compiler.COMPILER`` and freeze the previous version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from canon_ledger.domain.tokens import TokenCounter

if TYPE_CHECKING:
    from canon_ledger.application.packets.packet import Item, Packet

ELLIPSIS = " …"


def story_title(title: str, story_id: str) -> str:
    return f"Story: {title} ({story_id})"


def draft_under_review(draft_id: str, chapter: int, text: str) -> str:
    """The draft a qa packet checks, headed so that no reader takes it for canon."""
    return (f"UNCONFIRMED DRAFT under review (draft {draft_id}, chapter {chapter}): not canon. Check it against "
            f"the confirmed canon in this packet.\n\n{text}")


def reviewing(draft: Any) -> str:
    return (f"draft {draft.draft_id} (chapter {draft.chapter}, submitted at position {draft.position}) in P0 as "
            "unconfirmed text; canon it mentions is recalled")


def role_lists(entries: list[Any]) -> str:
    """"Required role lists:" and a line per kind naming each entry "name (key)"; "" if none."""
    lists = []
    for kind in ("character", "location", "item"):
        names = [f"{e.name} ({e.key})" for e in entries if e.kind == kind]
        if names:
            lists.append(f"{kind}s: {', '.join(names)}")
    return "Required role lists:\n" + "\n".join(lists) if lists else ""


def trimmed(text: str, room: int, tokens: TokenCounter) -> str:
    """The longest head of ``text`` that, with an ellipsis, counts at most ``room`` tokens."""
    keep = room - tokens.count(ELLIPSIS)
    while keep > 0:
        cut = tokens.truncate(text, keep).rstrip() + ELLIPSIS
        if tokens.count(cut) <= room:
            return cut
        keep -= 1
    return ""


def usage(items: list[Item], budget: int) -> str:
    """"used U of B tokens: I included, T trimmed, D dropped" (every compiler says it alike)."""
    used = 0
    counts = {"included": 0, "trimmed": 0, "dropped": 0}
    for i in items:
        counts[i.status] += 1
        if i.status != "dropped":
            used += i.tokens
    return (f"used {used} of {budget} tokens: {counts['included']} included, "
            f"{counts['trimmed']} trimmed, {counts['dropped']} dropped")


def quarantined(count: int, first: int, last: int) -> str:
    where = f"position {first}" if count == 1 else f"positions {first}..{last}"
    return (f"{count} event{'s' if count > 1 else ''} at {where} could not be projected and are not in this "
            "packet; see `canon quarantine`")


def l0_recall(candidates: int, chapter: int, unread: list[str], spent: str) -> str:
    not_read = f"; not read ({spent}): {', '.join(unread)}" if unread else ""
    return f"{candidates} candidates from confirmed canon as of chapter {chapter}{not_read}"


def no_room(remaining: int, needed: int) -> str:
    return f"the budget left {remaining} tokens, under the {needed} an item needs"


def no_retrieval(role: str) -> str:
    return f"the {role} role uses no retrieval"


def merged(added: int, duplicates: int) -> str:
    return f"{added} L1 candidate(s) after L0 in P4, {duplicates} already in L0"


def render_text(packet: Packet) -> str:
    """A context-viewer rendering: header, per-tier budget breakdown, stages, then the items."""
    from canon_ledger.application.packets.packet import TIERS

    lines = [
        f"packet {packet.packet_id}",
        f"story {packet.story_id}  role {packet.role}  chapter {packet.chapter}"
        + (f"  scene {packet.scene}" if packet.scene else "")
        + f"  position {packet.position}",
        f"budget {packet.budget} tokens ({packet.tokenizer}): used {packet.used_tokens}, "
        f"left {packet.budget - packet.used_tokens}",
        "",
        "tier  included  trimmed  dropped  tokens  share",
    ]
    for t in packet.tiers():
        share = f"{100 * t['tokens'] / packet.budget:5.1f}%" if packet.budget else "    -"
        lines.append(f"{t['tier']:<5} {t['included']:>8} {t['trimmed']:>8} {t['dropped']:>8} {t['tokens']:>7}  {share}")
    lines += ["", "stages:"]
    lines += [f"  {s.step:<14} {s.status:<8} {s.detail}" for s in packet.stages]
    for tier in TIERS:
        items = [i for i in packet.items if i.tier == tier]
        if not items:
            continue
        lines += ["", f"== {tier} =="]
        for i in items:
            src = ",".join(str(s) for s in i.sources)
            lines.append(f"[{i.status}] {i.kind} {i.key} ({i.tokens} tokens; events {src}) - {i.reason}")
            if i.status != "dropped":
                lines += [f"    {line}" for line in i.text.splitlines()]
    lines += ["", f"hash {packet.hash}"]
    return "\n".join(lines)
