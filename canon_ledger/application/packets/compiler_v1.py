"""Compiler 1, frozen: compiler 2's L0 reads, no L1 retrieval, and its own stages, word for
word, so the packets it issued replay to the same bytes."""

from __future__ import annotations

from canon_ledger.application.packets import render
from canon_ledger.application.packets.compiler import fill, refuse_over_budget, start
from canon_ledger.application.packets.compiler_v2 import RECIPES
from canon_ledger.application.packets.packet import Packet, Stage
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.recipes import RETRIEVAL, Request
from canon_ledger.domain.tokens import TokenCounter


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    """``retriever`` is ignored: compiler 1 had none."""
    recipe, story, budget, reading = start(RECIPES, snap, req, tokens)
    candidates = reading.whole([read for read in recipe if read.read != RETRIEVAL])
    refuse_over_budget(candidates, budget, req.role)
    items = fill(candidates, budget, tokens, snap.texts)
    uses_retrieval = any(read.read == RETRIEVAL for read in recipe)
    stages = (
        Stage("scene-keys", "done", reading.detail),
        Stage("l0-recall", "done", f"{len(candidates)} candidates from confirmed canon as of chapter {req.chapter}"),
        Stage("l1-retrieval", "skipped", "not built yet: L0 structured recall only" if uses_retrieval
              else render.no_retrieval(req.role)),
        Stage("wiki", "skipped", "no wiki pages on the packet path yet"),
        Stage("budget", "done", render.usage(items, budget)),
    )
    return Packet(req.story_id, req.role, req.chapter, req.scene, story.position, budget, tokens.name,
                  tuple(items), stages, compiler=1).sealed()
