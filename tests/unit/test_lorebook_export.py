"""Writing canon out as a lorebook (``domain.lorebook_export``, and the use case's rules with
fake views): each format's documented fields, imported entries written back whole, defaults
and activation for the rest, unique ids, and nothing hidden at the chapter."""

from __future__ import annotations

from dataclasses import replace

import json
from typing import Any

import pytest

from canon_ledger.application.lorebook_export import export_lorebook
from canon_ledger.domain import recall
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.lorebook import Lorebook, read, slug
from canon_ledger.domain.lorebook_export import TARGETS, ExportedEntry, document

from tests.lorebook_formats import problems
from tests.shared_data import LOREBOOKS as SAMPLES

WORLD_INFO = SAMPLES / "sillytavern-world-info-eldoria.json"
CARD = SAMPLES / "sillytavern-card-seraphina.png"


def entry(kind: str, key: str, name: str, aliases: list[str], text: str, fields: dict[str, Any]) -> ExportedEntry:
    return ExportedEntry(kind, key, {"name": name, "aliases": aliases, "text": text, "fields": fields, "valid_from": 1,
                                     "tags": []})


def imported(book: Lorebook) -> list[ExportedEntry]:
    """The entries as `canon import lorebook` makes them (``application.lorebook_import``)."""
    return [entry("world_rule", slug(e.name), e.name, list(dict.fromkeys(e.keys)), e.text,
                  {"lorebook": {"format": book.format, "entry": e.source}}) for e in book.enabled]


NAI = Lorebook("novelai", "", read(json.dumps({"lorebookVersion": 6, "entries": [
    {"id": "5b3e-lamps", "displayName": "Lamps", "keys": ["lamp", "lamps"], "text": "Lamps are lit at dusk.",
     "enabled": True, "forceActivation": True, "searchRange": 800, "keyRelative": False, "nonStoryActivatable": False,
     "category": "", "loreBiasGroups": [], "contextConfig": {
         "prefix": "", "suffix": "\n", "tokenBudget": 1, "reservedTokens": 0, "budgetPriority": 250,
         "trimDirection": "trimBottom", "insertionType": "newline", "maximumTrimType": "sentence",
         "insertionPosition": -1}}]}).encode()).entries)
OWN = [
    entry("character", "ilse", "Ilse", ["the lamplighter"], "Ilse lights the lamps.", {}),
    entry("world_rule", "curfew", "Curfew", [], "No one walks after the last bell.",
                  {"recall": {"keys": ["curfew", "last bell"], "secondary_keys": ["night", "dark"], "logic": "not_any",
                              "case_sensitive": True, "whole_words": False}}),
    entry("world_rule", "sky", "The sky", [], "Always above.", {"recall": {"constant": True}}),
    entry("item", "lost-key", "Lost key", ["key"], "Nobody finds it.", {"recall": {"never": True}}),
]


def every_kind() -> list[ExportedEntry]:
    return [*imported(read(WORLD_INFO.read_bytes())), *imported(read(CARD.read_bytes())), *imported(NAI), *OWN]


def reread(target: str, doc: dict[str, Any]) -> Lorebook:
    return read(json.dumps(doc).encode())


@pytest.mark.parametrize("target", TARGETS)
def test_each_format_validates_against_its_documented_fields(target: str) -> None:
    doc = document(target, every_kind(), story_id="el", name="Eldoria")
    assert problems(target, doc) == []
    assert reread(target, doc).format == target and len(reread(target, doc).entries) == len(every_kind())


def test_the_validator_can_fail() -> None:
    good = document("novelai", OWN, story_id="el")
    assert problems("sillytavern", json.loads(WORLD_INFO.read_text())) == []  # the sample itself is world info
    assert problems("lorebook_v3", {"spec": "lorebook_v3", "data": {"entries": [{"keys": ["a"]}]}})
    assert problems("novelai", {**good, "entries": [{**good["entries"][0], "forceActivation": "yes"}]})
    assert problems("novelai", {**good, "entries": [good["entries"][0]] * 2}) == [
        f"id {good['entries'][0]['id']} is used twice"]
    st = document("sillytavern", OWN, story_id="el")
    assert problems("sillytavern", {"entries": {"9": st["entries"]["0"]}}) == ["entries/9: keyed apart from its uid 0"]


def test_world_info_is_written_back_whole() -> None:
    doc = document("sillytavern", imported(read(WORLD_INFO.read_bytes())), story_id="el")
    assert doc == json.loads(WORLD_INFO.read_text())  # every field of every entry, content the canon text


def test_a_card_s_book_is_written_back_whole_into_lorebook_v3() -> None:
    book = read(CARD.read_bytes())
    doc = document("lorebook_v3", imported(book), story_id="el", name="Eldoria")
    for written, source in zip(doc["data"]["entries"], book.enabled, strict=True):
        assert written == {**source.source, "content": source.text, "use_regex": False}  # CCv3 requires use_regex


def test_canon_never_imported_gets_its_name_and_aliases_as_keys() -> None:
    ilse = OWN[0]
    st = document("sillytavern", [ilse], story_id="el")["entries"]["0"]
    assert (st["uid"], st["key"], st["comment"], st["content"]) == (0, ["Ilse", "the lamplighter"], "Ilse",
                                                                    "Ilse lights the lamps.")
    assert (st["disable"], st["constant"], st["caseSensitive"], st["matchWholeWords"]) == (False, False, False, True)
    assert st["probability"] == 100 and st["useProbability"] is True  # SillyTavern's new-entry template
    v3 = document("lorebook_v3", [ilse], story_id="el")["data"]["entries"][0]
    assert (v3["keys"], v3["name"], v3["enabled"], v3["use_regex"]) == (["Ilse", "the lamplighter"], "Ilse", True, False)
    nai = document("novelai", [ilse], story_id="el")["entries"][0]
    assert (nai["keys"], nai["displayName"], nai["text"], nai["enabled"]) == (["Ilse", "the lamplighter"], "Ilse",
                                                                              "Ilse lights the lamps.", True)


def _rule_after_import(target: str, doc: dict[str, Any]) -> list[recall.Rule]:
    """The rule each exported entry gets once imported again."""
    book = reread(target, doc)
    return [recall.rule(e.name, list(dict.fromkeys(e.keys)), {"lorebook": {"format": book.format, "entry": e.source}})
            or recall.default_rule(e.name, e.keys) for e in book.enabled]


@pytest.mark.parametrize("target", ["sillytavern", "lorebook_v3"])
def test_activation_survives_the_round_trip(target: str) -> None:
    entries = every_kind()
    doc = document(target, entries, story_id="el")
    before = [recall.rule(e.name, e.aliases, e.fields) or recall.default_rule(e.name, e.aliases) for e in entries]
    # every imported entry is gated (issue 41): its activation is what must survive
    assert _rule_after_import(target, doc) == [replace(r, gated=True) for r in before]


def test_own_recall_rules_in_each_format() -> None:
    curfew, sky, lost = OWN[1:]
    st = document("sillytavern", OWN, story_id="el")["entries"]
    assert (st["1"]["key"], st["1"]["keysecondary"], st["1"]["selectiveLogic"], st["1"]["caseSensitive"],
            st["1"]["matchWholeWords"]) == (["curfew", "last bell"], ["night", "dark"], 2, True, False)
    assert st["2"]["constant"] is True
    assert (st["3"]["useProbability"], st["3"]["probability"], st["3"]["disable"]) == (True, 0, False)  # never: 0%
    v3 = document("lorebook_v3", OWN, story_id="el")["data"]["entries"]
    assert v3[1]["selective"] is True and v3[1]["extensions"]["selectiveLogic"] == 2
    assert v3[3]["extensions"]["probability"] == 0 and v3[3]["enabled"] is True
    nai = document("novelai", OWN, story_id="el")["entries"]
    assert nai[2]["forceActivation"] is True and nai[3]["enabled"] is False  # NovelAI has no trigger chance
    assert "secondary_keys" not in nai[1] and "keysecondary" not in nai[1]  # nor secondary keys


def test_what_canon_revised_wins_and_the_rest_stays() -> None:
    [eldoria, *_] = imported(read(WORLD_INFO.read_bytes()))
    unchanged = document("sillytavern", [eldoria], story_id="el")["entries"]["0"]
    assert unchanged["key"] == ["eldoria", "wood", "forest", "magical forest"] and unchanged["comment"] == ""
    revised = entry(eldoria.kind, eldoria.key, "Eldoria the Old", ["eldoria", "old wood"], "Ruins now.",
                            eldoria.fields)
    for target in ("sillytavern", "novelai", "lorebook_v3"):
        again = reread(target, document(target, [revised], story_id="el")).entries[0]
        assert (again.name, again.keys, again.text) == ("Eldoria the Old", ["eldoria", "old wood"], "Ruins now.")
    st = document("sillytavern", [revised], story_id="el")["entries"]["0"]
    assert {k: v for k, v in st.items() if k not in ("key", "comment", "content")} == {
        k: v for k, v in eldoria.fields["lorebook"]["entry"].items() if k not in ("key", "comment")}


def test_ids_are_unique_in_a_document() -> None:
    twice = imported(read(WORLD_INFO.read_bytes())) + [
        entry(e.kind, e.key + "-card", e.name, e.aliases, e.text, e.fields)
        for e in imported(read(CARD.read_bytes()))]
    for target in TARGETS:
        doc = document(target, twice + OWN, story_id="el")
        assert problems(target, doc) == []
    st = document("sillytavern", twice, story_id="el")["entries"]
    assert sorted(int(k) for k in st) == list(range(8)) and [st[str(i)]["uid"] for i in range(4)] == [0, 1, 2, 3]


def test_a_chain_s_nodes_follow_its_text() -> None:
    chain = entry("development_chain", "heir", "The heir", [], "Who inherits.",
                          {"nodes": [{"id": "n1", "kind": "foreshadow", "text": "A ring."}, {"id": "n2", "text": "?"}]})
    assert document("novelai", [chain], story_id="el")["entries"][0]["text"] == (
        "Who inherits.\nforeshadow n1: A ring.\nnode n2: ?")


# -- the use case, over fake views --------------------------------------------------------------
class FakeViews:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def story_head(self, story_id: str) -> dict[str, Any] | None:
        return {"story_id": "el", "title": "Eldoria"} if story_id == "el" else None

    def canon_as_of(self, story_id: str, chapter: int) -> list[dict[str, Any]]:
        return self.rows


class Record:
    def __init__(self, position: int, version: dict[str, Any]) -> None:
        self.id, self.version = position, version


class FakeLog:
    def __init__(self, versions: dict[int, dict[str, Any]]) -> None:
        self.records_read: list[tuple[int, int]] = []
        self.versions = versions

    def records(self, start: int, limit: int, stop: int | None = None, topics: Any = ()) -> list[Any]:
        self.records_read.append((start, limit))
        return [Record(p, v) for p, v in sorted(self.versions.items()) if start <= p <= (stop or p)][:limit]

    def decode(self, record: Any) -> Any:
        return record


def _version(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "aliases": [], "text": f"{name} text", "fields": fields, "valid_from": 1, "tags": []}


def test_nothing_hidden_at_the_chapter_is_exported() -> None:
    versions = {10: _version("Open"), 11: _version("Secret", hidden_until=9),
                12: _version("Chain", nodes=[{"id": "a", "text": "seen"}, {"id": "b", "text": "unseen", "hidden_until": 6},
                                             {"id": "c", "text": "now", "hidden_until": 5}])}
    rows = [{"kind": "world_rule", "key": v["name"].lower(), "source": p} for p, v in versions.items()]
    exported = export_lorebook(FakeViews(rows), FakeLog(versions), "el", 5, "novelai")
    texts = [e["text"] for e in exported.document["entries"]]
    assert texts == ["Open text", "Chain text\nnode a: seen\nnode c: now"]
    assert (exported.entries, exported.hidden, exported.hidden_nodes) == (2, 1, 1)
    assert exported.report()["by_source"] == {"not_imported": 2}
    shown_later = export_lorebook(FakeViews(rows), FakeLog(versions), "el", 9, "novelai")
    assert [e["displayName"] for e in shown_later.document["entries"]] == ["Open", "Secret", "Chain"]


def test_versions_are_read_in_pages_not_one_query_each() -> None:
    versions = {p: _version(f"E{p}") for p in range(100, 1300)}
    rows = [{"kind": "world_rule", "key": f"e{p}", "source": p} for p in versions]
    log = FakeLog(versions)
    assert export_lorebook(FakeViews(rows), log, "el", 1, "sillytavern").entries == 1200
    assert log.records_read == [(100, 500), (600, 500), (1100, 500)]


@pytest.mark.parametrize("story, as_of, target, kinds, code", [
    ("nope", 1, "novelai", (), "unknown_story"),
    ("el", 0, "novelai", (), "invalid_field"),
    ("el", 10**30, "novelai", (), "invalid_field"),
    ("el", 1, "kobold", (), "invalid_field"),
    ("el", 1, "novelai", ("villain",), "unknown_canon_kind"),
])
def test_refusals_are_structured(story: str, as_of: int, target: str, kinds: tuple[str, ...], code: str) -> None:
    with pytest.raises(CanonError) as refused:
        export_lorebook(FakeViews([]), FakeLog({}), story, as_of, target, kinds)
    assert refused.value.code == code and refused.value.field
