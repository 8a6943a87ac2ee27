"""Compiler 5, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 6, except that the summarizer's role lists named every tagged entry in force, one
hidden until a later chapter too (``hides=False`` on the role lists). The draft under review
came later to compiler 5, without a new version: a qa packet that names no draft reads nothing
there, so packets compiler 5 issued before it replay alike."""

from __future__ import annotations

from functools import partial

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen.reads import always_on_entries, mentioned_entries
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.reading import Read, Recipe, l1_retrieval
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import (active_threads, chapter_goals, chapter_text,
                                                      current_volume_summary, development_chains, draft_under_review,
                                                      earlier_character_states, earlier_volume_summaries,
                                                      latest_chapter_summaries, output_contract,
                                                      recent_chapter_summaries, recent_timeline, role_lists,
                                                      scene_cards, scene_cards_if_planned, story, style_guardrails,
                                                      tagged_entries, volume_summaries)
from canon_ledger.domain.tiers import P0, P1, P2, P3, P4
from canon_ledger.domain.tokens import TokenCounter

# Every read of compiler 5: a key found as a whole word only, nothing gated, no point-of-view rule.
Read5 = partial(Read, spaceless=False, gate=False, pov=False)
_SCENE: Recipe = (
    Read5(P0, "scene_card", "scene cards", "scene card", scene_cards),
    Read5(P0, "chapter_goals", "chapter goals", "chapter goals", chapter_goals),
    Read5(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
    Read5(P0, "output_contract", "output contract", "output contract", output_contract),
    Read5(P1, "canon", "tagged entries", "tagged", tagged_entries),
    Read5(P1, "canon", "mentioned entries", "mentioned", mentioned_entries),
    Read5(P1, "canon", "always-on entries", "always on", always_on_entries),
    Read5(P1, "thread", "active threads", "active thread", active_threads),
    Read5(P2, "chapter_summary", "recent chapter summaries", "recent chapter summary", recent_chapter_summaries),
    Read5(P2, "volume_summary", "current volume summary", "current volume summary", current_volume_summary),
    Read5(P2, "timeline_event", "recent timeline", "recent timeline", recent_timeline),
    Read5(P3, "volume_summary", "earlier volume summaries", "earlier volume summary", earlier_volume_summaries),
    Read5(P3, "world_rule", "world rules", "world rule", while_room=True, page=64),
    Read5(P3, "history", "earlier character states", "earlier state", earlier_character_states, while_room=True),
    Read5(P4, "development_chain", "development chains", "development chain", development_chains, while_room=True),
    Read5(P4, "chunk", "L1 retrieval", "L1 retrieval", l1_retrieval, while_room=True),
)
RECIPES: dict[str, Recipe] = {
    "planner": (Read5(P0, "scene_card", "scene cards, if planned", "scene card", scene_cards_if_planned),
                *_SCENE[1:]),
    "writer": _SCENE,
    "qa": (*_SCENE[:4],
           Read5(P0, "draft_under_review", "draft under review", "the draft under review: unconfirmed text, not canon",
                 draft_under_review),
           *_SCENE[4:]),
    "summarizer": (Read5(P0, "chapter_text", "chapter text", "accepted chapter text", chapter_text),
                   Read5(P1, "role_lists", "role lists", "names the summary must use", role_lists, hides=False),
                   Read5(P1, "canon", "always-on entries", "always on", always_on_entries)),
    "chat": (Read5(P0, "story", "story", "project", story),
             Read5(P0, "style_guardrails", "style guardrails", "style guardrails", style_guardrails),
             Read5(P1, "canon", "always-on entries", "always on", always_on_entries),
             Read5(P1, "volume_summary", "volume summaries", "project overview", volume_summaries),
             Read5(P2, "chapter_summary", "latest chapter summaries", "latest chapter summary",
                   latest_chapter_summaries),
             Read5(P3, "thread", "active threads", "open thread", active_threads)),
}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 5, snap, req, tokens, retriever, draft=draft)
