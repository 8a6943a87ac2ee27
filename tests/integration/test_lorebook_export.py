"""``application.lorebook_export`` on both stores: an imported lorebook exports as it came
(every source field kept, content the canon text) and imports again to the same proposals;
NovelAI round trips keep keys and text; revisions, retirements and hidden entries follow the
chapter asked for; re-importing an export into its own story appends nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from canon_ledger.application.lorebook_export import export_lorebook
from canon_ledger.application.lorebook_import import import_lorebook
from canon_ledger.domain.errors import NotFound
from canon_ledger.domain.lorebook import read
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

from tests.lorebook_formats import problems
from tests.shared_data import LOREBOOKS as SAMPLES

WORLD_INFO = SAMPLES / "sillytavern-world-info-eldoria.json"
CARD = SAMPLES / "sillytavern-card-seraphina.png"


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    for story in ("el", "copy"):
        applied(services, {"type": "start_story", "command_id": f"start-{story}", "story_id": story, "title": "Eldoria",
                          "style_guardrails": [], "output_contract": ""})
    yield services
    services.close()


def _export(s: Any, story: str, as_of: int, target: str, kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    doc = export_lorebook(s.views(), s.ledger.event_log, story, as_of, target, kinds).document
    assert problems(target, doc) == []
    return doc


def _reimport(s: Any, doc: dict[str, Any], story: str) -> Any:
    report = import_lorebook(s.ledger, read(json.dumps(doc).encode()), story, confirm=True)
    assert report.failed is None
    return report


def _proposals(s: Any, story: str) -> dict[str, dict[str, Any]]:
    """Each key's latest proposal, as the log holds it."""
    return {e.data["key"]: e.data for e in s.ledger.event_log.history(story_id=story) if e.type == "CanonProposal.Proposed"}


def test_world_info_exports_whole_and_imports_again_the_same(s: Any) -> None:
    import_lorebook(s.ledger, read(WORLD_INFO.read_bytes()), "el", confirm=True)
    doc = _export(s, "el", 1, "sillytavern")
    original = json.loads(WORLD_INFO.read_text())["entries"]
    assert doc["entries"].keys() == original.keys()
    for uid, entry in original.items():
        assert doc["entries"][uid] == entry  # every source field, with its value; content the canon text
    _reimport(s, doc, "copy")
    first, again = _proposals(s, "el"), _proposals(s, "copy")
    assert first.keys() == again.keys() == {"eldoria", "shadowfang", "glade", "power"}
    for key, proposal in first.items():
        assert again[key]["fields"]["lorebook"] == proposal["fields"]["lorebook"]
        assert (again[key]["text"], again[key]["aliases"], again[key]["name"]) == (
            proposal["text"], proposal["aliases"], proposal["name"])


def test_a_card_s_book_exports_as_lorebook_v3_and_imports_again_the_same(s: Any) -> None:
    book = read(CARD.read_bytes())
    import_lorebook(s.ledger, book, "el", confirm=True)
    doc = _export(s, "el", 1, "lorebook_v3")
    for written, source in zip(doc["data"]["entries"], book.enabled, strict=True):
        assert {k: written[k] for k in source.source} == source.source and written["content"] == source.text
        assert set(written) - set(source.source) == {"content", "use_regex"}  # CCv3 requires use_regex
    _reimport(s, doc, "copy")
    first, again = _proposals(s, "el"), _proposals(s, "copy")
    assert first.keys() == again.keys()
    for key, proposal in first.items():
        assert again[key]["fields"]["lorebook"] == {"format": "lorebook_v3",
                                                    "entry": {**proposal["fields"]["lorebook"]["entry"],
                                                              "use_regex": False}}
        assert (again[key]["text"], again[key]["aliases"]) == (proposal["text"], proposal["aliases"])


@pytest.mark.parametrize("sample", [WORLD_INFO, CARD])
def test_novelai_export_imports_again_with_the_same_keys_and_text(s: Any, sample: Any) -> None:
    import_lorebook(s.ledger, read(sample.read_bytes()), "el", confirm=True)
    _reimport(s, _export(s, "el", 1, "novelai"), "copy")
    first, again = _proposals(s, "el"), _proposals(s, "copy")
    assert {k: (p["name"], p["aliases"], p["text"]) for k, p in again.items()} == {
        k: (p["name"], p["aliases"], p["text"]) for k, p in first.items()}
    assert all(p["fields"]["lorebook"]["format"] == "novelai" for p in again.values())


def test_reimporting_an_export_into_its_own_story_appends_nothing(s: Any) -> None:
    import_lorebook(s.ledger, read(WORLD_INFO.read_bytes()), "el", confirm=True)
    position = s.ledger.event_log.position()
    report = _reimport(s, _export(s, "el", 1, "sillytavern"), "el")
    assert report.counts == {"duplicate": 8} and s.ledger.event_log.position() == position


def _propose(s: Any, n: int, key: str, name: str, text: str, *, valid_from: int = 1, aliases: tuple[str, ...] = (),
             fields: dict[str, Any] | None = None, kind: str = "world_rule") -> None:
    applied(s, {"type": "propose_canon", "command_id": f"p-{n}", "story_id": "el", "proposal_id": f"own-{n}",
               "kind": kind, "key": key, "name": name, "aliases": list(aliases), "text": text,
               "fields": fields or {}, "valid_from": valid_from},
           {"type": "confirm_canon", "command_id": f"c-{n}", "story_id": "el", "proposal_id": f"own-{n}"})


def _shown(doc: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """displayName -> (text, keys) of a NovelAI export."""
    return {e["displayName"]: (e["text"], e["keys"]) for e in doc["entries"]}


def test_the_chapter_decides_which_version_and_what_is_shown(s: Any) -> None:
    import_lorebook(s.ledger, read(WORLD_INFO.read_bytes()), "el", confirm=True)
    eldoria = _proposals(s, "el")["eldoria"]
    _propose(s, 1, "eldoria", "eldoria", "Eldoria lies in ruins.", valid_from=5, aliases=("eldoria", "the ruins"),
             fields=eldoria["fields"])
    _propose(s, 2, "moonwell", "Moonwell", "The well restores the glade.", fields={"hidden_until": 7})
    _propose(s, 3, "heir", "The heir", "Who inherits the glade.", kind="development_chain", fields={"nodes": [
        {"id": "ring", "kind": "foreshadow", "text": "A ring in the moss."},
        {"id": "reveal", "kind": "payoff", "text": "Seraphina's daughter.", "hidden_until": 8}]})
    _propose(s, 4, "tollgate", "Tollgate", "A toll at the bridge.", valid_from=3)
    applied(s, {"type": "retire_canon", "command_id": "r-4", "story_id": "el", "kind": "world_rule", "key": "tollgate",
               "valid_from": 6, "reason": "burnt down"})

    at2 = _shown(_export(s, "el", 2, "novelai"))
    assert at2["eldoria"][0].startswith('{{user}}: "What is Eldoria?"')  # the version in force at 2
    assert "Moonwell" not in at2 and "Tollgate" not in at2  # hidden until 7; in force from 3
    assert at2["The heir"][0] == "Who inherits the glade.\nforeshadow ring: A ring in the moss."
    at5 = _shown(_export(s, "el", 5, "novelai"))
    assert at5["eldoria"] == ("Eldoria lies in ruins.", ["eldoria", "the ruins"])  # canon's revision wins
    assert "Tollgate" in at5 and "Moonwell" not in at5
    at8 = _shown(_export(s, "el", 8, "novelai"))
    assert "Tollgate" not in at8 and at8["Moonwell"][0] == "The well restores the glade."  # retired from 6
    assert at8["The heir"][0].endswith("payoff reveal: Seraphina's daughter.")
    report = export_lorebook(s.views(), s.ledger.event_log, "el", 5, "sillytavern").report()
    assert (report["entries"], report["hidden"], report["hidden_nodes"]) == (6, 1, 1)
    assert report["by_source"] == {"not_imported": 2, "sillytavern": 4}
    chains = _export(s, "el", 8, "lorebook_v3", kinds=("development_chain",))["data"]["entries"]
    assert [e["name"] for e in chains] == ["The heir"]


def test_an_unknown_story_is_refused(s: Any) -> None:
    with pytest.raises(NotFound) as refused:
        export_lorebook(s.views(), s.ledger.event_log, "nope", 1, "sillytavern")
    assert (refused.value.code, refused.value.field) == ("unknown_story", "story_id")
