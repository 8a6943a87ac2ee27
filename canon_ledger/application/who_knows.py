"""Who knows what, when: the secrets in force as of a chapter and who knows each, and
what one character knows as of a chapter. Every door (``canon secrets`` / ``canon knowledge``,
``GET /v1/stories/{story}/secrets`` and ``.../characters/{character}/knowledge``, the MCP tools
``secrets`` and ``character_knowledge``, the viewer's ``/stories/{story}/secrets``) reads
through here, over the plain-SQL views (``projections.story_views``: ``who_knows``,
``knowledge_of``).

The chapter asked (K) is the ``as_of`` given, or the story's latest planned chapter
(``canon_reads.chapter_asked``). A **secret** is an entry whose version in force at K has
``secret`` true (``fields.secret``); a character **knows** an entry from the chapter of its latest
``record_knowledge`` (a correction replaces the record), so as of K it knows what a record of a
chapter up to K says.

Spoilers follow ``canon_reads``: below author scope, an entry whose version in force at K is
hidden then (``hidden_until`` > K) is **listed** as ``canon_reads.version`` lists it (kind, key,
step, valid_from, hidden_until, source, ``"hidden": true`` and the reason; its name and text
emptied), and **who knows it is withheld**: its ``known_by`` is empty, and a character's
knowledge of it is left out of that character's list (a record says as much as the secret: its
``how`` is free text). A character whose own version is hidden at K is named by its key. Author
and admin keys see everything, hidden entries labelled.
"""

from __future__ import annotations

from typing import Any

from canon_ledger.application import canon_reads
from canon_ledger.application.ports import KnowledgeReads
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.errors import NotFound, unknown_story


def _story(views: KnowledgeReads, story_id: str) -> None:
    if views.story_head(story_id) is None:
        raise unknown_story(story_id)


def _shown_name(principal: Principal, row: dict[str, Any] | None, key: str, chapter: int) -> str:
    """A character's name as this key may read it at ``chapter``: its key when it has no version
    in force then, or one hidden then below author scope."""
    if row is None:
        return key
    shown = canon_reads.version(principal, row, chapter)
    return str(shown["name"]) if shown["name"] else key


def secrets(principal: Principal, views: KnowledgeReads, story_id: str, as_of: int | None = None) -> dict[str, Any]:
    """The secrets in force as of the chapter asked, each with who knows it then::

        {"story_id", "as_of",
         "secrets": [{kind, key, step, valid_from, name, hidden_until, text, source, hidden, [reason],
                      "known_by": [{character, name, chapter, how, source}]}],   # by kind and key
         "characters": [{key, name, pov, knows}]}

    ``known_by`` is by chapter, then character; ``source`` is the log position of the knowledge
    record. ``characters`` are the grid's rows: every character who knows a secret shown, and
    every point-of-view character of a scene card up to the chapter (``pov``), with how many of
    the secrets each knows, by name. ``NotFound`` (``unknown_story``) for a story never started."""
    _story(views, story_id)
    chapter = canon_reads.chapter_asked(views, story_id, as_of)
    found = views.who_knows(story_id, chapter)
    versions = {c["key"]: c for c in found["characters"]}

    def name(key: str) -> str:
        return _shown_name(principal, versions.get(key), key, chapter)

    known: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for k in found["knowledge"]:
        known.setdefault((k["kind"], k["key"]), []).append(
            {"character": k["character"], "name": name(k["character"]), "chapter": k["chapter"], "how": k["how"],
             "source": k["source"]})
    shown = []
    for row in found["secrets"]:
        secret = canon_reads.version(principal, row, chapter)
        withheld = secret["hidden"] and not canon_reads.sees_spoilers(principal)
        secret["known_by"] = [] if withheld else known.get((row["kind"], row["key"]), [])
        shown.append(secret)
    knows: dict[str, int] = {}
    for secret in shown:
        for k in secret["known_by"]:
            knows[k["character"]] = knows.get(k["character"], 0) + 1
    pov = {p["key"] for p in found["pov"]}
    rows = sorted(({"key": key, "name": name(key), "pov": key in pov, "knows": knows.get(key, 0)}
                   for key in knows.keys() | pov), key=lambda r: (str(r["name"]).casefold(), str(r["key"])))
    return {"story_id": story_id, "as_of": chapter, "secrets": shown, "characters": rows}


def character_knowledge(principal: Principal, views: KnowledgeReads, story_id: str, character: str,
                        as_of: int | None = None) -> dict[str, Any]:
    """What ``character`` knows as of the chapter asked::

        {"story_id", "as_of", "character", "name",
         "knows": [{kind, key, name, secret, retired, chapter, how, source, hidden, [reason]}]}

    Every knowledge record of the character from a chapter up to it, by chapter, kind and key:
    the known entry's name and whether it is a secret are those of its version in force at the
    chapter asked (a retired entry: its key, not a secret, ``retired`` true); ``source`` is the
    log position of the record. Below author scope a record of an entry hidden then is left out.
    ``NotFound``: ``unknown_story``, or ``unknown_character`` when the story never confirmed a
    character of that key."""
    _story(views, story_id)
    chapter = canon_reads.chapter_asked(views, story_id, as_of)
    found = views.knowledge_of(story_id, character, chapter)
    if found is None:
        raise NotFound("unknown_character", f"no confirmed character {character!r} in story {story_id!r}",
                       "character")
    listed = []
    for k in found["knows"]:
        reason = canon_reads.hidden_reason(k["hidden_until"], chapter)
        if reason is not None and not canon_reads.sees_spoilers(principal):
            continue
        item = {"kind": k["kind"], "key": k["key"], "name": k["name"] if k["name"] and not k["retired"] else k["key"],
                "secret": k["secret"], "retired": bool(k["retired"]), "chapter": k["chapter"], "how": k["how"],
                "source": k["source"], "hidden": reason is not None}
        if reason is not None:
            item["reason"] = reason
        listed.append(item)
    return {"story_id": story_id, "as_of": chapter, "character": character,
            "name": _shown_name(principal, found["character"], character, chapter), "knows": listed}


def grid(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The viewer's grid of a ``secrets`` answer: one row per character of ``characters`` (key,
    name, pov), its ``cells`` one per secret in ``secrets``' order, each the character's
    ``known_by`` record of it (chapter, how, source) or None."""
    known = [{k["character"]: k for k in s["known_by"]} for s in view["secrets"]]
    return [{"key": c["key"], "name": c["name"], "pov": c["pov"],
             "cells": [by_character.get(c["key"]) for by_character in known]} for c in view["characters"]]
