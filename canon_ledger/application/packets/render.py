"""Every string a packet carries, in two groups with two version numbers.

Fact texts (``guardrails`` .. ``chapter_text``) are rendered once, when their event is
projected: the canon projection stores them with their token counts and a packet carries them
as stored. Changing one changes packet bytes: bump the canon projection's schema VERSION and
rebuild, so issued packets stay auditable against the version that made them.

Compiler strings (``story_title`` .. ``render_text``) are made while a packet is built: the
texts it composes (chat's story line, the summarizer's role lists, a trimmed item), its
stages' details, and the viewer's text. Changing one changes packet bytes: bump
``compiler.COMPILER`` and freeze the previous version.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from typing import TYPE_CHECKING, Any

from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.scene_tags import ON_CARD, ROLE_LISTS
from canon_ledger.domain.summary import sentence_starts
from canon_ledger.domain.tokens import TokenCounter

if TYPE_CHECKING:
    from canon_ledger.application.packets.packet import Item, Packet

# -- fact texts, rendered when projected -----------------------------------------------------

# Fields that steer packing or recall rather than describe the entry: never rendered as text
# (an imported lorebook entry's source settings would otherwise repeat its content in JSON).
CONTROL_FIELDS = ("hidden_until", "hidden_until_book", "nodes", "state", "recall", "lorebook")


def guardrails(lines: list[str]) -> str:
    return "Style guardrails:\n" + "\n".join(f"- {line}" for line in lines) if lines else ""


def output_contract(text: str) -> str:
    return f"Output contract: {text}" if text else ""


def goals(chapter: int, goals: list[str]) -> str:
    return f"Chapter {chapter} goals:\n" + "\n".join(f"- {g}" for g in goals) if goals else ""


def hidden_reason(hidden_until: int | None, chapter: int) -> str | None:
    """Why a version's (or a chain node's) text is not shown at ``chapter``
    (``canon_rules.hidden_at``): "hidden until chapter N"; None when it is shown."""
    return f"hidden until chapter {hidden_until}" if hidden_at(hidden_until, chapter) else None


def scene_card(chapter: int, scene_id: str, summary: str, tags: dict[str, list[str]]) -> str:
    lines = [f"Scene {scene_id} (chapter {chapter}): {summary}"]
    lines += [f"{t.label}: {', '.join(tags[t.name])}" for t in ON_CARD if tags.get(t.name)]
    return "\n".join(lines)


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)


def canon_version(kind: str, key: str, version: dict[str, Any]) -> str:
    aka = version.get("aliases") or []
    head = f"{version['name']} ({kind} {key}"
    head += f"; also {', '.join(aka)}" if aka else ""
    head += f"; from chapter {version['valid_from']})"
    lines = [head]
    if version.get("text"):
        lines.append(version["text"])
    fields = version.get("fields") or {}
    state = fields.get("state")
    described = [f"{k}: {_value(v)}" for k, v in sorted(fields.items()) if k not in CONTROL_FIELDS]
    if state is not None:
        described.insert(0, f"state: {_value(state)}")
    if described:
        lines.append("; ".join(described))
    return "\n".join(lines)


def retirement(kind: str, key: str, valid_from: int, reason: str) -> str:
    return f"({kind} {key}) retired from chapter {valid_from}: {reason}"


def chain_node(chain: str, node: dict[str, Any]) -> str:
    return f"[{chain}] {node.get('kind', 'node')} {node['id']}: {node['text']}"


def chapter_summary(chapter: int, text: str) -> str:
    return f"Chapter {chapter} summary: {text}"


def volume_summary(volume: int, text: str) -> str:
    return f"Volume {volume} summary: {text}"


def chapter_text(chapter: int, text: str) -> str:
    return f"Chapter {chapter} text:\n{text}"


# -- compiler strings, made while a packet is built ------------------------------------------

ELLIPSIS = " …"


def story_title(title: str, story_id: str) -> str:
    return f"Story: {title} ({story_id})"


def draft_under_review(draft_id: str, chapter: int, text: str) -> str:
    """The draft a qa packet checks, headed so that no reader takes it for canon."""
    return (f"UNCONFIRMED DRAFT under review (draft {draft_id}, chapter {chapter}): not canon. Check it against "
            f"the confirmed canon in this packet.\n\n{text}")


def secret_label(pov: str, chapter: int) -> str:
    """The line before a secret's text in a packet whose point-of-view character does not know
    it (compiler 8)."""
    return (f"SECRET: the reader knows; {pov} does not, as of chapter {chapter}. {pov} must not think, say or act "
            "on it.\n")


def unknown_to(pov: str, chapter: int) -> str:
    return f"secret: the reader knows, {pov} does not as of chapter {chapter}"


def known_since(pov: str, chapter: int, how: str) -> str:
    return f"known to {pov} since chapter {chapter} ({how})"


def continuity_finding(f: Any) -> str:
    """A continuity finding (``domain.continuity.Finding``) as a qa packet's P0 item: what the
    check found, where in the draft, and the canon that proves it."""
    proof = "\n".join(f"  canon (chapter {e.valid_from}, position {e.source}): {e.text}" for e in f.evidence)
    return (f"CONTINUITY {f.severity.upper()} {f.id} ({f.type}, {f.kind} {f.key}): {f.message}\n"
            f"  draft, characters {f.start}-{f.end}: {f.text.strip()!r}\n{proof}")


def reviewing(draft: Any) -> str:
    return (f"draft {draft.draft_id} (chapter {draft.chapter}, submitted at position {draft.position}) in P0 as "
            "unconfirmed text; canon it mentions is recalled")


def role_lists(entries: list[Any]) -> str:
    """"Required role lists:" and a line per role list (``scene_tags.ROLE_LISTS``) naming each
    entry of its kind "name (key)"; "" if none."""
    lists = []
    for t in ROLE_LISTS:
        names = [f"{e.name} ({e.key})" for e in entries if e.kind == t.kind]
        if names:
            lists.append(f"{t.name}: {', '.join(names)}")
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


# The end of chapter K-1's accepted text a chapter-K packet carries (``ending``, heading
# included): the prose a writer continues, ~600 English words, from a sentence's start. Cut
# while the packet is built: the canon projection cannot, as a warm rebuild counts no token
# (``token_memo``) and the cut counts several; its cost per packet: docs/benchmarks.md.
ENDING_TOKENS = 800
_WINDOW_CHARS = 6  # characters per token a tail is first cut to before it is counted (grown if short)


def ending(chapter: int, text: str, room: int, tokens: TokenCounter) -> str:
    """The end of ``chapter``'s accepted ``text``, headed "Chapter N ending:", at most ``room``
    tokens in all: the whole text if it fits, else the longest tail that starts a sentence or a
    paragraph (``domain.summary.sentence_starts``), marked with a leading ellipsis; a last
    sentence longer than the room is cut at a space (or, in text without spaces, at a
    character). Deterministic: the same text and room give the same bytes."""
    text = text.strip()
    head = f"Chapter {chapter} ending:\n"
    whole = head + text
    # A tail is cut unless the text could fit: prose runs ~4 characters a token, and no text
    # anyone writes runs 32 (a whole one that would fit is cut the same way every time).
    if len(whole) <= room * 32 and tokens.count(whole) <= room:
        return whole
    lead = head + ELLIPSIS.strip() + " "
    keep = room - tokens.count(lead)
    if keep <= 0:
        return ""
    width = keep * _WINDOW_CHARS
    while width < len(text) and tokens.count(text[-width:]) <= keep:
        width *= 2
    window = text[-width:]

    def fits(start: int) -> bool:
        return tokens.count(lead + window[start:].strip()) <= room

    for starts in (sentence_starts(window),
                   [i + 1 for i, ch in enumerate(window) if ch.isspace()] or list(range(len(window)))):
        # token counts of ever shorter tails do not grow: the first start that fits, by bisection
        found = bisect_left(range(len(starts)), True, key=lambda i: fits(starts[i]))
        while found < len(starts) and not fits(starts[found]):  # counts are not strictly monotone
            found += 1
        if found < len(starts) and window[starts[found]:].strip():
            return lead + window[starts[found]:].strip()
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


def room_left(items: list[Item], budget: int, why: str) -> str:
    """``usage``, then what is left and why nothing more filled it (compiler 7 on)."""
    left = budget - sum(i.tokens for i in items if i.status != "dropped")
    return f"{usage(items, budget)}; {left} left" + (f": {why}" if left else "")


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
