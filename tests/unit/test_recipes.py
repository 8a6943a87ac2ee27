"""The declared recipes: keyed by the domain's roles, the staged and first reads derived from
them, and every compiler's recipes pinned field by field (their packets must replay): the
earlier ones frozen apart from the current ones, which nothing frozen derives from."""

from __future__ import annotations

import ast
import hashlib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from canon_ledger.application.packets import fetches, recipes, sources
from canon_ledger.application.packets.frozen import reads, v1, v2, v3, v4, v5, v6, v7
from canon_ledger.application.packets.ports import CanonSnapshot
from canon_ledger.application.packets.reading import Read, Recipe, l1_retrieval
from canon_ledger.application.packets.recipes import RECIPES, RETRIEVAL, check, first_reads, staged
from canon_ledger.domain.story import ROLES
from canon_ledger.domain.tiers import P0, P1, P2, P3

TABLES: dict[int, dict[str, Recipe]] = {1: v1.RECIPES, 2: v2.RECIPES, 3: v3.RECIPES, 4: v4.RECIPES, 5: v5.RECIPES,
                                        6: v6.RECIPES, 7: v7.RECIPES, 8: RECIPES}
# sha256 of each compiler's recipes, every field of every read (``_rendered``). Never edit one: a
# frozen compiler's recipes are the ones it issued packets with, and compiler 8's (the current
# ones) change only with a new compiler (freeze 8 first, as frozen/v7.py is frozen). On a
# failure the message shows the recipes as they are now.
PINNED = {
    1: "a2947da47bc6ee9961d8beaa757f6e9a1898de5dcca78b6ef1586eb5711bf04f",
    2: "a2947da47bc6ee9961d8beaa757f6e9a1898de5dcca78b6ef1586eb5711bf04f",
    3: "f281a310ba623d87418f82cae3e2cd9000e1ad8e175c930d19f41d4ba436b90f",
    4: "50c1706b80125d71fad0711357ec181f8d8c147a4a72fcab06b352e626f37ef1",
    5: "e65b963b475b2780771871b058f62d23fc3ef92e64c3d2fa1e4290a304371aba",
    6: "40986b9e2124121e3c5cc4d14b0cc5e26b9358d18984a210e32e14cade01d1f9",
    7: "e59ce98f9dccaf56b95f6e943ff99fa821ccda5bddb06ad967eb3aeba1d3ad25",
    8: "29c4ca5d7a0ca08e7c01f9e5b7bf52d0e127ff441431732aa06c0b079e461f69",
}


def _value(name: str, value: Any) -> str:
    if name == "source":
        return "None" if value is None else f"{value.candidates.__module__}.{value.candidates.__qualname__}"
    return repr(value)


def _rendered(table: dict[str, Recipe]) -> str:
    """One line per read, every field's value written out (a source by its function's name)."""
    return "\n".join(f"{role}: " + ", ".join(f"{f.name}={_value(f.name, getattr(read, f.name))}" for f in fields(read))
                     for role, recipe in table.items() for read in recipe)


def _digest(table: dict[str, Recipe]) -> str:
    return hashlib.sha256(_rendered(table).encode()).hexdigest()


def test_every_compilers_recipes_are_pinned() -> None:
    for version, table in TABLES.items():
        assert _digest(table) == PINNED[version], f"compiler {version}'s recipes changed:\n{_rendered(table)}"


@pytest.mark.parametrize("field", [f.name for f in fields(Read)])
def test_the_pin_sees_every_field_of_every_read(field: str) -> None:
    """A change to any field of one read (to what a default now gives, too) changes the digest."""
    other = {"tier": P1, "kind": "x", "read": "x", "reason": "x", "source": sources.story, "page": 7}.get(field)
    for version, table in TABLES.items():
        role, recipe = next(iter(table.items()))
        read = recipe[0]
        changed = replace(read, **{field: other if other is not None else not getattr(read, field)})
        assert _digest({**table, role: (changed, *recipe[1:])}) != _digest(table), (version, field)


def _frozen_versions_imported(node: ast.ImportFrom) -> set[int]:
    """The frozen versions (``frozen.vN``) an import names, by number."""
    frozen = "canon_ledger.application.packets.frozen"
    if node.module == frozen:
        names = {a.name for a in node.names}
    elif node.module and node.module.startswith(f"{frozen}."):
        names = {node.module.removeprefix(f"{frozen}.")}
    else:
        return set()
    return {int(n[1:]) for n in names if n[:1] == "v" and n[1:].isdigit()}


def test_no_frozen_compiler_reads_the_current_recipes_or_a_newer_version() -> None:
    """What a frozen module may import: the compiler's steps, the reads' sources, the pure
    domain and an older frozen version (each is the one before it plus what it changed); never
    the current recipes, nor a newer frozen version (so no edit of those can change it). And
    only the replay entry imports a frozen version."""
    folder = Path(v1.__file__).parent
    package = folder.parent.parent.parent
    for path in sorted(package.rglob("*.py")):
        if path.parent == folder or path.name == "replay.py" and path.parent == folder.parent:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("canon_ledger.application.packets.frozen"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("canon_ledger.application.packets.frozen") for a in node.names), path
    for path in sorted(folder.glob("*.py")):
        # a version's own number; the other frozen modules (reads, edits) may import no version
        own = int(path.stem[1:]) if path.stem[:1] == "v" and path.stem[1:].isdigit() else 0
        for node in ast.walk(ast.parse(path.read_text())):
            assert not isinstance(node, ast.Import) or not any(a.name.startswith("canon_ledger") for a in node.names), \
                path.name
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {a.name for a in node.names}
                assert node.module != "canon_ledger.application.packets.recipes", path.name
                assert not (node.module == "canon_ledger.application.packets" and "recipes" in names), path.name
                assert all(v < own for v in _frozen_versions_imported(node)), path.name


def _all(table: dict[str, Recipe], **changes: Any) -> dict[str, Recipe]:
    return {role: tuple(replace(r, **changes) for r in recipe) for role, recipe in table.items()}


def _without(table: dict[str, Recipe], *names: str) -> dict[str, Recipe]:
    return {role: tuple(r for r in recipe if r.read not in names) for role, recipe in table.items()}


def _but(table: dict[str, Recipe], name: str, **changes: Any) -> dict[str, Recipe]:
    return {role: tuple(replace(r, **changes) if r.read == name else r for r in recipe)
            for role, recipe in table.items()}


def test_what_each_compiler_changed() -> None:
    """Each version against the next, as its module's docstring says (each module states its
    recipes as the one before it edited; these state the changes the other way round)."""
    assert v1.RECIPES == v2.RECIPES  # 1 made compiler 2's reads without L1
    assert v2.RECIPES == _all(v3.RECIPES, while_room=False)  # 3: P3 and P4 read while the budget has room
    assert v3.RECIPES == _but(v4.RECIPES, "earlier character states", hides=False)  # 4: hidden history dropped
    # 5: mention-activated recall, always-on entries, the draft under review
    assert v4.RECIPES == _without(v5.RECIPES, "mentioned entries", "always-on entries", "draft under review")
    assert v5.RECIPES == _but(v6.RECIPES, "role lists", hides=False)  # 6: role lists leave hidden entries out
    # 7: the previous chapter's ending, mentions across scripts, the lore reads as one (and capped), gating
    split = {"lore entries": (Read(P1, "canon", "mentioned entries", "mentioned", reads.mentioned_entries),
                              Read(P1, "canon", "always-on entries", "always on", reads.always_on_entries)),
             "always-on lore": (Read(P1, "canon", "always-on entries", "always on", reads.always_on_entries),)}
    assert v6.RECIPES == {role: tuple(replace(was, spaceless=False, gate=False, pov=False)
                                      for r in recipe if r.read != "previous chapter ending"
                                      for was in split.get(r.read, (r,)))
                          for role, recipe in v7.RECIPES.items()}
    # 8: the qa packet's continuity findings, right after the draft; the point-of-view rule
    assert v7.RECIPES == _all(_without(RECIPES, "continuity findings"), pov=False)
    qa = [r.read for r in RECIPES["qa"]]
    assert qa.index("continuity findings") == qa.index("draft under review") + 1


def test_recipes_are_keyed_by_the_domains_roles() -> None:
    assert tuple(RECIPES) == ROLES
    with pytest.raises(ValueError, match="roles"):
        check({role: RECIPES[role] for role in reversed(ROLES)})
    with pytest.raises(ValueError, match="no source"):
        check({**RECIPES, "chat": (Read(P0, "story", "no such read", "project"),)})
    with pytest.raises(ValueError, match="no source"):  # L1 retrieval must be last
        check({**RECIPES, "writer": (RECIPES["writer"][-1], *RECIPES["writer"][:-1])})
    for table in TABLES.values():
        check(table)


def test_staged_reads_are_derived_from_the_recipe() -> None:
    first, later, l1 = staged(RECIPES["writer"])
    assert all(r.tier in (P0, P1, P2, P3) and not r.while_room for r in first)
    assert [r.read for r in later] == ["world rules", "earlier character states", "development chains"]
    assert l1 is not None and l1.read == RETRIEVAL and l1.source is l1_retrieval
    assert staged(RECIPES["chat"])[1:] == ([], None) and staged(RECIPES["summarizer"])[2] is None
    assert [role for role, recipe in RECIPES.items() if staged(recipe)[2]] == ["planner", "writer", "qa"]


def _first(role: str) -> list[tuple[str, tuple[object, ...]]]:
    return [(call.read.__name__, call.args) for call in first_reads(RECIPES[role], recipes.Request("s", role, 9))]


def test_first_reads_are_derived_from_the_recipe() -> None:
    writer = _first("writer")
    assert [name for name, _ in writer] == ["story", "chapter", "scenes", "lore", "active_entries", "chapter",
                                            "chapter_summaries", "volume_summaries", "entries_since", "entries_page"]
    assert writer[5][1] == ("s", 8)  # the previous chapter, for its ending
    assert writer[-1][1] == ("s", 9, "world_rule", "", recipes.WORLD_RULE_PAGE)
    assert [name for name, _ in _first("summarizer")] == ["story", "chapter", "scenes", "lore"]
    assert [name for name, _ in _first("chat")] == ["story", "lore", "volume_summaries", "chapter_summaries",
                                                    "active_entries"]
    # every read a source needs is a request-only read of the port
    needs = {fetch for table in TABLES.values() for recipe in table.values() for r in recipe if r.source
             for fetch in r.source.needs}
    assert needs <= {f for f in vars(fetches).values() if callable(f)}
    assert all(callable(getattr(CanonSnapshot, fetch(recipes.Request("s", "writer", 9)).read.__name__))
               for fetch in needs)
