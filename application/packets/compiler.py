"""Fill by tier under a token budget, with a reason for every candidate.

P0 never trims: if it does not fit, the packet is refused with the sizes in the message.
Later tiers take what is left in order; an item that does not fit is trimmed (when enough
room is left to say something useful) or dropped. The same fact is never packed twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from application.packets.packet import TIERS, Item, Packet, Stage
from application.packets.ports import CanonSnapshot
from application.packets.recipes import RECIPES, USES_RETRIEVAL, Candidate, Request
from domain.errors import CanonError, NotFound
from domain.story import ROLES
from domain.tokens import TokenCounter

MIN_TRIM_TOKENS = 32
ELLIPSIS = " …"


class PacketError(CanonError):
    """The packet cannot be built as asked (budget, role, chapter ...)."""


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter) -> Packet:
    if req.role not in ROLES:
        raise PacketError("unknown_role", f"role {req.role!r} is not one of {', '.join(ROLES)}", "role")
    if req.chapter < 1:
        raise PacketError("chapter_must_be_positive", f"chapter must be >= 1, got {req.chapter}", "chapter")
    story = snap.story(req.story_id)
    if story is None:
        raise NotFound("unknown_story", f"story {req.story_id!r} has not been started", "story_id")
    budget = req.budget if req.budget is not None else story.budgets.get(req.role, 0)
    if budget < 0:
        raise PacketError("budget_must_not_be_negative", f"budget must be >= 0, got {budget}", "budget")

    candidates, scene_detail = RECIPES[req.role](snap, req, story, tokens)
    p0 = sum(c.fact.tokens for c in candidates if c.tier == "P0")
    if p0 > budget:
        raise PacketError(
            "p0_exceeds_budget",
            f"the hard constraints (P0) need {p0} tokens but the {req.role} budget is {budget}; "
            "P0 is never trimmed: raise the budget or shorten the scene card, goals, guardrails or contract",
            "budget",
        )
    items = fill(candidates, budget, tokens, snap.texts)
    stages = _stages(req, candidates, items, budget, scene_detail)
    return Packet(req.story_id, req.role, req.chapter, req.scene, story.position, budget, tokens.name,
                  tuple(items), tuple(stages)).sealed()


def fill(candidates: list[Candidate], budget: int, tokens: TokenCounter,
         load: Callable[[list[tuple[Any, ...]]], dict[tuple[Any, ...], str]]) -> list[Item]:
    ordered = sorted(candidates, key=lambda c: TIERS.index(c.tier))  # stable: recipe order within a tier
    remaining = budget
    packed: dict[tuple[str, str], str] = {}
    items: list[Item] = []
    unread: list[int] = []  # included items whose text is fetched once, at the end
    for c in ordered:
        size = c.fact.tokens
        if c.blocked:
            items.append(_dropped(c, f"{c.blocked} ({c.reason})", size))
        elif c.identity in packed:
            items.append(_dropped(c, f"duplicate of the {packed[c.identity]} item ({c.reason})", size))
        elif size <= remaining:
            if c.fact.text is None:
                unread.append(len(items))
            items.append(Item(c.tier, c.kind, c.key, c.fact.text or "", size, "included", c.reason, c.fact.sources))
            remaining -= size
            packed[c.identity] = c.tier
        elif c.trimmable and remaining >= MIN_TRIM_TOKENS:
            full = c.fact.text if c.fact.text is not None else load([c.fact.ref])[c.fact.ref]
            text = _trim(full, remaining, tokens)
            used = tokens.count(text)
            items.append(Item(c.tier, c.kind, c.key, text, used, "trimmed",
                              f"trimmed from {size} to {used} tokens to fit ({c.reason})", c.fact.sources))
            remaining -= used
            packed[c.identity] = c.tier
        else:
            items.append(_dropped(c, f"no space: needs {size} tokens, {remaining} left ({c.reason})", size))
    if unread:  # items and ordered candidates correspond one to one
        refs = {i: ordered[i].fact.ref for i in unread}
        texts = load(list(refs.values()))  # type: ignore[arg-type]
        for i, ref in refs.items():
            items[i].text = texts[ref]  # type: ignore[index]
    return items


def _dropped(c: Candidate, reason: str, size: int) -> Item:
    # A dropped item carries no text: a hidden reveal must not leak through the viewer.
    return Item(c.tier, c.kind, c.key, "", 0, "dropped", reason, c.fact.sources)


def _trim(text: str, room: int, tokens: TokenCounter) -> str:
    tail = tokens.count(ELLIPSIS)
    keep = room - tail
    while keep > 0:
        cut = tokens.truncate(text, keep).rstrip() + ELLIPSIS
        if tokens.count(cut) <= room:
            return cut
        keep -= 1
    return ""


def _stages(req: Request, candidates: list[Candidate], items: list[Item], budget: int, scene_detail: str) -> list[Stage]:
    used = 0
    counts = {"included": 0, "trimmed": 0, "dropped": 0}
    for i in items:
        counts[i.status] += 1
        if i.status != "dropped":
            used += i.tokens
    retrieval = (
        Stage("l1-retrieval", "skipped", "not built yet: L0 structured recall only")
        if req.role in USES_RETRIEVAL
        else Stage("l1-retrieval", "skipped", f"the {req.role} role uses no retrieval")
    )
    return [
        Stage("scene-keys", "done", scene_detail),
        Stage("l0-recall", "done", f"{len(candidates)} candidates from confirmed canon as of chapter {req.chapter}"),
        retrieval,
        Stage("wiki", "skipped", "no wiki pages on the packet path yet"),
        Stage("budget", "done", f"used {used} of {budget} tokens: {counts['included']} included, "
                                f"{counts['trimmed']} trimmed, {counts['dropped']} dropped"),
    ]
