"""Compiler 7, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

Compiler 6's recipes, with: the end of the previous chapter in P2, right after the active
threads; a mentioned entry's key found as SillyTavern finds it across scripts (a Chinese key
inside Chinese text too: ``spaceless``); the mentioned and the always-on entries one read
(``sources.lore_entries``; ``sources.always_on_lore`` where only the always-on ones were read),
under the story's lore cap; and an imported lorebook entry its rule gates left out of every
read but those that bring entries in by their rule or a tag (``gate``). L1 asks for what fits
the room L0 left (compiler 6 asked for the retriever's default 8 passages whatever the room,
every hit a candidate, listed dropped when it had no room), and the truncate stage says what
is left and why (compiler 6: only what was used); ``compile_with`` does so from version 7.

Compiler 8 (``recipes``) added a qa packet's continuity findings and the point-of-view rule
for secrets (``pov``); nothing else: every packet it builds with no draft under review and no
secret its point of view changed is compiler 7's, byte for byte, and says so
(``compiler.stamped``)."""

from __future__ import annotations

from functools import partial

from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.frozen import v6
from canon_ledger.application.packets.frozen.edits import SCENE_ROLES, Table, changed, inserted, replaced
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Retriever
from canon_ledger.application.packets.reading import Read
from canon_ledger.application.packets.request import Request
from canon_ledger.application.packets.sources import always_on_lore, lore_entries, previous_chapter_ending
from canon_ledger.domain.tiers import P1, P2
from canon_ledger.domain.tokens import TokenCounter

# Every read of compiler 7: no point-of-view rule.
Read7 = partial(Read, pov=False)

RECIPES: Table = changed(v6.RECIPES, spaceless=True, gate=True)
RECIPES = changed(RECIPES, ("tagged entries",), gate=False)
RECIPES = replaced(RECIPES, "mentioned entries",
                   (Read7(P1, "canon", "lore entries", "mentioned", lore_entries, gate=False),))
RECIPES = replaced(RECIPES, "always-on entries", (), roles=SCENE_ROLES)
RECIPES = replaced(RECIPES, "always-on entries",
                   (Read7(P1, "canon", "always-on lore", "always on", always_on_lore, gate=False),))
RECIPES = inserted(RECIPES, "active threads",
                   (Read7(P2, "chapter_ending", "previous chapter ending",
                          "the end of the previous chapter's accepted text", previous_chapter_ending),),
                   roles=SCENE_ROLES)


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   draft: DraftView | None = None) -> Packet:
    return compile_with(RECIPES, 7, snap, req, tokens, retriever, draft=draft)
