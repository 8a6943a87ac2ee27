"""Compiler 5, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 6 (``compiler_v6``), except that the summarizer's role lists named every tagged entry
in force, one hidden until a later chapter too (``hides=False`` on the role lists read). It
took a draft under review as compiler 6 does. tests/unit/test_recipes.py pins these recipes
read by read.
"""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import compiler_v6
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.recipes import Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

ROLE_LISTS = "role lists"
RECIPES: dict[str, Recipe] = {
    role: tuple(replace(read, hides=False) if read.read == ROLE_LISTS else read for read in recipe)
    for role, recipe in compiler_v6.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 5, snap, req, tokens, retriever, draft=draft)
