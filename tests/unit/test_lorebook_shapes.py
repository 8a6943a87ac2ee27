"""Issue 41: the shapes SillyTavern reads that the reader refused (a RisuAI export, a world info
whose ``entries`` is a list), a NovelAI story's lorebook, an error that names what a file holds,
the source's budget settings, and the import's plan (an entry out of bounds refused alone)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from canon_ledger.application.lorebook_import import batches, plan
from canon_ledger.domain.lorebook import Budget, LorebookError, budget, read, read_entry
from canon_ledger.domain.lorebook_export import ExportedEntry, document
from canon_ledger.domain.recall import Rule, rule

from tests.lorebook_formats import (novelai_story, problems, risu_entry, risu_export, risu_folder,
                                    world_info_list)


def _read(doc: Any) -> Any:
    return read(json.dumps(doc, ensure_ascii=False).encode())


RISU = risu_export([
    risu_folder("f1", "Places"),
    risu_entry("先灵之镜, 镜子", "{{char}}在镜湖边找到了它。", comment="先灵之镜", insertorder=300, folder="\uf000folder:f1",
               id="a-1"),
    risu_entry("Seraphina,seraph", "@@depth 0\nShe guards the glade. {{user}} is welcome.", comment="Seraphina",
               secondkey="glade, forest", selective=True),
    risu_entry("", "The sky is violet.", comment="Sky", always=True, insertorder=900),
    risu_entry("/dragons?/i", "Dragons sleep.", comment="Dragons", useRegex=True,
               extentions={"risu_case_sensitive": False}),
])


def test_a_risu_export_is_read_entry_by_entry_and_its_folders_are_not_entries() -> None:
    book = _read(RISU)
    assert book.format == "risu" and book.disabled == []
    assert [(e.index, e.uid, e.name, e.keys) for e in book.entries] == [
        (1, "a-1", "先灵之镜", ["先灵之镜", "镜子"]), (2, "2", "Seraphina", ["Seraphina", "seraph"]),
        (3, "3", "Sky", []), (4, "4", "Dragons", ["/dragons?/i"])]
    mirror, seraphina = book.entries[0], book.entries[1]
    assert mirror.text == "{{char}}在镜湖边找到了它。"  # templates and decorators are kept as text
    assert seraphina.text.startswith("@@depth 0\n") and "{{user}}" in seraphina.text
    assert mirror.source == {k: v for k, v in RISU["data"][1].items() if k != "content"}


def test_a_risu_entry_s_activation() -> None:
    book = _read(RISU)
    rules = {e.name: rule(e.name, e.keys, {"lorebook": {"format": "risu", "entry": e.source}}) for e in book.entries}
    # imported: gated (issue 41), in Risu's insertorder (100 where it has none)
    assert rules["先灵之镜"] == Rule(("先灵之镜", "镜子"), gated=True, order=300)
    assert rules["Seraphina"] == Rule(("Seraphina", "seraph"), ("glade", "forest"), "and_any", gated=True)
    assert rules["Sky"] == Rule((), constant=True, gated=True, order=900)
    assert rules["Dragons"] == Rule(("/dragons?/i",), gated=True)
    not_selective = {**book.entries[1].source, "selective": False}  # a second key counts only when selective
    assert rule("s", [], {"lorebook": {"format": "risu", "entry": not_selective}}) == Rule(("Seraphina", "seraph"),
                                                                                           gated=True)
    plain_in_regex = {**book.entries[3].source, "key": "dragon, /wyrms?/"}  # Risu skips a plain key of a regex entry
    assert rule("d", [], {"lorebook": {"format": "risu", "entry": plain_in_regex}}) == Rule(("/wyrms?/",), gated=True)
    assert read_entry("risu", RISU["data"][2]).name == "Seraphina"
    with pytest.raises(LorebookError):
        read_entry("risu", RISU["data"][0])


def test_world_info_with_a_list_of_entries() -> None:
    ccv3 = _read(world_info_list([
        {"keys": ["alice"], "content": "Alice.", "enabled": True, "insertion_order": 10, "id": 0, "constant": False},
        {"keys": ["bob"], "content": "Bob.", "enabled": False, "insertion_order": 20, "id": 1, "secondary_keys": []},
        {"keys": ["carol"], "content": "Carol."}], "Cast"))
    assert ccv3.format == "lorebook_v3" and ccv3.name == "Cast"
    assert [(e.name, e.enabled, e.index) for e in ccv3.entries] == [("alice", True, 0), ("bob", False, 1),
                                                                      ("carol", True, 2)]
    own = _read(world_info_list([{"uid": 7, "key": ["lamp"], "comment": "Lamps", "content": "Lit.", "order": 5},
                                 {"key": ["moth"], "content": "Moths.", "disable": True}]))
    assert own.format == "sillytavern" and [(e.uid, e.name, e.enabled) for e in own.entries] == [
        ("7", "Lamps", True), ("1", "moth", False)]
    with pytest.raises(LorebookError) as e:
        _read(world_info_list(["not an entry"]))
    assert e.value.code == "malformed_lorebook"


def test_a_novelai_story_s_lorebook() -> None:
    book = _read(novelai_story("Saltmarsh", [{"displayName": "Harbour", "keys": ["harbour"], "text": "Boats.",
                                              "enabled": True, "contextConfig": {"budgetPriority": 200}}]))
    assert book.format == "novelai" and book.name == "Saltmarsh" and [e.name for e in book.entries] == ["Harbour"]
    scenario = _read({"scenarioVersion": 3, "title": "S", "lorebook": {"lorebookVersion": 4, "entries": []}})
    assert scenario.format == "novelai" and scenario.entries == []


@pytest.mark.parametrize("doc, says", [
    ([{"keys": ["a"], "content": "x"}], 'a JSON list of 1 item (object), not a lorebook (a JSON object); a list of '
                                       'entries needs its book around it, as in {"entries": [...]}'),
    ([1, "a"], "a JSON list of 2 items (number, string)"),
    ("lorebook", "a JSON string"),
    ({"storyContainerVersion": 1, "content": {"story": {}}}, "a NovelAI story container without a lorebook"),
    ({"type": "risu", "ver": 1, "data": {"name": "Memory"}}, "a RisuAI export whose `data` is an object"),
    ({"spec": "chara_card_v1", "data": {}}, 'an object whose `spec` is "chara_card_v1"'),
    ({"entries": "none"}, "an object whose `entries` is a string"),
    ({"title": "x", "chapters": []}, 'an object with keys "title", "chapters"'),
])
def test_what_is_not_a_lorebook_is_named_by_what_it_holds(doc: Any, says: str) -> None:
    with pytest.raises(LorebookError) as e:
        _read(doc)
    assert e.value.code == "unknown_lorebook_format" and f"the file holds {says}" in str(e.value)


def test_each_format_s_budget_settings() -> None:
    assert budget("sillytavern", {"order": 120, "ignoreBudget": True}) == Budget(120, True)
    assert budget("sillytavern", {"order": "high"}) == Budget(None, False)
    assert budget("lorebook_v3", {"insertion_order": 5, "priority": 9, "extensions": {"ignore_budget": True}}) == \
        Budget(5, True)
    assert budget("chara_card_v2", {"priority": 9}) == Budget(9, False)
    assert budget("novelai", {"contextConfig": {"budgetPriority": 400}}) == Budget(400, False)
    assert budget("risu", {"insertorder": 300}) == Budget(300, False)


def test_an_entry_out_of_bounds_is_refused_alone_by_index_and_name() -> None:
    book = _read({"entries": {
        "0": {"uid": 0, "key": ["lamp"], "comment": "Lamps", "content": "Lit.", "order": 100},
        "1": {"uid": 1, "key": ["huge"], "comment": "Lamps", "content": "x" * 100_001},  # same slug: lamps-2
        "2": {"uid": 2, "key": ["old"], "comment": "Old", "content": "old", "disable": True},
        "3": {"uid": 3, "key": ["k" * 129], "comment": "Long key", "content": "k"},
        "4": {"uid": 4, "key": [f"k{i}" for i in range(501)], "comment": "Many keys", "content": "m"},
        "5": {"uid": 5, "key": ["lamp"], "comment": "Lamps", "content": "Lit again.", "constant": True}}})
    planned = plan(book, "s", confirm=True)
    assert [(p.entry.index, p.key, p.status, p.activation) for p in planned] == [
        (0, "lamps", "import", "keys"), (1, "lamps-2", "refused", "keys"), (2, "", "disabled", "keys"),
        (3, "long-key", "refused", "keys"), (4, "many-keys", "refused", "keys"),
        (5, "lamps-3", "import", "always-on")]  # a refused entry keeps its key: the others keep theirs
    refused = {p.entry.index: p.refused() for p in planned if p.refusal is not None}
    assert refused[1] == {"index": 1, "uid": "1", "name": "Lamps", "key": "lamps-2", "code": "invalid_field",
                          "message": "text: String should have at most 100000 characters", "field": "text"}
    assert refused[3]["field"] == "aliases.0" and refused[4]["field"] == "aliases"
    [batch] = batches(planned, "s")
    assert [c.type for c in batch] == ["propose_canon", "confirm_canon"] * 2
    assert planned[0].as_dict() | {"keys": None} == {
        "index": 0, "uid": "0", "name": "Lamps", "status": "import", "kind": "world_rule", "key": "lamps",
        "keys": None, "activation": "keys", "secondary_keys": [], "logic": None, "chars": 4, "order": 100,
        "ignore_budget": False, "refusal": None}


def test_a_risu_entry_exports_through_sillytavern_s_entry_with_its_order() -> None:
    e = _read(RISU).entries[0]
    version = {"name": e.name, "aliases": e.keys, "text": e.text, "valid_from": 1,
               "fields": {"lorebook": {"format": "risu", "entry": e.source}}}
    exported = ExportedEntry("world_rule", "mirror", version)
    doc = document("sillytavern", [exported], story_id="s")
    assert problems("sillytavern", doc) == []
    [written] = doc["entries"].values()
    assert written["order"] == 300 and written["key"] == ["先灵之镜", "镜子"] and written["comment"] == "先灵之镜"


def test_a_risu_lorebook_as_risu_saves_it_a_bare_list_is_read() -> None:
    """RisuAI keeps a lorebook as a bare list of its items (tammy3211/RisuAI_bot_test, MIT):
    read as Risu, its folders skipped, not as SillyTavern with the folders as entries."""
    items = [risu_entry("엘리아, 엘리", "엘리아는 검을 든다.", comment="Elia", secondkey="검", selective=True),
             risu_folder("f1", "Places")]
    book = read(json.dumps(items).encode())
    assert book.format == "risu" and [(e.name, e.keys) for e in book.entries] == [("Elia", ["엘리아", "엘리"])]


def test_entries_whose_text_is_not_in_content_are_refused_not_imported_empty() -> None:
    """AI Dungeon's world info keeps an entry's text in `entry`: wrapped as the first hint said,
    it imported every entry with an empty text. Now both shapes are refused, naming the field."""
    aid = [{"keys": "jarl, skyrim", "entry": "The jarl rules Whiterun."}]
    for doc in (aid, {"entries": aid}):
        with pytest.raises(LorebookError) as refused:
            read(json.dumps(doc).encode())
        assert refused.value.code == "unknown_lorebook_format" and "`entry`, not `content`" in str(refused.value)
        assert "needs its book around it" not in str(refused.value)
