"""Compiler 7, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 8 (``compiler``), except that a qa packet's draft under review came with no
continuity findings, and a secret was packed like any entry whatever the scene's point of view.
Compiler 8 changed nothing else: every packet it builds with no draft under review and no secret
its point of view changed is compiler 7's, byte for byte, and says so (``compiler.stamped``).
"""

from __future__ import annotations

from dataclasses import replace

from canon_ledger.application.packets import recipes
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.recipes import Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

NEW_IN_8 = (recipes.CONTINUITY,)
RECIPES: dict[str, Recipe] = {role: tuple(replace(read, pov=False) for read in recipe if read.read not in NEW_IN_8)
                              for role, recipe in recipes.RECIPES.items()}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 7, snap, req, tokens, retriever, draft=draft)
