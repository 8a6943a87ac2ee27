"""Fill by tier under a token budget, with a reason for every candidate.

P0 never trims: if it does not fit, the packet is refused with the sizes in the message.
Later tiers take what is left in order; an item that does not fit is trimmed (when enough
room is left to say something useful) or dropped. The same fact is never packed twice.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from canon_ledger.application.packets.packet import Item, Packet, Stage
from canon_ledger.application.packets.ports import CanonSnapshot, Fact, Recall, Retriever, StoryView
from canon_ledger.application.packets.recipes import FIRST_READS, RECIPES, STAGED, STAGED_V3, USES_RETRIEVAL, Candidate, Read, Request
from canon_ledger.domain.errors import CanonError, NotFound
from canon_ledger.domain.story import ROLES
from canon_ledger.domain.tokens import TokenCounter

MIN_TRIM_TOKENS = 32
ELLIPSIS = " …"
# Which compiler built a packet (recorded in PacketIssued; an audit replays with the same one):
# 1: L0 structured recall only; 2: L0, then L1 retrieval filling what is left of P4; 3: as 2,
# but P3's reads and P4 (development chains, then L1) are read one by one, each only if what
# came before left MIN_TRIM_TOKENS or more: less holds no useful item (it is also the least an
# item is trimmed to). Where everything is read, 3 gives the same bytes as 2. 4: as 3, but a
# character's earlier state that is hidden until a later chapter is dropped without its text,
# as every other hidden entry is (3 listed it whole: a spoiler); elsewhere 4 gives 3's bytes.
COMPILER = 4
QUERY_KINDS = ("chapter_goals", "scene_card")  # the P0 texts that say what the chapter is about
# L1 searches with the chapter's goals and scene summaries, cut to this many words: search
# cost grows with query length (every OR'ed term is a posting list, every token a model step)
# while the first sentences already say what the chapter is about. Tag lines are left out:
# L0 has already fetched every tagged entry by key.
QUERY_WORDS = 64
_TIER = attrgetter("tier")  # tier names sort in tier order (a unit test holds TIERS sorted)


class PacketError(CanonError):
    """The packet cannot be built as asked (budget, role, chapter ...)."""


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   *, compiler: int = COMPILER) -> Packet:
    """``retriever``: L1 (compilers 2 and later); an audit passes one that replays the recorded hits."""
    if req.role not in ROLES:
        raise PacketError("unknown_role", f"role {req.role!r} is not one of {', '.join(ROLES)}", "role")
    if req.chapter < 1:
        raise PacketError("chapter_must_be_positive", f"chapter must be >= 1, got {req.chapter}", "chapter")
    snap.prefetch(lambda s: FIRST_READS[req.role](s, req))
    story = snap.story(req.story_id)
    if story is None:
        raise NotFound("unknown_story", f"story {req.story_id!r} has not been started", "story_id")
    budget = req.budget if req.budget is not None else story.budgets.get(req.role, 0)
    if budget < 0:
        raise PacketError("budget_must_not_be_negative", f"budget must be >= 0, got {budget}", "budget")

    if compiler >= 3:
        staged = (STAGED if compiler >= 4 else STAGED_V3)[req.role](snap, req, story, tokens)
        candidates, later, scene_detail = staged.first, staged.later, staged.detail
    else:
        (candidates, scene_detail), later = RECIPES[req.role](snap, req, story, tokens), []
    p0 = sum(c.fact.tokens for c in candidates if c.tier == "P0")
    if p0 > budget:
        raise PacketError(
            "p0_exceeds_budget",
            f"the hard constraints (P0) need {p0} tokens but the {req.role} budget is {budget}; "
            "P0 is never trimmed: raise the budget or shorten the scene card, goals, guardrails or contract",
            "budget",
        )
    if compiler == 1:
        items = fill(candidates, budget, tokens, snap.texts)
        stages = _stages_v1(req, candidates, items, budget, scene_detail)
        return Packet(req.story_id, req.role, req.chapter, req.scene, story.position, budget, tokens.name,
                      tuple(items), tuple(stages)).sealed()
    packing = Packing(budget, tokens, snap.texts)
    room, not_read, spent = True, "", ""
    if compiler >= 3:
        packing.add(candidates)  # P0-P2 (and what came with them); then each later read while there is room
        unread = _read_while_room(packing, candidates, later)
        room = packing.remaining >= MIN_TRIM_TOKENS
        spent = f"the budget left {packing.remaining} tokens, under the {MIN_TRIM_TOKENS} an item needs"
        not_read = f"; not read ({spent}): {', '.join(unread)}" if unread else ""
    l0 = len(candidates)
    if room:
        recall, l1_stages = _l1(req, candidates, retriever, tokens)
    else:
        recall, l1_stages = None, [_no_retrieval(req.role) or Stage("l1-retrieval", "skipped", f"not run: {spent}")]
    packing.add(candidates[len(packing.items):])  # compiler 2: every candidate; 3: L1's
    items = packing.finish()
    stages = [*_quarantine_stage(story),
              Stage("scene-keys", "done", scene_detail),
              Stage("l0-recall", "done", f"{l0} candidates from confirmed canon as of chapter {req.chapter}{not_read}"),
              *l1_stages,
              _budget_stage(items, budget)]
    return Packet(req.story_id, req.role, req.chapter, req.scene, story.position, budget, tokens.name,
                  tuple(items), tuple(stages), recall=recall, compiler=compiler).sealed()


def _quarantine_stage(story: StoryView) -> list[Stage]:
    """Events of the story the read model could not apply: the packet is built without their
    effect (everything else of the story serves as usual) and says so first."""
    if story.quarantined is None:
        return []
    count, first, last = story.quarantined
    where = f"position {first}" if count == 1 else f"positions {first}..{last}"
    return [Stage("quarantined", "error", f"{count} event{'s' if count > 1 else ''} at {where} could not be "
                                          "projected and are not in this packet; see `canon quarantine`")]


def _read_while_room(packing: Packing, candidates: list[Candidate], later: list[tuple[str, Read]]) -> list[str]:
    """Read and pack each later read, page by page, while MIN_TRIM_TOKENS or more are left;
    ``candidates`` grows with what is read. Returns what was left unread, by name."""
    unread = []
    for name, read in later:
        done, more = 0, True
        while more and packing.remaining >= MIN_TRIM_TOKENS:
            page, more = read()
            done += len(page)
            candidates += page
            packing.add(page)
        if more:
            unread.append(f"{name} after the first {done}" if done else name)
    return unread


def _l1(req: Request, candidates: list[Candidate], retriever: Retriever | None,
        tokens: TokenCounter) -> tuple[Recall | None, list[Stage]]:
    """L1 hits join P4 after L0's own; fill gives them what budget is left, in rank order."""
    if (no_retrieval := _no_retrieval(req.role)) is not None:
        return None, [no_retrieval]
    if retriever is None:
        return None, [Stage("l1-retrieval", "skipped", "no retriever configured: L0 structured recall only")]
    query = l1_query(candidates)
    if not query.strip():
        return None, [Stage("l1-retrieval", "skipped", "nothing to search with: no scene card or chapter goals")]
    recall = retriever.recall(req.story_id, req.chapter, query)
    seen = {c.identity for c in candidates}
    added = duplicates = 0
    for rank, hit in enumerate(recall.hits, 1):
        candidate = Candidate("P4", hit.kind, hit.id, Fact(hit.text, tokens.count(hit.text), hit.sources),
                              f"L1 retrieval, rank {rank}")
        if candidate.identity in seen:
            duplicates += 1
            continue
        seen.add(candidate.identity)
        candidates.append(candidate)
        added += 1
    merge = Stage("merge", "done" if recall.hits else "skipped",
                  f"{added} L1 candidate(s) after L0 in P4, {duplicates} already in L0" if recall.hits
                  else "retrieval found nothing")
    return recall, [*recall.stages, merge]


def _no_retrieval(role: str) -> Stage | None:
    return None if role in USES_RETRIEVAL else Stage("l1-retrieval", "skipped", f"the {role} role uses no retrieval")


def l1_query(candidates: list[Candidate]) -> str:
    """The goals' items and each scene's summary, without their headings ("Chapter N goals:",
    "Scene s1 (chapter N):"): words every chapter shares only slow the search down."""
    parts = []
    for kind in QUERY_KINDS:
        for c in candidates:
            if c.kind != kind or not c.fact.text:
                continue
            lines = c.fact.text.splitlines()
            if kind == "chapter_goals":
                parts += [line.removeprefix("- ") for line in lines[1:]]
            else:
                parts.append(lines[0].partition("): ")[2] or lines[0])
    return " ".join(" ".join(parts).split()[:QUERY_WORDS])


def _budget_stage(items: list[Item], budget: int) -> Stage:
    return Stage("truncate", "done", _usage(items, budget))


def _usage(items: list[Item], budget: int) -> str:
    """"used U of B tokens: I included, T trimmed, D dropped" (compilers 1 and 2 say it alike)."""
    used = 0
    counts = {"included": 0, "trimmed": 0, "dropped": 0}
    for i in items:
        counts[i.status] += 1
        if i.status != "dropped":
            used += i.tokens
    return (f"used {used} of {budget} tokens: {counts['included']} included, "
            f"{counts['trimmed']} trimmed, {counts['dropped']} dropped")


def fill(candidates: list[Candidate], budget: int, tokens: TokenCounter,
         load: Callable[[list[tuple[Any, ...]]], dict[tuple[Any, ...], str]]) -> list[Item]:
    packing = Packing(budget, tokens, load)
    packing.add(candidates)
    return packing.finish()


class Packing:
    """Fill by tier: one item per candidate, in tier order, across one or more ``add`` calls
    (each call's candidates come after the previous call's, tier for tier)."""

    def __init__(self, budget: int, tokens: TokenCounter,
                 load: Callable[[list[tuple[Any, ...]]], dict[tuple[Any, ...], str]]) -> None:
        self.remaining = budget
        self.tokens = tokens
        self.load = load
        self.items: list[Item] = []
        self._packed: dict[tuple[str, str], str] = {}
        self._unread: list[tuple[int, Any]] = []  # (item index, ref): included texts, fetched once at the end

    def add(self, candidates: list[Candidate]) -> None:
        # Stable: recipe order within a tier. Tier names sort in tier order ("P0" < ... < "P4").
        items, packed, tokens = self.items, self._packed, self.tokens
        remaining = self.remaining
        for c in sorted(candidates, key=_TIER):
            fact = c.fact
            size = fact.tokens
            identity = (c.kind, c.key)
            if c.blocked:
                items.append(_dropped(c, f"{c.blocked} ({c.reason})"))
            elif identity in packed:
                items.append(_dropped(c, f"duplicate of the {packed[identity]} item ({c.reason})"))
            elif size <= remaining:
                if fact.text is None:
                    self._unread.append((len(items), fact.ref))
                items.append(Item(c.tier, c.kind, c.key, fact.text or "", size, "included", c.reason, fact.sources))
                remaining -= size
                packed[identity] = c.tier
            elif c.trimmable and remaining >= MIN_TRIM_TOKENS:
                full = fact.text if fact.text is not None else self.load([fact.ref])[fact.ref]
                text = _trim(full, remaining, tokens)
                used = tokens.count(text)
                items.append(Item(c.tier, c.kind, c.key, text, used, "trimmed",
                                  f"trimmed from {size} to {used} tokens to fit ({c.reason})", fact.sources))
                remaining -= used
                packed[identity] = c.tier
            else:
                items.append(_dropped(c, f"no space: needs {size} tokens, {remaining} left ({c.reason})"))
        self.remaining = remaining

    def finish(self) -> list[Item]:
        if self._unread:
            texts = self.load([ref for _, ref in self._unread])
            for i, ref in self._unread:
                self.items[i].text = texts[ref]
            self._unread = []
        return self.items


def _dropped(c: Candidate, reason: str) -> Item:
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


def _stages_v1(req: Request, candidates: list[Candidate], items: list[Item], budget: int,
               scene_detail: str) -> list[Stage]:
    """Compiler 1's stages, word for word: packets it issued must replay to the same bytes."""
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
        Stage("budget", "done", _usage(items, budget)),
    ]
