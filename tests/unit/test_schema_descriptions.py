"""`canon schema` describes every command and every field (issue 21), with units and allowed values.

The walk covers the whole published schema: the union, every ``$defs`` entry (each command
model and any nested model a future field brings) and every inline object with properties.
The pinned checks hold the descriptions to the code they describe: the chapter range, the
``valid_from`` / ``hidden_until`` rule, the bounds of ``fields``, the thread state packets act
on, the per-role budget defaults and the canon kinds. Removing one of them fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from canon_ledger.domain import bounds as b
from canon_ledger.domain import commands
from canon_ledger.domain.canon import KINDS
from canon_ledger.domain.commands import json_schema
from canon_ledger.domain.story import DEFAULT_BUDGETS, ROLES

SCHEMA = json_schema()
DEFS = SCHEMA["$defs"]
CHAPTERS = f"1..{b.MAX_CHAPTER:,}"


def _objects(node: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every schema object that declares properties, wherever it is nested."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield path, node
        for key, value in node.items():
            yield from _objects(value, f"{path}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _objects(value, f"{path}/{n}")


def _described(node: dict) -> bool:
    return isinstance(node.get("description"), str) and bool(node["description"].strip())


def prop(model: str, name: str) -> str:
    return DEFS[model]["properties"][name]["description"]


def test_the_walk_sees_every_command() -> None:
    mapping = SCHEMA["discriminator"]["mapping"]
    assert len(mapping) == 19
    assert {ref.rsplit("/", 1)[1] for ref in mapping.values()} <= set(DEFS)
    assert {path for path, _ in _objects(SCHEMA, "#")} >= {f"#/$defs/{name}" for name in DEFS}


def test_the_union_and_every_command_type_are_described() -> None:
    assert _described(SCHEMA)
    undescribed = [name for name in DEFS if not _described(DEFS[name])]
    assert not undescribed, f"commands without a description: {undescribed}"


def test_every_property_of_every_command_is_described() -> None:
    missing = [f"{path}/properties/{name}" for path, obj in _objects(SCHEMA, "#")
               for name, sub in obj["properties"].items() if not _described(sub)]
    assert not missing, f"fields without a description: {missing}"
    assert sum(len(obj["properties"]) for _, obj in _objects(SCHEMA, "#")) > 80  # the walk found the fields


def test_every_model_field_carries_its_description_into_the_schema() -> None:
    """The schema and the pydantic models agree, so a field added without one fails too."""
    models = [m for m in vars(commands).values()
              if inspect.isclass(m) and issubclass(m, commands.BaseModel) and m.__name__ in DEFS]
    assert len(models) == len(DEFS)
    for model in models:
        for name, info in model.model_fields.items():
            assert info.description and info.description.strip(), f"{model.__name__}.{name}"
            assert DEFS[model.__name__]["properties"][name]["description"] == info.description


@pytest.mark.parametrize(("model", "name"), [
    (model, name) for model, d in DEFS.items() for name in d["properties"]
    if name in ("chapter", "volume", "valid_from")
])
def test_chapter_numbers_state_their_range(model: str, name: str) -> None:
    assert CHAPTERS in prop(model, name), (model, name)


def test_valid_from_says_when_a_version_is_in_force_and_how_hidden_until_and_retiring_bear_on_it() -> None:
    text = prop("ProposeCanon", "valid_from")
    for needed in (CHAPTERS, "in force", "`valid_from` <= K", "later confirmation wins", "not in canon",
                   "retire_canon", "hidden_until", "absent, null or <= K"):
        assert needed in text, needed
    retire = prop("RetireCanon", "valid_from")
    for needed in (CHAPTERS, "out of canon", "`valid_from` <= K", "only_confirmed_canon_can_be_retired",
                   "retirement notice"):
        assert needed in retire, needed


def test_fields_names_its_control_keys_and_bounds() -> None:
    text = prop("ProposeCanon", "fields")
    for needed in ("`state`", "`hidden_until`", "`nodes`", "{id, text, kind?, hidden_until?}", "development_chain",
                   f"at most {b.MAX_STATE} characters", f"{b.MAX_FIELDS_DEPTH} levels",
                   f"{b.MAX_FIELDS_ITEMS:,} keys and list items", f"{b.MAX_FIELDS_BYTES:,} bytes",
                   f"{b.MAX_JSON_INT:,}", "state_must_be_text", "hidden_until_must_be_a_chapter",
                   "chain_nodes_must_be_well_formed"):
        assert needed in text, needed


def test_hidden_until_says_what_it_hides_and_until_when() -> None:
    text = prop("ProposeCanon", "fields")
    for needed in (CHAPTERS, "or null", "K < N", "`dropped`", '"hidden until chapter N"', "no text",
                   "K >= N", "this version only", "below author scope", "labelled hidden"):
        assert needed in text, needed
    # The rule the description states is the one the packet recipes apply: hidden while K < N.
    from types import SimpleNamespace

    from canon_ledger.application.packets.reading import hidden as _hidden
    entry = SimpleNamespace(hidden_until=9)
    assert _hidden(entry, 8) == "hidden until chapter 9" and _hidden(entry, 9) is None
    assert _hidden(SimpleNamespace(hidden_until=None), 1) is None


def test_thread_states_name_the_value_that_resolves_a_thread() -> None:
    text = prop("ProposeCanon", "fields")
    for needed in ("`resolved`", "case-insensitively", "`open`", "`advanced`", "keeps it active", "thread"):
        assert needed in text, needed
    # ... and it is the value the read models compare with (domain/canon_rules.ACTIVE), which
    # the partial index states in the same words (projections/canon_tables.is_active).
    from sqlalchemy.dialects import postgresql, sqlite

    from canon_ledger.domain.canon_rules import ACTIVE, RESOLVED, active
    from canon_ledger.projections.canon_tables import canon_tables, is_active
    from canon_ledger.projections.driver_sql import for_sqlite
    assert RESOLVED == "resolved" and not active(False, "Resolved") and active(False, "open")
    canon = canon_tables("t").canon
    for dialect, words in ((postgresql.dialect(), ACTIVE), (sqlite.dialect(), for_sqlite(ACTIVE))):
        index = str(is_active(canon).compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        assert index.replace(f"{canon.name}.", "") == words


def test_budgets_state_units_roles_and_every_default() -> None:
    text = prop("StartStory", "budgets")
    for needed in ("tokens", "cl100k_base", f"0..{b.MAX_BUDGET:,}", "--budget", "p0_exceeds_budget"):
        assert needed in text, needed
    for role in ROLES:
        assert f"`{role}`" in text and f"{role} {DEFAULT_BUDGETS[role]:,}" in text, role


def test_kinds_and_scene_card_tags_state_their_allowed_values() -> None:
    for model in ("ProposeCanon", "RetireCanon"):
        for kind in KINDS:
            assert f"`{kind}`" in prop(model, "kind"), (model, kind)
    for tags, kind in (("characters", "character"), ("locations", "location"), ("threads", "thread"),
                       ("items", "item")):
        text = prop("AddSceneCard", tags)
        assert f"`{kind}`" in text and f"0..{b.MAX_LIST}" in text and "scene_card_tags_must_be_confirmed_canon" in text
    assert "any kind" in prop("AddSceneCard", "callbacks")


def test_the_bounds_stay_published_beside_the_descriptions() -> None:
    assert DEFS["PlanChapter"]["properties"]["chapter"]["maximum"] == b.MAX_CHAPTER
    assert DEFS["ProposeCanon"]["properties"]["valid_from"]["minimum"] == 1
    assert DEFS["StartStory"]["properties"]["budgets"]["additionalProperties"]["maximum"] == b.MAX_BUDGET
    assert DEFS["StartStory"]["properties"]["budgets"]["propertyNames"]["enum"] == list(ROLES)
    assert DEFS["AddSceneCard"]["properties"]["characters"]["maxItems"] == b.MAX_LIST
    assert DEFS["ProposeCanon"]["properties"]["kind"]["enum"] == list(KINDS)


def test_who_knows_what_states_its_rules() -> None:
    """Issue 43: the secret flag, record_knowledge's refusals and the scene card's pov."""
    fields = prop("ProposeCanon", "fields")
    for needed in ("`secret`", "true or false", "record_knowledge", "secret_must_be_true_or_false"):
        assert needed in fields, needed
    assert "unknown_character" in prop("RecordKnowledge", "character")
    key = prop("RecordKnowledge", "key")
    for needed in ("entry_not_in_canon_at_chapter", "knowledge_before_entry_exists", "retired"):
        assert needed in key, needed
    assert CHAPTERS in prop("RecordKnowledge", "chapter")
    assert f"1..{b.MAX_LINE_TEXT:,}" in prop("RecordKnowledge", "how")
    for kind in KINDS:
        assert f"`{kind}`" in prop("RecordKnowledge", "kind"), kind
    pov = prop("AddSceneCard", "pov")
    for needed in ("`character`", "unknown_pov_character", "default null", "same receipt digest"):
        assert needed in pov, needed
