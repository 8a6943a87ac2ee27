"""Compiler 5, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 4's recipes with entries' recall rules: the entries the scene mentions and the
always-on entries, two reads in key order (``reads``), right after the tagged entries; the
always-on entries in the summarizer's and the chat's packets too; an entry whose rule says
never kept out; and the draft under review in the qa packet, right after the output contract.
L1 searches with the current query (``compiler.l1_query``), no longer the rendered texts.
The draft under review came later to compiler 5, without a new version: a qa packet that names
no draft reads nothing there, so packets compiler 5 issued before it replay alike."""

from __future__ import annotations

from functools import partial

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v4
from canon_ledger.application.packets.frozen.edits import Table, inserted
from canon_ledger.application.packets.frozen.reads import always_on_entries, mentioned_entries
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.reading import Read
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import draft_under_review
from canon_ledger.domain.tiers import P0, P1
from canon_ledger.domain.tokens import TokenCounter

# Every read of compiler 5, as of compilers 1-4: a key found as a whole word only, nothing gated,
# no point-of-view rule.
Read5 = partial(Read, spaceless=False, gate=False, pov=False)
_ALWAYS_ON = Read5(P1, "canon", "always-on entries", "always on", always_on_entries)
_DRAFT = Read5(P0, "draft_under_review", "draft under review", "the draft under review: unconfirmed text, not canon",
               draft_under_review)

RECIPES: Table = inserted(v4.RECIPES, "tagged entries",
                          (Read5(P1, "canon", "mentioned entries", "mentioned", mentioned_entries), _ALWAYS_ON))
RECIPES = inserted(RECIPES, "output contract", (_DRAFT,), roles=("qa",))
RECIPES = inserted(RECIPES, "role lists", (_ALWAYS_ON,), roles=("summarizer",))
RECIPES = inserted(RECIPES, "style guardrails", (_ALWAYS_ON,), roles=("chat",))


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 5, snap, req, tokens, retriever, draft=draft)
