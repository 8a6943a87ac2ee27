"""The spoiler rule's one home (``application.canon_reads``), on hand-made view rows: what a key
below author scope reads of a version hidden at the chapter asked, of a chain's hidden nodes, of
a later chapter and of a story's collection; what an author reads (everything, labelled)."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application import canon_reads
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.errors import NotFound

WORKER, AUTHOR, ADMIN = Principal("w", "worker"), Principal("a", "author"), Principal("x", "admin")
SECRET = "SECRET"


def _version(step: int, valid_from: int, hidden_until: int | None, name: str, **more: Any) -> dict[str, Any]:
    return {"kind": "character", "key": "k", "step": step, "valid_from": valid_from, "retired": False, "name": name,
            "state": "alive", "hidden_until": hidden_until, "text": f"{name} text", "source": 10 + step,
            "aliases": [f"{name} alias"], **more}


class Views:
    def __init__(self, last_chapter: int | None = 3) -> None:
        self.last_chapter = last_chapter
        self.versions = [_version(1, 1, None, "Plain"), _version(2, 2, 12, SECRET)]

    def story_head(self, story_id: str) -> dict[str, Any] | None:
        return {"story_id": story_id, "last_chapter": self.last_chapter} if story_id == "s" else None

    def canon_as_of(self, story_id: str, chapter: int, kind: str | None = None, *,
                    active: bool = False) -> list[dict[str, Any]]:
        in_force = [v for v in self.versions if v["valid_from"] <= chapter]
        return [{k: v for k, v in in_force[-1].items() if k != "retired"}] if in_force else []

    def entry(self, story_id: str, kind: str, key: str) -> dict[str, Any] | None:
        return {"story_id": story_id, "kind": kind, "key": key, "name": self.versions[-1]["name"], "retired": False,
                "versions": [dict(v) for v in self.versions], "tagged_in_chapters": [1, 2, 7]}

    def chapter(self, story_id: str, number: int) -> dict[str, Any] | None:
        return {"story_id": story_id, "chapter": number, "volume": 1, "goals_text": f"goals {SECRET}",
                "goals_source": 3, "summary_text": f"summary {SECRET}", "summary_source": 4, "text_accepted": True,
                "text_tokens": 99, "text_source": 5, "scenes": [{"scene_id": "a", "text": SECRET}]}


def test_a_hidden_version_is_listed_as_a_packet_lists_it_below_author_scope() -> None:
    row = _version(2, 2, 12, SECRET, fields={"secret": SECRET, "nodes": [{"id": "n", "text": SECRET}]})
    shown = canon_reads.version(WORKER, row, 11)
    assert SECRET not in repr(shown)
    assert shown == {"kind": "character", "key": "k", "step": 2, "valid_from": 2, "retired": False, "name": "",
                     "state": None, "hidden_until": 12, "text": "", "source": 12, "aliases": [], "fields": {},
                     "hidden": True, "reason": "hidden until chapter 12"}
    for key in (AUTHOR, ADMIN):
        labelled = canon_reads.version(key, row, 11)
        assert labelled == {**row, "hidden": True, "reason": "hidden until chapter 12"}
    assert canon_reads.version(WORKER, row, 12) == {**row, "hidden": False}  # revealed at its chapter


def test_a_chains_hidden_nodes_are_dropped_below_author_scope() -> None:
    nodes = [{"id": "seed", "text": "seed"}, {"id": "payoff", "text": SECRET, "hidden_until": 9}]
    row = _version(1, 1, None, "Chain", fields={"nodes": nodes}, nodes=nodes)
    shown = canon_reads.version(WORKER, row, 8)
    assert shown["fields"]["nodes"] == shown["nodes"] == [nodes[0]] and shown["hidden"] is False
    assert canon_reads.version(AUTHOR, row, 8)["nodes"] == nodes
    assert canon_reads.version(WORKER, row, 9)["nodes"] == nodes


def test_an_entry_is_read_at_the_latest_planned_chapter_or_as_of_and_named_by_what_is_shown() -> None:
    views = Views(last_chapter=3)
    entry = canon_reads.entry(WORKER, views, "s", "character", "k")
    assert entry["name"] == "Plain" and [v["hidden"] for v in entry["versions"]] == [False, True]
    assert SECRET not in repr(entry)
    then = canon_reads.entry(WORKER, views, "s", "character", "k", as_of=1)
    assert then["as_of"] == 1 and len(then["versions"]) == 1 and then["tagged_in_chapters"] == [1]
    at2 = canon_reads.entry(WORKER, views, "s", "character", "k", as_of=2)
    assert at2["in_force"]["hidden"] is True and at2["name"] == "Plain" and SECRET not in repr(at2)
    assert canon_reads.entry(AUTHOR, views, "s", "character", "k")["name"] == SECRET
    late = canon_reads.entry(WORKER, views, "s", "character", "k", as_of=12)
    assert late["name"] == SECRET and late["in_force"]["hidden"] is False
    views.versions = [_version(1, 1, 12, SECRET)]  # nothing shown with its text: named by its key
    assert canon_reads.entry(WORKER, views, "s", "character", "k")["name"] == "k"
    views.versions = [_version(1, 5, None, "Later")]
    with pytest.raises(NotFound, match="as of chapter 2"):
        canon_reads.entry(WORKER, views, "s", "character", "k", as_of=2)


def test_a_chapter_after_the_one_read_is_only_listed_below_author_scope() -> None:
    views = Views(last_chapter=8)
    later = canon_reads.chapter(WORKER, views, "s", 8, as_of=2)
    assert later is not None and SECRET not in repr(later)
    assert later == {"story_id": "s", "chapter": 8, "volume": 1, "goals_text": "", "goals_source": None,
                     "summary_text": "", "summary_source": None, "text_accepted": True, "text_tokens": None,
                     "text_source": None, "scenes": [], "hidden": True,
                     "reason": "chapter 8 comes after chapter 2, the chapter asked"}
    assert canon_reads.chapter(WORKER, views, "s", 8) == {**views.chapter("s", 8), "hidden": False}  # type: ignore[dict-item]
    authored = canon_reads.chapter(AUTHOR, views, "s", 8, as_of=2)
    assert authored is not None and authored["hidden"] is True and SECRET in authored["goals_text"]


def test_a_search_of_a_story_is_bounded_by_the_chapter_read() -> None:
    views = Views(last_chapter=5)
    assert canon_reads.search_through(WORKER, views, "notes", None) is None
    assert canon_reads.search_through(WORKER, views, "story:s", None) == 5
    assert canon_reads.search_through(WORKER, views, "story:s", 2) == 2
    assert canon_reads.search_through(AUTHOR, views, "story:s", None) is None
    assert canon_reads.search_through(AUTHOR, views, "story:s", 2) == 2
    assert canon_reads.search_through(WORKER, Views(last_chapter=None), "story:s", None) == 0
