"""Compiler 6, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 7 (``compiler``), except that P2 held no end of the previous chapter, a mentioned
entry's key was found as a whole word only (a Chinese key inside Chinese text was not), L1 asked for
the retriever's default 8 passages whatever room L0 left (every hit a candidate, listed dropped
when it had no room), and the truncate stage said only what was used. tests/unit/test_recipes.py
pins these recipes read by read.
"""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import recipes
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.recipes import Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

NEW_IN_7 = ("previous chapter ending",)
RECIPES: dict[str, Recipe] = {role: tuple(replace(read, spaceless=False) for read in recipe if read.read not in NEW_IN_7)
                              for role, recipe in recipes.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 6, snap, req, tokens, retriever, draft=draft)
