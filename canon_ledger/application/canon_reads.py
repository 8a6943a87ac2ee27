"""Canon reads by scope: what a key may read of a story's canon and chapters, relative to the
chapter it reads (the spoiler rule). Every door (the HTTP views, MCP tools and resources, the
viewer's canon and entry pages, search over a story's collection) reads through here, so the
rule has one home.

The chapter asked is the ``as_of`` the caller gave; with none, the story's latest planned
chapter (``default_chapter``). Below author scope:

- a canon version hidden at that chapter (``domain.canon_rules.hidden_at(hidden_until, chapter)``)
  is shown the way a packet for that chapter shows it: listed, without anything that could
  reveal it. It keeps ``SHOWN_WHEN_HIDDEN`` (kind, key, step, valid_from, hidden_until, source,
  retired); every other field keeps its name but is emptied (text and name ``""``, aliases
  ``[]``, state ``None``, fields ``{}``), and it says ``"hidden": true`` with the packet's
  ``"reason"`` ("hidden until chapter N");
- a development chain's nodes (``fields.nodes``, each with its own ``hidden_until``) hidden at
  the chapter are dropped, as a lorebook export drops them (the views do not carry nodes today:
  this holds for any that does);
- a chapter after the chapter asked is listed (story, chapter, volume, whether its text is
  accepted: what ``GET /v1/stories/{story}`` lists of every chapter) with its goals, summary,
  scene cards, sizes and sources emptied, ``"hidden": true`` and a reason. A packet for chapter
  K holds chapters up to K (goals and scene cards of K, summaries before it, K's own text for
  the summarizer), never a later one;
- a search of a story's collection (``story:<id>``) returns only chunks of the story's chapters
  up to the chapter asked (``search_through``).

Author and admin keys see everything; a hidden version keeps its text and is labelled (``"hidden":
true`` and the reason), a later chapter likewise. Every version and chapter row says
``"hidden"`` (true or false); only hidden ones carry ``"reason"``.
"""

from __future__ import annotations

from typing import Any

from canon_ledger.application.packets.render import hidden_reason as hidden_reason  # the packet's reason
from canon_ledger.application.ports import StoryReads
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.chunking import collection_story
from canon_ledger.domain.errors import NotFound

SEES_SPOILERS = "author"  # the scope from which hidden text is shown (labelled)
# What a hidden version still shows: what a packet's dropped item shows (kind, key, sources)
# and when it holds and is revealed.
SHOWN_WHEN_HIDDEN = frozenset({"kind", "key", "step", "valid_from", "hidden_until", "source", "retired",
                               "inherited_from"})
NULL_WHEN_HIDDEN = frozenset({"state"})  # no state, rather than an empty one
# What a chapter after the chapter asked still shows: what the story view lists of it.
CHAPTER_SHOWN_WHEN_LATER = frozenset({"story_id", "chapter", "volume", "text_accepted"})


def sees_spoilers(principal: Principal) -> bool:
    return principal.has(SEES_SPOILERS)


def _last_planned(views: StoryReads, story_id: str) -> int | None:
    head = views.story_head(story_id)
    last = head.get("last_chapter") if head is not None else None
    return int(last) if last is not None else None


def default_chapter(views: StoryReads, story_id: str) -> int:
    """The chapter a read with no ``as_of`` is relative to: the story's latest planned chapter
    (1 when none is planned yet, or the story is unknown)."""
    return _last_planned(views, story_id) or 1


def chapter_asked(views: StoryReads, story_id: str, as_of: int | None) -> int:
    return as_of if as_of is not None else default_chapter(views, story_id)


def _emptied(value: Any, name: str = "") -> Any:
    """A field's value with nothing of it left, of the same JSON type where it has one."""
    if name in NULL_WHEN_HIDDEN:
        return None
    if isinstance(value, str):
        return ""
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    return None


def _without_hidden_nodes(row: dict[str, Any], chapter: int) -> dict[str, Any]:
    """``row`` with the chain nodes hidden at ``chapter`` dropped (``fields.nodes`` or ``nodes``)."""
    def shown(nodes: Any) -> Any:
        if not isinstance(nodes, list):
            return nodes
        return [n for n in nodes if not (isinstance(n, dict) and hidden_at(n.get("hidden_until"), chapter))]

    out = dict(row)
    if "nodes" in out:
        out["nodes"] = shown(out["nodes"])
    fields = out.get("fields")
    if isinstance(fields, dict) and "nodes" in fields:
        out["fields"] = {**fields, "nodes": shown(fields["nodes"])}
    return out


def version(principal: Principal, row: dict[str, Any], chapter: int) -> dict[str, Any]:
    """One canon version (a ``canon_as_of`` row, or one of an entry's ``versions``) as this key
    may read it at ``chapter``: labelled ``hidden`` (and ``reason``); below author scope a hidden
    one emptied but for ``SHOWN_WHEN_HIDDEN``, and hidden chain nodes dropped."""
    reason = hidden_reason(row.get("hidden_until"), chapter)
    if reason is None:
        shown = row if sees_spoilers(principal) else _without_hidden_nodes(row, chapter)
        return {**shown, "hidden": False}
    if sees_spoilers(principal):
        return {**row, "hidden": True, "reason": reason}
    return {**{k: (v if k in SHOWN_WHEN_HIDDEN else _emptied(v, k)) for k, v in row.items()},
            "hidden": True, "reason": reason}


def canon_as_of(principal: Principal, views: StoryReads, story_id: str, as_of: int, kind: str | None = None, *,
                active: bool = False) -> list[dict[str, Any]]:
    """``StoryViews.canon_as_of``, each entry as ``version`` shows it at ``as_of``."""
    return [version(principal, row, as_of) for row in views.canon_as_of(story_id, as_of, kind, active=active)]


def entry(principal: Principal, views: StoryReads, story_id: str, kind: str, key: str,
          as_of: int | None = None) -> dict[str, Any]:
    """One entry's confirmed versions, each as ``version`` shows it at the chapter asked. With
    ``as_of``, only what a reader of that chapter may know: the version in force then
    (``in_force``), the versions valid from that chapter or before, the chapters up to it that
    tag it; an entry not in force then (not yet, or retired) is unknown, as it is to a packet.
    The entry's ``name`` is that of the last version shown with its text (the key if none).
    ``NotFound`` (``unknown_canon_entry``) when there is nothing to show."""
    found = views.entry(story_id, kind, key)
    unknown = NotFound("unknown_canon_entry", f"no confirmed {kind} {key!r} in story {story_id!r}"
                       + (f" as of chapter {as_of}" if as_of is not None else ""), "key")
    if found is None:
        raise unknown
    chapter = chapter_asked(views, story_id, as_of)
    versions = [version(principal, v, chapter) for v in found["versions"]
                if as_of is None or v["valid_from"] <= as_of]
    out = {**found, "versions": versions}
    if as_of is not None:
        in_force = next((e for e in views.canon_as_of(story_id, as_of, kind) if e["key"] == key), None)
        if in_force is None:
            raise unknown
        out |= {"as_of": as_of, "in_force": version(principal, in_force, as_of), "retired": False,
                "tagged_in_chapters": [c for c in found["tagged_in_chapters"] if c <= as_of]}
        last = out["in_force"]
    else:
        last = versions[-1] if versions else None
    if last is not None and not (last["hidden"] and not sees_spoilers(principal)):
        out["name"] = last["name"]
    else:
        named = [v for v in versions if not v.get("retired") and not (v["hidden"] and not sees_spoilers(principal))]
        out["name"] = named[-1]["name"] if named else key
    return out


def chapter(principal: Principal, views: StoryReads, story_id: str, number: int,
            as_of: int | None = None) -> dict[str, Any] | None:
    """One planned chapter (None if it is not planned), labelled ``hidden`` when it comes after
    the chapter asked; below author scope such a chapter is only listed (``CHAPTER_SHOWN_WHEN_LATER``;
    its goals, summary, scene cards, sizes and sources emptied)."""
    found = views.chapter(story_id, number)
    if found is None:
        return None
    asked = chapter_asked(views, story_id, as_of)
    if number <= asked:
        return {**found, "hidden": False}
    reason = f"chapter {number} comes after chapter {asked}, the chapter asked"
    if sees_spoilers(principal):
        return {**found, "hidden": True, "reason": reason}
    return {**{k: (v if k in CHAPTER_SHOWN_WHEN_LATER else _emptied(v)) for k, v in found.items()},
            "hidden": True, "reason": reason}


def search_through(principal: Principal, views: StoryReads, collection: str, as_of: int | None) -> int | None:
    """The last chapter whose chunks a search of ``collection`` may return, or None for no bound.

    A story's collection is bounded by the chapter asked: ``as_of`` when given (for every key),
    else, below author scope, the story's latest planned chapter (0 when none is planned). A
    bounded search returns only chunks (and wiki pages) of the story's chapters up to it: nothing
    of a later chapter, nor of a document in the collection that is no chapter (it has no chapter
    to be read by), nor the collection's table of contents (it names later chapters). Other
    collections are not bounded."""
    story = collection_story(collection)
    if story is None:
        return None
    if as_of is not None:
        return as_of
    if sees_spoilers(principal):
        return None
    return _last_planned(views, story) or 0
