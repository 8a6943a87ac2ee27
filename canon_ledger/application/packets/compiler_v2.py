"""Compiler 2, frozen (pinned as compiler 3 is): compiler 3's recipes with every read made
at once, whatever room the budget left (L1 too), so what found no room is listed dropped."""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import compiler_v3, compiler_v4
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.recipes import Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: dict[str, Recipe] = {role: tuple(replace(read, while_room=False) for read in recipe)
                              for role, recipe in compiler_v3.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 2, snap, req, tokens, retriever, query=compiler_v4.rendered_query)
