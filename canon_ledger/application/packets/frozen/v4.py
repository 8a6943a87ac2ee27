"""Compiler 4, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 3's recipes, except that a character's earlier state hidden until a later chapter is
listed without its text (``hides`` on the earlier character states; compiler 3 listed it
whole). L1's query is still taken from the rendered goals and scene-card texts
(``reads.rendered_query``)."""

from __future__ import annotations

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v3
from canon_ledger.application.packets.frozen.edits import Table, changed
from canon_ledger.application.packets.frozen.reads import rendered_query
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: Table = changed(v3.RECIPES, ("earlier character states",), hides=True)


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 4, snap, req, tokens, retriever, query=rendered_query)
