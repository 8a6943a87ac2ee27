"""Compiler 4, frozen: packets it issued replay to the same bytes (``replay.compile_packet``).

As compiler 5 without entries' recall rules (no mentioned or always-on entries, and no entry
kept out by its rule), and with L1's query taken from the rendered goals and scene-card
texts. tests/unit/test_recipes.py pins these recipes read by read.
"""

from __future__ import annotations

from canon_ledger.application.packets import compiler_v5, recipes
from canon_ledger.application.packets.compiler import compile_with
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonSnapshot, Retriever
from canon_ledger.application.packets.recipes import Candidate, Reading, Recipe, Request
from canon_ledger.domain.tokens import TokenCounter

# The draft under review came later to compiler 5, without a new version: a qa packet that
# names no draft reads nothing there, so packets compiler 5 issued before it replay alike.
NEW_IN_5 = ("mentioned entries", recipes.ALWAYS, recipes.REVIEW)
RECIPES: dict[str, Recipe] = {role: tuple(read for read in recipe if read.read not in NEW_IN_5)
                              for role, recipe in compiler_v5.RECIPES.items()}
QUERY_WORDS = 64


def rendered_query(reading: Reading, candidates: list[Candidate]) -> str:
    """The goals' items and each scene's summary, read back out of the texts the projection
    rendered ("Chapter N goals:\\n- ...", "Scene s (chapter N): summary\\n..."): the first line
    of a summary only, and a card with no summary gives its heading."""
    parts = []
    for kind in ("chapter_goals", "scene_card"):
        for c in candidates:
            if c.kind != kind or not c.fact.text:
                continue
            lines = c.fact.text.splitlines()
            if kind == "chapter_goals":
                parts += [line.removeprefix("- ") for line in lines[1:]]
            else:
                parts.append(lines[0].partition("): ")[2] or lines[0])
    return " ".join(" ".join(parts).split()[:QUERY_WORDS])


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None) -> Packet:
    return compile_with(RECIPES, 4, snap, req, tokens, retriever, query=rendered_query)
