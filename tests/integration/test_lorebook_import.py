"""``application.lorebook_import`` on both stores: the sample files' enabled entries become
confirmed canon with their keys as aliases; importing again appends nothing; an entry out of
bounds is refused alone; a RisuAI export's entries are matched by their keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from canon_ledger.application.lorebook_import import import_lorebook
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.lorebook import LoreEntry, Lorebook, read
from canon_ledger.infrastructure.bootstrap import bootstrap

from tests.lorebook_formats import risu_entry, risu_export, risu_folder
from tests.shared_data import LOREBOOKS as SAMPLES


@pytest.fixture
def services(store_url: str) -> Any:
    s = bootstrap(store_url, embedder="hashing")
    [r] = s.ledger.apply([parse_command({"type": "start_story", "command_id": "s", "story_id": "el", "title": "Eldoria",
                                         "style_guardrails": [], "output_contract": ""})])
    assert r.status == "applied"
    yield s
    s.close()


@pytest.mark.parametrize("sample", ["sillytavern-world-info-eldoria.json", "sillytavern-card-seraphina.png"])
def test_a_sample_imports_confirmed_and_again_appends_nothing(services: Any, sample: str) -> None:
    book = read((SAMPLES / sample).read_bytes())
    report = import_lorebook(services.ledger, book, "el", confirm=True, valid_from=2)
    assert report.failed is None and report.counts == {"applied": 8} and report.entries == 4
    canon = services.views().canon_as_of("el", 2)
    entries = {e["key"]: e for e in canon}
    assert set(entries) == {"eldoria", "shadowfang", "glade", "power"}
    eldoria = services.views().entry("el", "world_rule", "eldoria")
    assert eldoria is not None and "magical forest" in str(eldoria)
    assert services.views().canon_as_of("el", 1) == []  # in force from chapter 2 only
    again = import_lorebook(services.ledger, book, "el", confirm=True, valid_from=2)
    assert again.counts == {"duplicate": 8} and again.position == report.position


def test_proposals_wait_for_review_without_confirm(services: Any) -> None:
    book = read((SAMPLES / "sillytavern-world-info-eldoria.json").read_bytes())
    import_lorebook(services.ledger, book, "el")
    assert services.views().canon_as_of("el", 1) == []
    assert len(services.views().proposals("el", "proposed")) == 4


def test_an_entry_out_of_bounds_is_refused_alone_and_the_rest_imports(services: Any) -> None:
    """Issue 41: one oversized entry refused the whole file, naming no entry. Now it is refused
    by index and name before anything is written, the others import, and importing again is
    all duplicates (the refusal stays)."""
    book = Lorebook("sillytavern", "", [LoreEntry("1", "ok", ["ok"], "fine", True, index=0),
                                        LoreEntry("2", "huge", ["x" * 500], "text", True, index=1),
                                        LoreEntry("3", "long", ["long"], "y" * 100_001, True, index=2),
                                        LoreEntry("4", "also ok", ["also"], "fine too", True, index=3)])
    report = import_lorebook(services.ledger, book, "el", confirm=True)
    assert report.failed is None and report.counts == {"applied": 4}
    assert [(r["index"], r["name"], r["code"], r["field"]) for r in report.refused] == [
        (1, "huge", "invalid_field", "aliases.0"), (2, "long", "invalid_field", "text")]
    assert "at most 100000 characters" in report.refused[1]["message"]
    assert {e["key"] for e in services.views().canon_as_of("el", 1)} == {"ok", "also-ok"}
    again = import_lorebook(services.ledger, book, "el", confirm=True)
    assert again.counts == {"duplicate": 4} and again.position == report.position and again.refused == report.refused


def test_a_risu_export_imports_and_its_chinese_keys_are_matched(services: Any) -> None:
    """A RisuAI export (issue 41's shape) into the store: its folder is no entry, its keys
    (comma-separated) are the aliases, its activation reaches the story's matcher, whose
    Chinese keys match inside Chinese text under the spaceless rule only."""
    doc = risu_export([risu_folder("f", "Relics"),
                       risu_entry("先灵之镜,镜子", "{{char}}找到了先灵之镜。", comment="先灵之镜", folder="\uf000folder:f"),
                       risu_entry("圣光", "圣光会闪烁。", comment="圣光", secondkey="闪烁", selective=True),
                       risu_entry("", "天空是紫色的。", comment="天空", always=True)])
    report = import_lorebook(services.ledger, read(json.dumps(doc).encode()), "el", confirm=True)
    assert report.failed is None and report.format == "risu" and report.counts == {"applied": 6}
    mirror = services.views().entry("el", "world_rule", "先灵之镜")
    assert mirror is not None and mirror["versions"][0]["aliases"] == ["先灵之镜", "镜子"]
    texts = [("the chapter goals", "艾莉娅在镜湖边找到了先灵之镜，圣光开始闪烁。")]
    with services.packets.reader.snapshot("el") as snap:
        lore = snap.lore("el")
        assert lore.match(texts) == []
        assert [(m.key, m.said) for m in lore.match(texts, spaceless=True)] == [("先灵之镜", "先灵之镜"), ("圣光", "圣光")]
        assert [m.key for m in lore.match([("scene 1a", "圣光")], spaceless=True)] == []  # its second key is absent
        assert [a.key for a in lore.constant] == ["天空"]
