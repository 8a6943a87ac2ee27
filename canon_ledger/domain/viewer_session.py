"""A login of the web viewer: a session id, kept in the browser's cookie, standing for a key.

The session is an aggregate named by the SHA-256 of its id (so a page resolves it with one
read by id, and neither the id nor the key's token is stored anywhere): it holds the key's
token hash and when it expires. Logging out ends it, so a copied cookie stops working; it
also stops when its key is revoked, since each page checks the key behind it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class ViewerSession(Aggregate):
    class Opened(Aggregate.Created):
        session_hash: str
        token_hash: str
        expires_at: datetime

    class Ended(Aggregate.Event):
        pass

    @staticmethod
    def create_id(session_hash: str, **_: Any) -> UUID:
        return ids.viewer_session_id(session_hash)

    @event(Opened)
    def __init__(self, session_hash: str, token_hash: str, expires_at: datetime) -> None:
        self.session_hash = session_hash
        self.token_hash = token_hash
        self.expires_at = expires_at
        self.ended = False

    def end(self) -> bool:
        """Idempotent: ending an ended session changes nothing (False)."""
        if self.ended:
            return False
        self._ended()
        return True

    @event(Ended)
    def _ended(self) -> None:
        self.ended = True

    def live(self, now: datetime) -> bool:
        """Neither ended nor expired at ``now`` (the key behind it is checked apart)."""
        return not self.ended and now < self.expires_at
