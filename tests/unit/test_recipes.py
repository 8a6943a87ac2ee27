"""The declared recipes: keyed by the domain's roles, the staged and first reads derived from
them, and the earlier compilers' recipes pinned read by read (their packets must replay)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from canon_ledger.application.packets import (compiler_v1, compiler_v2, compiler_v3, compiler_v4, compiler_v5,
                                              compiler_v6, compiler_v7, recipes)
from canon_ledger.application.packets.recipes import FETCH, RECIPES, RETRIEVAL, Read, check, first_reads, staged
from canon_ledger.domain.story import ROLES

# Compiler 3's recipes as it issued packets with them. Never edit: freeze a compiler instead.
_SCENE_V3 = (
    Read("P0", "scene_card", "scene cards", "scene card"),
    Read("P0", "chapter_goals", "chapter goals", "chapter goals"),
    Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
    Read("P0", "output_contract", "output contract", "output contract"),
    Read("P1", "canon", "tagged entries", "tagged"),
    Read("P1", "thread", "active threads", "active thread"),
    Read("P2", "chapter_summary", "recent chapter summaries", "recent chapter summary"),
    Read("P2", "volume_summary", "current volume summary", "current volume summary"),
    Read("P2", "timeline_event", "recent timeline", "recent timeline"),
    Read("P3", "volume_summary", "earlier volume summaries", "earlier volume summary"),
    Read("P3", "world_rule", "world rules", "world rule", while_room=True, page=64),
    Read("P3", "history", "earlier character states", "earlier state", while_room=True, hides=False),
    Read("P4", "development_chain", "development chains", "development chain", while_room=True),
    Read("P4", "chunk", RETRIEVAL, RETRIEVAL, while_room=True),
)
RECIPES_V3 = {
    "planner": (Read("P0", "scene_card", "scene cards, if planned", "scene card"), *_SCENE_V3[1:]),
    "writer": _SCENE_V3,
    "qa": _SCENE_V3,
    "summarizer": (Read("P0", "chapter_text", "chapter text", "accepted chapter text"),
                   Read("P1", "role_lists", "role lists", "names the summary must use", hides=False)),
    "chat": (Read("P0", "story", "story", "project"),
             Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
             Read("P1", "volume_summary", "volume summaries", "project overview"),
             Read("P2", "chapter_summary", "latest chapter summaries", "latest chapter summary"),
             Read("P3", "thread", "active threads", "open thread")),
}
# Before compiler 7 a key was found as a whole word only and no read was gated (``Read.spaceless``
# and ``Read.gate``, new with 7); before 8 no read applied the point-of-view rule (``Read.pov``).
RECIPES_V3 = {role: tuple(replace(r, spaceless=False, gate=False, pov=False) for r in recipe)
              for role, recipe in RECIPES_V3.items()}


# Compiler 4's: compiler 3's, an earlier character state hidden until a later chapter dropped
# without its text. Up to compiler 5 the role lists read ignored ``hides`` (it named hidden
# entries, as compiler 5 pins it below: ``hides=False``), so the tables above say False for it.
RECIPES_V4 = {role: tuple(replace(r, hides=r.read != "role lists") for r in recipe)
              for role, recipe in RECIPES_V3.items()}
# Compiler 6's, as it issued packets with them. Never edit: freeze a compiler instead.
_SCENE_V6 = (
    Read("P0", "scene_card", "scene cards", "scene card"),
    Read("P0", "chapter_goals", "chapter goals", "chapter goals"),
    Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
    Read("P0", "output_contract", "output contract", "output contract"),
    Read("P1", "canon", "tagged entries", "tagged"),
    Read("P1", "canon", "mentioned entries", "mentioned"),
    Read("P1", "canon", "always-on entries", "always on"),
    Read("P1", "thread", "active threads", "active thread"),
    Read("P2", "chapter_summary", "recent chapter summaries", "recent chapter summary"),
    Read("P2", "volume_summary", "current volume summary", "current volume summary"),
    Read("P2", "timeline_event", "recent timeline", "recent timeline"),
    Read("P3", "volume_summary", "earlier volume summaries", "earlier volume summary"),
    Read("P3", "world_rule", "world rules", "world rule", while_room=True, page=64),
    Read("P3", "history", "earlier character states", "earlier state", while_room=True),
    Read("P4", "development_chain", "development chains", "development chain", while_room=True),
    Read("P4", "chunk", RETRIEVAL, RETRIEVAL, while_room=True),
)
RECIPES_V6 = {
    "planner": (Read("P0", "scene_card", "scene cards, if planned", "scene card"), *_SCENE_V6[1:]),
    "writer": _SCENE_V6,
    "qa": (*_SCENE_V6[:4], Read("P0", "draft_under_review", "draft under review",
                                "the draft under review: unconfirmed text, not canon"), *_SCENE_V6[4:]),
    "summarizer": (Read("P0", "chapter_text", "chapter text", "accepted chapter text"),
                   Read("P1", "role_lists", "role lists", "names the summary must use"),
                   Read("P1", "canon", "always-on entries", "always on")),
    "chat": (Read("P0", "story", "story", "project"),
             Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
             Read("P1", "canon", "always-on entries", "always on"),
             Read("P1", "volume_summary", "volume summaries", "project overview"),
             Read("P2", "chapter_summary", "latest chapter summaries", "latest chapter summary"),
             Read("P3", "thread", "active threads", "open thread")),
}
RECIPES_V6 = {role: tuple(replace(r, spaceless=False, gate=False, pov=False) for r in recipe)
              for role, recipe in RECIPES_V6.items()}
# Compiler 5's: compiler 6's with the role lists naming hidden entries too (compiler 6 leaves them out).
RECIPES_V5 = {role: tuple(replace(r, hides=False) if r.read == "role lists" else r for r in recipe)
              for role, recipe in RECIPES_V6.items()}


def test_earlier_compilers_recipes_are_pinned() -> None:
    # Compiler 7's: the current ones without the qa packet's continuity findings (compiler 8).
    assert compiler_v7.RECIPES == {role: tuple(replace(r, pov=False) for r in recipe if r.read != "continuity findings")
                                   for role, recipe in RECIPES.items()}
    assert [r.read for r in RECIPES["qa"]].index("continuity findings") == [
        r.read for r in RECIPES["qa"]].index("draft under review") + 1
    assert compiler_v6.RECIPES == RECIPES_V6
    assert [[r.read for r in recipe if r.tier == "P2"][:1] for recipe in RECIPES.values()] == [
        ["previous chapter ending"]] * 3 + [[], ["latest chapter summaries"]]
    assert compiler_v5.RECIPES == RECIPES_V5
    assert [r for recipe in RECIPES.values() for r in recipe if r.read == "role lists"][0].hides
    assert compiler_v4.RECIPES == RECIPES_V4
    assert compiler_v3.RECIPES == RECIPES_V3
    all_at_once = {role: tuple(replace(r, while_room=False) for r in recipe) for role, recipe in RECIPES_V3.items()}
    assert compiler_v2.RECIPES == all_at_once
    assert compiler_v1.RECIPES is compiler_v2.RECIPES


def test_recipes_are_keyed_by_the_domains_roles() -> None:
    assert tuple(RECIPES) == ROLES
    with pytest.raises(ValueError, match="roles"):
        check({role: RECIPES[role] for role in reversed(ROLES)})
    with pytest.raises(ValueError, match="no source"):
        check({**RECIPES, "chat": (Read("P0", "story", "no such read", "project"),)})
    with pytest.raises(ValueError, match="no source"):  # L1 retrieval must be last
        check({**RECIPES, "writer": (RECIPES["writer"][-1], *RECIPES["writer"][:-1])})


def test_staged_reads_are_derived_from_the_recipe() -> None:
    first, later, l1 = staged(RECIPES["writer"])
    assert all(r.tier in ("P0", "P1", "P2", "P3") and not r.while_room for r in first)
    assert [r.read for r in later] == ["world rules", "earlier character states", "development chains"]
    assert l1 is not None and l1.read == RETRIEVAL
    assert staged(RECIPES["chat"])[1:] == ([], None) and staged(RECIPES["summarizer"])[2] is None
    assert [role for role, recipe in RECIPES.items() if staged(recipe)[2]] == ["planner", "writer", "qa"]


def _first(role: str) -> list[tuple[str, tuple[object, ...]]]:
    return [(call.method, call.args) for call in first_reads(RECIPES[role], recipes.Request("s", role, 9))]


def test_first_reads_are_derived_from_the_recipe() -> None:
    writer = _first("writer")
    assert [name for name, _ in writer] == ["story", "chapter", "scenes", "lore", "active_entries", "chapter",
                                            "chapter_summaries", "volume_summaries", "entries_since", "entries_page"]
    assert writer[5][1] == ("s", 8)  # the previous chapter, for its ending
    assert writer[-1][1] == ("s", 9, "world_rule", "", recipes.WORLD_RULE_PAGE)
    assert [name for name, _ in _first("summarizer")] == ["story", "chapter", "scenes", "lore"]
    assert [name for name, _ in _first("chat")] == ["story", "lore", "volume_summaries", "chapter_summaries",
                                                    "active_entries"]
    assert set(FETCH) >= {name for recipe in RECIPES.values() for r in recipe if r.read in recipes.SOURCES
                          for name in recipes.SOURCES[r.read][0]}
