"""Issuing, listing, revoking and checking API keys (``domain.api_key``), and the viewer's
login sessions that stand for them (``domain.viewer_session``).

A token is shown once, when it is created; the log holds only its SHA-256. Checking a token
is one read by id; answers are remembered for ``CHECK_TTL`` seconds, so a revocation made
by another process takes effect within that time (at once in the process that revoked).

A session id is likewise shown once, to the browser that logged in; the log holds only its
SHA-256, mapped to the key's token hash, with an expiry. A session resolves to its key's
principal while it is neither ended nor expired and its key is live; ending a session (a
logout) or revoking its key reaches other processes within ``CHECK_TTL``, as a revocation does.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeVar

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError
from canon_ledger.domain.topics import stored_topics

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain import ids
from canon_ledger.domain.api_key import ApiKey, ApiKeyName, Principal, check_key, token_hash
from canon_ledger.domain.errors import NotFound, RuleViolated
from canon_ledger.domain.viewer_session import ViewerSession, session_hash

TOKEN_PREFIX = "cl_"
CHECK_TTL = 2.0  # seconds a checked token's (or session's) answer is reused
MAX_REMEMBERED = 10_000  # checked tokens (and sessions) remembered before the memory starts afresh
KEY_TOPICS = stored_topics(ApiKey.Issued, ApiKey.Revoked)
ISSUED_TOPICS = stored_topics(ApiKey.Issued)


T = TypeVar("T")


class Remembered(Generic[T]):
    """Answers read from the log, reused for ``CHECK_TTL`` seconds (at most ``MAX_REMEMBERED``
    of them; past that the memory starts afresh). Thread-safe."""

    def __init__(self) -> None:
        self._answers: dict[str, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[T] | None:
        """(the answer,) if one younger than ``CHECK_TTL`` is remembered, else None."""
        with self._lock:
            hit = self._answers.get(key)
        return (hit[1],) if hit is not None and time.monotonic() - hit[0] < CHECK_TTL else None

    def put(self, key: str, answer: T) -> None:
        with self._lock:
            if len(self._answers) > MAX_REMEMBERED:
                self._answers.clear()
            self._answers[key] = (time.monotonic(), answer)

    def forget(self, key: str) -> None:
        with self._lock:
            self._answers.pop(key, None)


@dataclass(frozen=True)
class KeyInfo:
    name: str
    scope: str
    stories: tuple[str, ...]
    revoked: bool
    position: int | None = None  # where it was issued
    minted_open: bool = False  # created by a caller with no key (``canon serve --open``)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "stories": list(self.stories), "revoked": self.revoked,
                "issued_at_position": self.position, "minted_open": self.minted_open}


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Keys:
    def __init__(self, ledger: CanonLedger, clock: Callable[[], datetime] = utc_now) -> None:
        self.ledger = ledger
        self.clock = clock  # the wall clock sessions expire by
        self._checked: Remembered[Principal | None] = Remembered()
        # session hash -> (token hash, expiry) of a session not ended, else None
        self._sessions: Remembered[tuple[str, datetime] | None] = Remembered()

    def create(self, scope: str, stories: list[str] | tuple[str, ...] = (), name: str | None = None, *,
               minted_open: bool = False) -> tuple[str, KeyInfo]:
        """(the token, shown only now; the key). A name already used is refused. ``minted_open``:
        asked for by a caller with no key (a server run with ``--open``), and labelled so for good."""
        stories = sorted(set(stories))
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = token_hash(token)
        name = name or f"{scope}-{digest[:8]}"
        check_key(scope, stories, name)
        key = ApiKey(token_hash=digest, name=name, scope=scope, stories=stories, minted_open=minted_open)
        try:
            recordings = self.ledger.save(key, ApiKeyName(name=name, token_hash=digest))
        except IntegrityError:
            raise RuleViolated("key_name_must_be_unique", f"a key named {name!r} exists (revoked keys keep their names)",
                               "name") from None
        return token, KeyInfo(name, scope, tuple(stories), False, recordings[0].notification.id, minted_open)

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
        self._checked.forget(claim.token_hash)
        return changed

    def list(self) -> list[KeyInfo]:
        """Every key ever issued, revoked ones included, by name."""
        keys: dict[Any, KeyInfo] = {}  # by aggregate id
        start = 1
        while True:
            page = self.ledger.event_log.read(start, 1000, topics=KEY_TOPICS)
            for position, e in page:
                if isinstance(e, ApiKey.Issued):
                    keys[e.originator_id] = KeyInfo(e.name, e.scope, tuple(e.stories), False, position, e.minted_open)
                elif e.originator_id in keys:
                    info = keys[e.originator_id]
                    keys[e.originator_id] = KeyInfo(info.name, info.scope, info.stories, True, info.position,
                                                    info.minted_open)
            if len(page) < 1000:
                break
            start = page[-1][0] + 1
        return sorted(keys.values(), key=lambda k: k.name)

    def any(self) -> bool:
        return bool(self.ledger.event_log.read(1, 1, topics=ISSUED_TOPICS))

    def check(self, token: str) -> Principal | None:
        """The principal of a live key with this token, else None."""
        return self._check_hash(token_hash(token))

    def remembered(self, token: str) -> tuple[Principal | None] | None:
        """``(check(token),)`` when the answer is remembered (no read of the log), else None."""
        return self._checked.get(token_hash(token))

    def _check_hash(self, digest: str) -> Principal | None:
        hit = self._checked.get(digest)
        if hit is not None:
            return hit[0]
        try:
            key: ApiKey = self.ledger.repository.get(ids.api_key_id(digest))
            principal = None if key.revoked else key.principal
        except AggregateNotFoundError:
            principal = None
        self._checked.put(digest, principal)
        return principal

    # -- the viewer's sessions -----------------------------------------------------------------
    def open_session(self, token: str, lasts: float) -> tuple[str, Principal] | None:
        """A session of ``lasts`` seconds for the live key with this token: (the session id,
        shown only now; the key's principal), else None (an unknown or revoked key)."""
        principal = self.check(token)
        if principal is None:
            return None
        session_id = secrets.token_urlsafe(32)
        self.ledger.save(ViewerSession(session_hash=session_hash(session_id), token_hash=token_hash(token),
                                       expires_at=self.clock() + timedelta(seconds=lasts)))
        return session_id, principal

    def session_principal(self, session_id: str) -> Principal | None:
        """The principal of the key behind a session that is neither ended nor expired, while
        that key is live; else None."""
        digest = session_hash(session_id)
        hit = self._sessions.get(digest)
        if hit is not None:
            found = hit[0]
        else:
            try:
                viewer: ViewerSession = self.ledger.repository.get(ids.viewer_session_id(digest))
                found = None if viewer.ended else (viewer.token_hash, viewer.expires_at)
            except AggregateNotFoundError:
                found = None
            self._sessions.put(digest, found)
        if found is None or self.clock() >= found[1]:
            return None
        return self._check_hash(found[0])

    def remembered_session(self, session_id: str) -> tuple[Principal | None] | None:
        """``(session_principal(session_id),)`` when both the session and its key's check are
        remembered (no read of the log), else None."""
        hit = self._sessions.get(session_hash(session_id))
        if hit is None:
            return None
        found = hit[0]
        if found is None or self.clock() >= found[1]:
            return (None,)
        return self._checked.get(found[0])

    def end_session(self, session_id: str) -> bool:
        """True if ended now; False if it was already ended, or never was (a second logout)."""
        digest = session_hash(session_id)
        try:
            viewer: ViewerSession = self.ledger.repository.get(ids.viewer_session_id(digest))
        except AggregateNotFoundError:
            return False
        changed = viewer.end()
        if changed:
            try:
                self.ledger.save(viewer)
            except IntegrityError:  # another process ended it first
                changed = False
        self._sessions.forget(digest)
        return changed
