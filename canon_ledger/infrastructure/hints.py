"""Hints a refusal gains at the door, from the read models: a scene card's tag that
is not a key but an entry's name or alias ("the Marrow girl") is refused by the domain, which
knows entries only by key; here the canon read model, which keeps every entry's names
casefolded (``canon_tables``' aliases table), names the entry meant::

    characters tag 'the Marrow girl' names no confirmed character entry
    (did you mean key 'ilse' (alias 'the Marrow girl' of character ilse)?)

The CLI's ``canon apply`` and ``POST /v1/commands`` both answer through ``TagHints``. A hint is
looked up only for such a refusal, never on the way of a command that is applied; a read model
that cannot answer (outdated, unavailable) gives no hint and the refusal stands as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from canon_ledger.application.results import CommandResult
from canon_ledger.domain.canon import KINDS
from canon_ledger.domain.scene_tags import TAG_KINDS, TAG_LISTS
from canon_ledger.domain.commands import AddSceneCard
from canon_ledger.domain.errors import CanonError

TAG_REFUSAL = "scene_card_tags_must_be_confirmed_canon"


def named(services: Any, story_id: str, word: str) -> list[dict[str, Any]]:
    """The confirmed entries of ``story_id`` that ``word`` is a name or an alias of (any case),
    latest version first: each with its kind, key, and ``as`` ("name" or "alias") and the
    spelling the entry gives it."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in services.views().entries_named(story_id, word):
        spelled = next((a for a in row["aliases"] if isinstance(a, str) and a.casefold() == word.casefold()), None)
        as_ = "alias" if spelled is not None else "name"
        found.setdefault((row["kind"], row["key"]), {"kind": row["kind"], "key": row["key"], "as": as_,
                                                     "spelled": spelled if spelled is not None else row["name"]})
    return list(found.values())


def tag_hint(services: Any, story_id: str, tag_list: str, word: str) -> str:
    """`` (did you mean key 'K' (alias 'A' of character K)?)`` for a tag that is a name or an
    alias, preferring an entry of a kind the list tags; "" when it is neither."""
    entries = named(services, story_id, word)
    if not entries:
        return ""
    kinds = TAG_KINDS.get(tag_list, KINDS)
    fitting = [e for e in entries if e["kind"] in kinds] or entries
    shown = " or ".join(f"key {e['key']!r} ({e['as']} {e['spelled']!r} of {e['kind']} {e['key']})"
                        for e in fitting[:3])
    elsewhere = "" if fitting[0]["kind"] in kinds else \
        f"; a {fitting[0]['kind']} is tagged under {_lists_of(fitting[0]['kind'])}"
    return f" (did you mean {shown}?{elsewhere})"


def _lists_of(kind: str) -> str:
    return " or ".join(t.name for t in TAG_LISTS if t.kind in (kind, None))


class TagHints:
    """Adds the hint to a result refused for a tag that is a name or alias. ``services``: how to
    get the read models (called at most once, on the first such refusal); ``close``: what to
    do with them when done (the CLI opens its own, a server lends its own)."""

    def __init__(self, services: Callable[[], Any], close: Callable[[Any], None] | None = None) -> None:
        self._open = services
        self._close = close
        self._services: Any = None

    def __call__(self, result: CommandResult, command: Any) -> CommandResult:
        error = result.error
        if error is None or error.code != TAG_REFUSAL or not isinstance(command, AddSceneCard) or not error.field:
            return result
        keys = getattr(command, error.field, None) or []
        word = next((k for k in keys if repr(k) in error.message), None)
        if word is None:
            return result
        try:
            if self._services is None:
                self._services = self._open()
            hint = tag_hint(self._services, command.story_id, error.field, word)
        except CanonError:  # an outdated read model, say: the refusal stands as it is
            return result
        if not hint:
            return result
        return dataclasses.replace(result, error=type(error)(error.code, error.message + hint, error.field))

    def close(self) -> None:
        if self._services is not None and self._close is not None:
            self._close(self._services)
        self._services = None
