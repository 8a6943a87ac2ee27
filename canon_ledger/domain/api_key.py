"""API keys: who may come through a network door, and what they may see.

A key is an aggregate named by the SHA-256 of its token (so authenticating is one read by
id, and the token itself is never stored anywhere); an ``ApiKeyName`` aggregate, saved in the
same transaction, makes names unique (a second key of one name collides on its id) and
lets a key be revoked by name. Scopes nest: ``worker`` < ``author`` < ``admin``. A key with
stories sees only those; with none it sees every story.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.chunking import collection_story
from canon_ledger.domain.errors import RuleViolated

SCOPES = ("worker", "author", "admin")
MAX_KEY_NAME = 100
def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """The caller a key stands for: its name, scope and the stories it is limited to
    (empty: every story)."""

    name: str
    scope: str
    stories: tuple[str, ...] = ()

    def has(self, scope: str) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(scope)

    def sees(self, story_id: str | None) -> bool:
        """A story this key may read or change (None, a command naming no story: only an
        unrestricted key)."""
        if not self.stories:
            return True
        return story_id is not None and story_id in self.stories

    def sees_collection(self, collection: str) -> bool:
        """A story's collection (``story:<id>``) as that story; a shared collection: every key
        reads it (only a key not limited to stories changes it)."""
        story = collection_story(collection)
        return story is None or self.sees(story)

    @property
    def unrestricted(self) -> bool:
        return not self.stories


def check_key(scope: str, stories: list[str], name: str) -> None:
    if scope not in SCOPES:
        raise RuleViolated("unknown_scope", f"scope must be one of {', '.join(SCOPES)}, not {scope!r}", "scope")
    if not name or len(name) > MAX_KEY_NAME or not name.isprintable():
        raise RuleViolated("invalid_key_name", f"a key name is 1..{MAX_KEY_NAME} printable characters", "name")
    if any(not s or len(s) > 64 or not s.isprintable() or any(c.isspace() for c in s) for s in stories):
        raise RuleViolated("invalid_story_id", "a story id is 1..64 printable characters, no spaces", "stories")


class ApiKey(Aggregate):
    class Issued(Aggregate.Created):
        token_hash: str
        name: str
        scope: str
        stories: list[str]
        minted_open: bool = False  # events written before this field read as False

    class Revoked(Aggregate.Event):
        pass

    @staticmethod
    def create_id(token_hash: str, **_: Any) -> UUID:
        return ids.api_key_id(token_hash)

    @event(Issued)
    def __init__(self, token_hash: str, name: str, scope: str, stories: list[str], minted_open: bool = False) -> None:
        """``minted_open``: created by a caller with no key (``canon serve --open``), so that an
        admin can tell such keys apart."""
        self.token_hash = token_hash
        self.name = name
        self.scope = scope
        self.stories = list(stories)
        self.revoked = False

    def revoke(self) -> bool:
        """Idempotent: revoking a revoked key changes nothing (False)."""
        if self.revoked:
            return False
        self._revoked()
        return True

    @event(Revoked)
    def _revoked(self) -> None:
        self.revoked = True

    @property
    def principal(self) -> Principal:
        return Principal(self.name, self.scope, tuple(self.stories))


class ApiKeyName(Aggregate):
    """The unique name of a key, pointing at it."""

    class Claimed(Aggregate.Created):
        name: str
        token_hash: str

    @staticmethod
    def create_id(name: str, **_: Any) -> UUID:
        return ids.api_key_name_id(name)

    @event(Claimed)
    def __init__(self, name: str, token_hash: str) -> None:
        self.name = name
        self.token_hash = token_hash
