"""Compiler 6, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 5's recipes, except that the summarizer's role lists leave out a tagged entry hidden
until a later chapter (``hides`` on the role lists; compiler 5 named every tagged entry in
force)."""

from __future__ import annotations

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v5
from canon_ledger.application.packets.frozen.edits import Table, changed
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.tokens import TokenCounter

RECIPES: Table = changed(v5.RECIPES, ("role lists",), hides=True)


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 6, snap, req, tokens, retriever, draft=draft)
