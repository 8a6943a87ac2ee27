"""The current packet compiler: a role's recipe read from one snapshot, filled by tier.

The reads a recipe makes at once come first (P0-P2 and what is cheap to take with them);
the P0 refusal follows; then each ``while_room`` read (P3 as needed, P4 if budget remains),
page by page, only while MIN_TRIM_TOKENS or more are left; L1 retrieval last. The stages
name what was not read. The earlier versions are frozen apart (``frozen``) and compile through
``replay.compile_packet``, the one entry that compiles with a given version.

Filling by tier (``Packing``, and ``fill`` for the earlier versions) gives every candidate an
item with a reason. P0 never trims: if it does not fit, the packet is refused with the sizes
in the message (``refuse_over_budget``). Later tiers take what is left in order; an item that
does not fit is trimmed (when MIN_TRIM_TOKENS or more are left) or dropped. The same fact is
never packed twice, and a blocked candidate (hidden, not yet canon) is listed dropped, without
its text.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, cast

from canon_ledger.application.packets import render
from canon_ledger.application.packets.inherited import homes_of, inherited
from canon_ledger.application.packets.packet import Item, Packet, Stage
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Fact, Recall, Retriever, StoryView
from canon_ledger.application.packets.reading import Candidate, Read, Reading, Recipe
from canon_ledger.application.packets.recipes import RECIPES, first_reads, staged
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import draft_under_review, query_texts
from canon_ledger.domain.errors import CanonError, InvalidCommand, NotFound, unknown_story
from canon_ledger.domain.tiers import P0
from canon_ledger.domain.tokens import TokenCounter

__all__ = ["COMPILER", "L1_MAX_HITS", "MIN_TRIM_TOKENS", "PacketError", "Packing", "Query", "compile_packet",
           "compile_with", "fill", "l1_hits", "l1_query", "refuse_over_budget", "stamped", "start"]

# Which compiler built a packet (recorded in PacketIssued; an audit replays with the same one).
# 8: a qa packet with a draft under review carries the continuity check's findings in P0
# (``application.continuity``); a secret the scene's point-of-view character does not know is
# labelled, one it knows says since when; every other packet is compiler 7's and says 7
# (``stamped``).
# 7: P2 opens with the end of the previous chapter's accepted text (the planner, writer and qa
# packets); L1 asks for as many passages as the room L0 left can hold (``l1_hits``), packs them
# while room is left (the rest are counted in the merge stage, not listed), and the truncate
# stage says what is left and why. 6: the summarizer's role lists leave out an entry hidden at the chapter (its name can be the
# reveal; 5 named it). 5: mention-activated recall (entries whose keys the goals or scene
# summaries mention join P1; always-on entries join every packet; an entry whose rule says never
# joins none), and L1's query read from the goals and summaries as written. 1-7: ``frozen.v1`` ..
# ``frozen.v7``.
COMPILER = 8
# L1 searches with the chapter's goals and scene summaries, cut to this many words: search
# cost grows with query length while the first sentences already say what the chapter is
# about. Tag lines are left out: L0 has already fetched every tagged entry by key.
QUERY_WORDS = 64
# The least room worth reading or trimming into: less holds no useful item.
MIN_TRIM_TOKENS = 32
# L1 fills the room L0 left (compiler 7 on): one passage asked per L1_HIT_TOKENS of room (a
# story's chunks hold at most 256 tokens, most 150-250: asking for more than fit leaves none of
# the room empty), at least L1_MIN_HITS and at most L1_MAX_HITS, the cap: ~12,000 tokens of
# earlier chapters at the ~185 tokens a passage of a real book holds (Moby-Dick, War and Peace),
# the writer's whole default budget. Compilers 2-6 asked for 8.
L1_HIT_TOKENS = 128
L1_MIN_HITS = 8
L1_MAX_HITS = 64
_TIER = attrgetter("tier")  # tier names sort in tier order (a unit test holds TIERS sorted)
Load = Callable[[list[tuple[Any, ...]]], dict[tuple[Any, ...], str]]


class PacketError(CanonError):
    """The packet cannot be built as asked (budget, role, chapter ...)."""


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   *, draft: DraftView | None = None) -> Packet:
    """The packet the current compiler builds for ``req``. ``retriever``: L1; an audit passes
    one that replays the recorded hits (``replay``). ``draft``: the draft ``req.draft`` names,
    as read (``reviewed`` decides if it may be shown)."""
    return compile_with(RECIPES, COMPILER, snap, req, tokens, retriever, draft=draft)


def stamped(version: int, reading: Reading) -> int:
    """The version a packet says it was built by: ``version``, except that compiler 8 says 7 for
    a packet it built byte for byte as compiler 7 did (no draft under review, whose continuity
    findings it adds, and no secret its point-of-view rule labelled), so that the ids and hashes
    of those packets do not move. Either replays: with the current recipes or ``frozen.v7``'s."""
    if version == COMPILER and reading.draft is None and not reading.pov_used:
        return 7
    return version


def start(recipes: dict[str, Recipe], snap: CanonSnapshot, req: Request,
          tokens: TokenCounter, draft: DraftView | None = None) -> tuple[Recipe, StoryView, int, Reading]:
    """The request checked, the recipe's first reads prefetched, the story and budget read."""
    recipe = recipes.get(req.role)
    if recipe is None:
        raise PacketError("unknown_role", f"role {req.role!r} is not one of {', '.join(recipes)}", "role")
    if req.chapter < 1:
        raise PacketError("chapter_must_be_positive", f"chapter must be >= 1, got {req.chapter}", "chapter")
    draft = reviewed(recipe, req, draft)
    snap.prefetch(first_reads(recipe, req))
    story = snap.story(req.story_id)
    if story is None:
        raise unknown_story(req.story_id)
    if story.series is not None:  # a book reads what it inherits too (``inherited``)
        snap = inherited(snap, story)
        story = snap.story(req.story_id) or story
    budget = req.budget if req.budget is not None else story.budgets.get(req.role, 0)
    if budget < 0:
        raise PacketError("budget_must_not_be_negative", f"budget must be >= 0, got {budget}", "budget")
    return recipe, story, budget, Reading(snap, req, story, tokens, recipe, draft)


def reviewed(recipe: Recipe, req: Request, draft: DraftView | None) -> DraftView | None:
    """``draft`` if ``req`` may hold it: a role whose recipe reviews drafts, the draft still
    submitted (neither accepted nor rejected) and written for the packet's chapter; else the
    rule-named refusal. None when ``req`` names no draft."""
    if req.draft is None:
        return None
    if not _reviews(recipe):
        raise InvalidCommand("draft_only_for_review",
                          f"a draft is put under review only in a packet of a role that checks drafts "
                          f"({', '.join(role for role, r in RECIPES.items() if _reviews(r))}), "
                          f"not {req.role}", "draft")
    if draft is None:
        raise NotFound("unknown_draft", f"story {req.story_id!r} has no draft {req.draft!r}", "draft")
    if draft.status != "submitted":
        why = f" ({draft.reason})" if draft.reason else ""
        raise PacketError("draft_not_under_review",
                          f"draft {draft.draft_id!r} is {draft.status}{why}; only a submitted draft is reviewed"
                          + ("; its text is the chapter's canon text now" if draft.status == "accepted" else ""),
                          "draft")
    if draft.chapter != req.chapter:
        raise PacketError("draft_is_for_another_chapter",
                          f"draft {draft.draft_id!r} was submitted for chapter {draft.chapter}, not {req.chapter}",
                          "chapter")
    return draft


def _reviews(recipe: Recipe) -> bool:
    """Does ``recipe`` read a draft under review?"""
    return any(read.source is draft_under_review for read in recipe)


def l1_query(reading: Reading, candidates: list[Candidate]) -> str:
    """The goals and each scene's summary, as written, cut to QUERY_WORDS words: headings
    ("Chapter N goals:") and tag lines are words every chapter shares, and L0 has already
    fetched every tagged entry by key."""
    return " ".join(" ".join(text for _, text in query_texts(reading)).split()[:QUERY_WORDS])


Query = Callable[[Reading, list[Candidate]], str]  # what L1 searches with, from the packet's reads


def l1_hits(room: int) -> int:
    """How many passages L1 asks for to fill ``room`` tokens (compiler 7 on)."""
    return max(L1_MIN_HITS, min(L1_MAX_HITS, -(-room // L1_HIT_TOKENS)))


def compile_with(recipes: dict[str, Recipe], version: int, snap: CanonSnapshot, req: Request,
                 tokens: TokenCounter, retriever: Retriever | None, *, query: Query = l1_query,
                 draft: DraftView | None = None) -> Packet:
    """The packet ``recipes`` give, built as compiler ``version`` built it; L1 searches with
    ``query`` (an earlier version's own, for the packets it issued). From version 7, L1 fills
    the room L0 left (``l1_hits``) and the truncate stage says what is left and why; before
    it, L1 asked for the retriever's default and every hit was a candidate."""
    fills = version >= 7
    recipe, story, budget, reading = start(recipes, snap, req, tokens, draft)
    first, later, l1 = staged(recipe)
    candidates = reading.whole(first)
    refuse_over_budget(candidates, budget, req.role)
    cap = budget * story.lore_share // 100 if fills and story.lore_share is not None else None
    packing = Packing(budget, tokens, snap.texts, lore_cap=cap)
    packing.add(candidates)
    unread = _read_while_room(packing, candidates, reading, later)
    spent = render.no_room(packing.remaining, MIN_TRIM_TOKENS)
    l0 = len(candidates)
    why = f"nothing else for the {req.role} role to read" + (f" ({', '.join(unread)} not read)" if unread else "")
    if l1 is None:
        recall, l1_stages = None, [Stage("l1-retrieval", "skipped", render.no_retrieval(req.role))]
    elif l1.while_room and packing.remaining < MIN_TRIM_TOKENS:
        recall, l1_stages = None, [Stage("l1-retrieval", "skipped", f"not run: {spent}")]
    else:
        room = packing.remaining if fills else None
        recall, l1_stages, why = _l1(req, l1, candidates, retriever, tokens, query(reading, candidates), room)
    packing.add(candidates[l0:])
    if packing.remaining < MIN_TRIM_TOKENS:
        why = f"under the {MIN_TRIM_TOKENS} tokens an item needs"
    items = packing.finish()
    stages = [*([Stage("quarantined", "error", render.quarantined(*story.quarantined))] if story.quarantined else []),
              *([Stage("review", "done", render.reviewing(reading.draft))] if reading.draft else []),
              Stage("scene-keys", "done", reading.detail),
              Stage("l0-recall", "done", render.l0_recall(l0, req.chapter, unread, spent)),
              *l1_stages,
              Stage("truncate", "done", render.room_left(items, budget, why) if fills else render.usage(items, budget))]
    return Packet(req.story_id, req.role, req.chapter, req.scene, story.position, budget, tokens.name,
                  tuple(items), tuple(stages), recall=recall, compiler=stamped(version, reading),
                  draft=reading.draft, homes=homes_of(reading.snap)).sealed()


def _read_while_room(packing: Packing, candidates: list[Candidate], reading: Reading, later: list[Read]) -> list[str]:
    """Read and pack each later read, page by page, while MIN_TRIM_TOKENS or more are left;
    ``candidates`` grows with what is read. Returns what was left unread, by name."""
    unread = []
    for read in later:
        done, more, pages = 0, True, reading.pages(read)
        while more and packing.remaining >= MIN_TRIM_TOKENS:
            page, more = next(pages)
            done += len(page)
            candidates += page
            packing.add(page)
        if more:
            unread.append(f"{read.read} after the first {done}" if done else read.read)
    return unread


def _l1(req: Request, l1: Read, candidates: list[Candidate], retriever: Retriever | None,
        tokens: TokenCounter, query: str, room: int | None) -> tuple[Recall | None, list[Stage], str]:
    """L1 hits join ``l1.tier`` after L0's own; fill gives them what budget is left, in rank
    order. ``room`` (compiler 7 on): the tokens L0 left; ``l1_hits(room)`` are asked for and
    hits join only while they fit (the first that does not is trimmed into what is left), the
    rest counted in the merge stage. Also returns why the budget is not spent (when it is not)."""
    if retriever is None:
        return None, [Stage("l1-retrieval", "skipped", "no retriever configured: L0 structured recall only")], \
            "no retriever configured (L0 structured recall only)"
    if not query.strip():
        return None, [Stage("l1-retrieval", "skipped", "nothing to search with: no scene card or chapter goals")], \
            "L1 had nothing to search with (no scene card or chapter goals)"
    asked = None if room is None else l1_hits(room)
    recall = retriever.recall(req.story_id, req.chapter, query) if asked is None else \
        retriever.recall(req.story_id, req.chapter, query, asked)
    seen = {c.identity for c in candidates}
    # A passage the previous chapter's ending already holds whole is a duplicate too.
    endings = [c.fact.text for c in candidates if c.kind == "chapter_ending" and c.fact.text]
    added = duplicates = unpacked = 0
    left = room
    for rank, hit in enumerate(recall.hits, 1):
        candidate = Candidate(l1.tier, hit.kind, hit.id, Fact(hit.text, tokens.count(hit.text), hit.sources),
                              f"{l1.reason}, rank {rank}")
        body = hit.text.partition("\n\n")[2] if hit.kind == "chunk" else ""
        if candidate.identity in seen or body and any(body in ending for ending in endings):
            duplicates += 1
            continue
        if left is not None and left < MIN_TRIM_TOKENS:
            unpacked += 1
            continue
        seen.add(candidate.identity)
        candidates.append(candidate)
        added += 1
        if left is not None:
            left -= candidate.fact.tokens
    detail = render.merged(added, duplicates) + (f"; {unpacked} more had no room" if unpacked else "")
    merge = Stage("merge", "done" if recall.hits else "skipped", detail if recall.hits else "retrieval found nothing")
    if asked is not None and len(recall.hits) >= asked:
        why = (f"L1 stops at {L1_MAX_HITS} passages (its cap)" if asked == L1_MAX_HITS
               else f"L1's {asked} passages were shorter than the room")
    else:
        why = f"L1 found no more passages in the chapters before {req.chapter}"
    return recall, [*recall.stages, merge], why


# -- filling by tier ---------------------------------------------------------------------------


def refuse_over_budget(candidates: list[Candidate], budget: int, role: str) -> None:
    p0 = sum(c.fact.tokens for c in candidates if c.tier == P0)
    if p0 > budget:
        draft = sum(c.fact.tokens for c in candidates if c.tier == P0 and c.kind == "draft_under_review")
        raise PacketError(
            "p0_exceeds_budget",
            f"the hard constraints (P0) need {p0} tokens"
            + (f", {draft} of them the draft under review," if draft else "")
            + f" but the {role} budget is {budget}; "
            "P0 is never trimmed: raise the budget or shorten the scene card, goals, guardrails or contract",
            "budget",
        )


def fill(candidates: list[Candidate], budget: int, tokens: TokenCounter, load: Load) -> list[Item]:
    packing = Packing(budget, tokens, load)
    packing.add(candidates)
    return packing.finish()


class Packing:
    """Fill by tier: one item per candidate, in tier order, across one or more ``add`` calls
    (each call's candidates come after the previous call's, tier for tier). Called after
    ``refuse_over_budget``, P0 always fits: only later tiers are ever trimmed."""

    def __init__(self, budget: int, tokens: TokenCounter, load: Load, lore_cap: int | None = None) -> None:
        self.remaining = budget
        self.tokens = tokens
        self.load = load
        # Compiler 7: the tokens lore may take together (``Candidate.lore``; None: no cap).
        self.lore_cap = lore_cap
        self.lore_left = lore_cap
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
            capped = c.lore and self.lore_left is not None and self.lore_left < remaining
            room = cast(int, self.lore_left) if capped else remaining
            if c.blocked:
                items.append(_dropped(c, f"{c.blocked} ({c.reason})"))
            elif identity in packed:
                items.append(_dropped(c, f"duplicate of the {packed[identity]} item ({c.reason})"))
            elif size <= room:
                if fact.text is None:
                    self._unread.append((len(items), fact.ref))
                items.append(Item(c.tier, c.kind, c.key, fact.text or "", size, "included", c.reason, fact.sources))
                remaining -= size
                packed[identity] = c.tier
            elif room >= MIN_TRIM_TOKENS:
                if fact.text is not None:
                    full = fact.text
                else:  # a fact left without its text has its ref (ports.Fact)
                    ref = cast("tuple[Any, ...]", fact.ref)
                    full = self.load([ref])[ref]
                text = render.trimmed(full, room, tokens)
                used = tokens.count(text)
                fit = f"to fit the lore cap of {self.lore_cap}" if capped else "to fit"
                items.append(Item(c.tier, c.kind, c.key, text, used, "trimmed",
                                  f"trimmed from {size} to {used} tokens {fit} ({c.reason})", fact.sources))
                remaining -= used
                packed[identity] = c.tier
            else:
                left = f"lore cap {self.lore_cap}, {room} of it left" if capped else f"{remaining} left"
                items.append(_dropped(c, f"no space: needs {size} tokens, {left} ({c.reason})"))
                continue
            if c.lore and self.lore_left is not None:
                self.lore_left -= items[-1].tokens
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
