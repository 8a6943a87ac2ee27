"""Compiler 3, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 2's recipes, the world rules, the earlier character states, the development chains
and L1 retrieval read only after every other read, and only while the budget has room."""

from __future__ import annotations

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v2
from canon_ledger.application.packets.frozen.edits import Table, changed
from canon_ledger.application.packets.frozen.reads import rendered_query
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: Table = changed(v2.RECIPES, ("world rules", "earlier character states", "development chains",
                                      "L1 retrieval"), while_room=True)


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 3, snap, req, tokens, retriever, query=rendered_query)
