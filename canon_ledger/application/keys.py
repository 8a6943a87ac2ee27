"""Issuing, listing, revoking and checking API keys (``domain.api_key``).

A token is shown once, when it is created; the log holds only its SHA-256. Checking a token
is one read by id; answers are remembered for ``CHECK_TTL`` seconds, so a revocation made
by another process takes effect within that time (at once in the process that revoked).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError
from canon_ledger.domain.topics import stored_topics

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain import ids
from canon_ledger.domain.api_key import ApiKey, ApiKeyName, Principal, check_key, token_hash
from canon_ledger.domain.errors import NotFound, RuleViolated

TOKEN_PREFIX = "cl_"
CHECK_TTL = 2.0  # seconds a checked token's answer is reused
KEY_TOPICS = stored_topics(ApiKey.Issued, ApiKey.Revoked)
ISSUED_TOPICS = stored_topics(ApiKey.Issued)


@dataclass(frozen=True)
class KeyInfo:
    name: str
    scope: str
    stories: tuple[str, ...]
    revoked: bool
    position: int | None = None  # where it was issued

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "stories": list(self.stories), "revoked": self.revoked,
                "issued_at_position": self.position}


class Keys:
    def __init__(self, ledger: CanonLedger) -> None:
        self.ledger = ledger
        self._checked: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def create(self, scope: str, stories: list[str] | tuple[str, ...] = (), name: str | None = None) -> tuple[str, KeyInfo]:
        """(the token, shown only now; the key). A name already used is refused."""
        stories = sorted(set(stories))
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = token_hash(token)
        name = name or f"{scope}-{digest[:8]}"
        check_key(scope, stories, name)
        key = ApiKey(token_hash=digest, name=name, scope=scope, stories=stories)
        try:
            recordings = self.ledger.save(key, ApiKeyName(name=name, token_hash=digest))
        except IntegrityError:
            raise RuleViolated("key_name_must_be_unique", f"a key named {name!r} exists (revoked keys keep their names)",
                               "name") from None
        return token, KeyInfo(name, scope, tuple(stories), False, recordings[0].notification.id)

    def revoke(self, name: str) -> bool:
        """True if revoked now, False if it was already; unknown names are refused."""
        try:
            claim: ApiKeyName = self.ledger.repository.get(ids.api_key_name_id(name))
        except AggregateNotFoundError:
            raise NotFound("unknown_key", f"no key is named {name!r}", "name") from None
        key: ApiKey = self.ledger.repository.get(ids.api_key_id(claim.token_hash))
        changed = key.revoke()
        if changed:
            self.ledger.save(key)
        with self._lock:
            self._checked.pop(claim.token_hash, None)
        return changed

    def list(self) -> list[KeyInfo]:
        """Every key ever issued, revoked ones included, by name."""
        keys: dict[Any, KeyInfo] = {}  # by aggregate id
        start = 1
        while True:
            page = self.ledger.read(start, 1000, topics=KEY_TOPICS)
            for position, e in page:
                if isinstance(e, ApiKey.Issued):
                    keys[e.originator_id] = KeyInfo(e.name, e.scope, tuple(e.stories), False, position)
                elif e.originator_id in keys:
                    info = keys[e.originator_id]
                    keys[e.originator_id] = KeyInfo(info.name, info.scope, info.stories, True, info.position)
            if len(page) < 1000:
                break
            start = page[-1][0] + 1
        return sorted(keys.values(), key=lambda k: k.name)

    def any(self) -> bool:
        return bool(self.ledger.read(1, 1, topics=ISSUED_TOPICS))

    def check(self, token: str) -> Principal | None:
        """The principal of a live key with this token, else None."""
        digest = token_hash(token)
        now = time.monotonic()
        with self._lock:
            hit = self._checked.get(digest)
        if hit is not None and now - hit[0] < CHECK_TTL:
            return hit[1]
        try:
            key: ApiKey = self.ledger.repository.get(ids.api_key_id(digest))
            principal = None if key.revoked else key.principal
        except AggregateNotFoundError:
            principal = None
        with self._lock:
            if len(self._checked) > 10_000:
                self._checked.clear()
            self._checked[digest] = (now, principal)
        return principal

