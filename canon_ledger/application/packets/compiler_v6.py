"""Compiler 6, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 7 (``compiler_v7``), except that P2 held no end of the previous chapter; a mentioned
entry's key was found as a whole word only (a Chinese key inside Chinese text was not); the
mentioned entries and the always-on ones were two reads in key order, under no lore cap, and an
imported lorebook entry was not gated (its kind's wholesale read listed it too); L1 asked for
the retriever's default 8 passages whatever room L0 left (every hit a candidate, listed dropped
when it had no room), and the truncate stage said only what was used. tests/unit/test_recipes.py
pins these recipes read by read.
"""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import compiler_v7, recipes
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.recipes import Read, Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

NEW_IN_7 = ("previous chapter ending",)
# Compiler 7's reads of lore, as the reads compiler 6 made instead.
WAS = {recipes.LORE: (Read("P1", "canon", "mentioned entries", "mentioned"), Read("P1", "canon", recipes.ALWAYS, "always on")),
       recipes.LORE_ALWAYS: (Read("P1", "canon", recipes.ALWAYS, "always on"),)}


def _as_in_6(recipe: Recipe) -> Recipe:
    reads = (was for read in recipe if read.read not in NEW_IN_7 for was in WAS.get(read.read, (read,)))
    return tuple(replace(read, spaceless=False, gate=False, pov=False) for read in reads)


RECIPES: dict[str, Recipe] = {role: _as_in_6(recipe) for role, recipe in compiler_v7.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 6, snap, req, tokens, retriever, draft=draft)
