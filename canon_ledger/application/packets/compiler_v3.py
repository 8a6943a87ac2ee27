"""Compiler 3, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 4 (``compiler_v4``), except that a character's earlier state hidden until a later chapter was
listed whole (``hides=False``). tests/unit/test_recipes.py pins these recipes read by read:
a change to the current ones that would reach them must write the old ones out here.
"""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import compiler_v4
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.recipes import Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: dict[str, Recipe] = {
    role: tuple(replace(read, hides=False) if read.read == "earlier character states" else read for read in recipe)
    for role, recipe in compiler_v4.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 3, snap, req, tokens, retriever, query=compiler_v4.rendered_query)
