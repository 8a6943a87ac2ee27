"""Per-role recipes, declared as data: which canon facts are candidates, in which tier and order.

Tiers (``domain.tiers``): P0 hard constraints (never trimmed), P1 current state, P2 recent
context, P3 distant reference, P4 supplementary. A role's recipe is a tuple of ``Read``; the
order of the reads within a tier is fill priority, and each read names its source, the
function that reads it (``sources``). Everything else about a role is derived from its recipe:
the role names (``RECIPES``' keys, held equal to ``domain.story.ROLES``), which reads are read
at once and which only while the budget has room (``staged``), which reads a store may fetch
together before anything is read (``first_reads``), and whether L1 retrieval runs.

These are compiler 8's recipes (``compiler.COMPILER``): a change to them that changes a packet
is a new compiler, and the earlier compilers' recipes are frozen apart (``frozen``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from canon_ledger.application.packets import fetches
from canon_ledger.application.packets.ports import Call
from canon_ledger.application.packets.reading import Candidate, Read, Reading, Recipe, l1_retrieval
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import (active_threads, always_on_lore, chapter_goals, chapter_text,
                                                       continuity_findings, current_volume_summary, development_chains,
                                                       draft_under_review, earlier_character_states,
                                                       earlier_volume_summaries, latest_chapter_summaries,
                                                       lore_entries, output_contract, previous_chapter_ending,
                                                       recent_chapter_summaries, recent_timeline, role_lists,
                                                       scene_cards, scene_cards_if_planned, story, style_guardrails,
                                                       tagged_entries, volume_summaries)
from canon_ledger.domain.story import ROLES
from canon_ledger.domain.tiers import P0, P1, P2, P3, P4

# Where a packet request, a read and its candidates are defined, imported from here by the doors.
__all__ = ["RECIPES", "RETRIEVAL", "WORLD_RULE_PAGE", "Candidate", "Read", "Reading", "Recipe", "Request", "check",
           "first_reads", "staged"]

WORLD_RULE_PAGE = 64  # world rules read per statement, while the budget has room
RETRIEVAL = "L1 retrieval"  # the read the compiler makes through its Retriever, last in a recipe

_SCENE: Recipe = (
    Read(P0, "scene_card", "scene cards", "scene card", scene_cards),
    Read(P0, "chapter_goals", "chapter goals", "chapter goals", chapter_goals),
    Read(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
    Read(P0, "output_contract", "output contract", "output contract", output_contract),
    Read(P1, "canon", "tagged entries", "tagged", tagged_entries, gate=False),
    # the mentioned and always-on entries; a reason "mentioned ..." or "always on"
    Read(P1, "canon", "lore entries", "mentioned", lore_entries, gate=False),
    Read(P1, "thread", "active threads", "active thread", active_threads),
    Read(P2, "chapter_ending", "previous chapter ending", "the end of the previous chapter's accepted text",
         previous_chapter_ending),
    Read(P2, "chapter_summary", "recent chapter summaries", "recent chapter summary", recent_chapter_summaries),
    Read(P2, "volume_summary", "current volume summary", "current volume summary", current_volume_summary),
    Read(P2, "timeline_event", "recent timeline", "recent timeline", recent_timeline),
    Read(P3, "volume_summary", "earlier volume summaries", "earlier volume summary", earlier_volume_summaries),
    Read(P3, "world_rule", "world rules", "world rule", while_room=True, page=WORLD_RULE_PAGE),
    Read(P3, "history", "earlier character states", "earlier state", earlier_character_states, while_room=True),
    Read(P4, "development_chain", "development chains", "development chain", development_chains, while_room=True),
    Read(P4, "chunk", RETRIEVAL, RETRIEVAL, l1_retrieval, while_room=True),  # or "wiki_page"
)
RECIPES: dict[str, Recipe] = {
    "planner": (Read(P0, "scene_card", "scene cards, if planned", "scene card", scene_cards_if_planned),
                *_SCENE[1:]),
    "writer": _SCENE,
    # The one packet that may hold a draft: the one asked to check it (``Request.draft``).
    "qa": (*_SCENE[:4],
           Read(P0, "draft_under_review", "draft under review", "the draft under review: unconfirmed text, not canon",
                draft_under_review),
           Read(P0, "continuity_finding", "continuity findings",
                "continuity finding: the draft contradicts the canon in force at its chapter", continuity_findings),
           *_SCENE[4:]),
    "summarizer": (Read(P0, "chapter_text", "chapter text", "accepted chapter text", chapter_text),
                   Read(P1, "role_lists", "role lists", "names the summary must use", role_lists),
                   Read(P1, "canon", "always-on lore", "always on", always_on_lore, gate=False)),
    "chat": (Read(P0, "story", "story", "project", story),
             Read(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
             Read(P1, "canon", "always-on lore", "always on", always_on_lore, gate=False),
             Read(P1, "volume_summary", "volume summaries", "project overview", volume_summaries),
             Read(P2, "chapter_summary", "latest chapter summaries", "latest chapter summary",
                  latest_chapter_summaries),
             Read(P3, "thread", "active threads", "open thread", active_threads)),
}


@cache
def staged(recipe: Recipe) -> tuple[list[Read], list[Read], Read | None]:
    """The reads made at once, those made only while the budget has room, and L1 retrieval."""
    l1 = recipe[-1] if recipe and recipe[-1].source is l1_retrieval else None
    rest = recipe[:-1] if l1 else recipe
    return [r for r in rest if not r.while_room], [r for r in rest if r.while_room], l1


def first_reads(recipe: Recipe, req: Request) -> list[Call[Any]]:
    """The reads a recipe makes whatever the canon holds, as the reads make them: the story,
    what each read made at once needs, and the first page of each paged read."""
    first, later, _ = staged(recipe)
    needs = dict.fromkeys(fetch for read in first if read.source is not None for fetch in read.source.needs)
    pages = [read for read in (*first, *later) if read.page]
    return [fetches.story(req), *(fetch(req) for fetch in needs),
            *(fetches.entries_page(req, p.kind, "", p.page) for p in pages)]


def check(recipes: dict[str, Recipe]) -> dict[str, Recipe]:
    """Refuses, at import, a recipe table out of step with the domain's roles or its reads: a
    read with no source must be a paged read of one kind, and L1 retrieval comes last."""
    if tuple(recipes) != ROLES:
        raise ValueError(f"recipes are for {tuple(recipes)}, the domain's roles are {ROLES}")
    for recipe in recipes.values():
        for i, read in enumerate(recipe):
            paged = read.source is None and read.page > 0 and read.kind != "canon"
            sourced = read.source is not None and not read.page
            if not (paged or sourced) or read.source is l1_retrieval and i != len(recipe) - 1:
                raise ValueError(f"no source for the read {read.read!r} (L1 retrieval comes last)")
    return recipes


check(RECIPES)
