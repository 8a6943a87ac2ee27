"""Compiler 2, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 1's recipes, compiled by the shared steps (``compiler.compile_with``) and L1 retrieval
read too (compiler 1 skipped it): every read made at once, whatever room the budget left (L1
too), so what found no room is listed dropped; L1 searched with the rendered goals and
scene-card texts (``reads.rendered_query``)."""

from __future__ import annotations

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v1
from canon_ledger.application.packets.frozen.edits import Table
from canon_ledger.application.packets.frozen.reads import rendered_query
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: Table = v1.RECIPES


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 2, snap, req, tokens, retriever, query=rendered_query)
