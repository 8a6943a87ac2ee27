"""Compiler 1, frozen: L0 alone (no L1 retrieval), every read made at once, and its own stages,
word for word, so the packets it issued replay to the same bytes (``replay.compile_packet``).
Its recipes are spelled out whole here, the first of the frozen ones; each later version's are
this version's as the one before it edited them (``edits``)."""

from __future__ import annotations

from functools import partial

from canon_ledger.application.packets import render
from canon_ledger.application.packets.compiler import fill, refuse_over_budget, start
from canon_ledger.application.packets.packet import Packet, Stage
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.reading import Read, Recipe, l1_retrieval
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import (active_threads, chapter_goals, chapter_text,
                                                      current_volume_summary, development_chains,
                                                      earlier_character_states, earlier_volume_summaries,
                                                      latest_chapter_summaries, output_contract,
                                                      recent_chapter_summaries, recent_timeline, role_lists,
                                                      scene_cards, scene_cards_if_planned, story, style_guardrails,
                                                      tagged_entries, volume_summaries)
from canon_ledger.domain.tiers import P0, P1, P2, P3, P4
from canon_ledger.domain.tokens import TokenCounter

# Every read of compiler 1: a key found as a whole word only, nothing gated, no point-of-view rule.
Read1 = partial(Read, spaceless=False, gate=False, pov=False)
_SCENE: Recipe = (
    Read1(P0, "scene_card", "scene cards", "scene card", scene_cards),
    Read1(P0, "chapter_goals", "chapter goals", "chapter goals", chapter_goals),
    Read1(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
    Read1(P0, "output_contract", "output contract", "output contract", output_contract),
    Read1(P1, "canon", "tagged entries", "tagged", tagged_entries),
    Read1(P1, "thread", "active threads", "active thread", active_threads),
    Read1(P2, "chapter_summary", "recent chapter summaries", "recent chapter summary", recent_chapter_summaries),
    Read1(P2, "volume_summary", "current volume summary", "current volume summary", current_volume_summary),
    Read1(P2, "timeline_event", "recent timeline", "recent timeline", recent_timeline),
    Read1(P3, "volume_summary", "earlier volume summaries", "earlier volume summary", earlier_volume_summaries),
    Read1(P3, "world_rule", "world rules", "world rule", page=64),
    Read1(P3, "history", "earlier character states", "earlier state", earlier_character_states, hides=False),
    Read1(P4, "development_chain", "development chains", "development chain", development_chains),
    Read1(P4, "chunk", "L1 retrieval", "L1 retrieval", l1_retrieval),
)
RECIPES: dict[str, Recipe] = {
    "planner": (Read1(P0, "scene_card", "scene cards, if planned", "scene card", scene_cards_if_planned),
                *_SCENE[1:]),
    "writer": _SCENE,
    "qa": _SCENE,
    "summarizer": (Read1(P0, "chapter_text", "chapter text", "accepted chapter text", chapter_text),
                   Read1(P1, "role_lists", "role lists", "names the summary must use", role_lists, hides=False)),
    "chat": (Read1(P0, "story", "story", "project", story),
             Read1(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
             Read1(P1, "volume_summary", "volume summaries", "project overview", volume_summaries),
             Read1(P2, "chapter_summary", "latest chapter summaries", "latest chapter summary",
                   latest_chapter_summaries),
             Read1(P3, "thread", "active threads", "open thread", active_threads)),
}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    """``retriever`` is ignored: compiler 1 had none."""
    recipe, story_view, budget, reading = start(RECIPES, snap, req, tokens)
    candidates = reading.whole([read for read in recipe if read.source is not l1_retrieval])
    refuse_over_budget(candidates, budget, req.role)
    items = fill(candidates, budget, tokens, snap.texts)
    uses_retrieval = any(read.source is l1_retrieval for read in recipe)
    stages = (
        Stage("scene-keys", "done", reading.detail),
        Stage("l0-recall", "done", f"{len(candidates)} candidates from confirmed canon as of chapter {req.chapter}"),
        Stage("l1-retrieval", "skipped", "not built yet: L0 structured recall only" if uses_retrieval
              else render.no_retrieval(req.role)),
        Stage("wiki", "skipped", "no wiki pages on the packet path yet"),
        Stage("budget", "done", render.usage(items, budget)),
    )
    return Packet(req.story_id, req.role, req.chapter, req.scene, story_view.position, budget, tokens.name,
                  tuple(items), stages, compiler=1).sealed()
