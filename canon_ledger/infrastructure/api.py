"""The Python API: embed the ledger in a program, in-process (no server).

    from canon_ledger.infrastructure.api import open_ledger_api

    with open_ledger_api("sqlite:///canon.db") as canon:
        results = canon.apply([{"type": "start_story", "command_id": "c-1", "story_id": "s", "title": "S"}])
        packet = canon.packet("s", "writer", 1)
        report = canon.audit(packet.packet_id)

Commands are the vocabulary of ``canon schema``, as dicts or parsed ``domain.commands`` models;
answers are the same objects the CLI and the HTTP API render (``CommandResult``, ``Packet``,
``AuditReport``). One instance holds the store's pools, read models, tokenizer and embedder:
open it once, reuse it, close it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from canon_ledger.application.audit import AuditReport
from canon_ledger.application.command_reader import read_value
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.results import CommandResult
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.services import Services


class LedgerAPI:
    def __init__(self, services: Services) -> None:
        self.services = services

    def apply(self, commands: Iterable[dict[str, Any] | Any], *, atomic: bool = False) -> list[CommandResult]:
        """One result per command, in order (a dict that is not a valid command is ``rejected``
        in its place, and with ``atomic`` nothing of the batch is written)."""
        return self.services.ledger.apply([read_value(command) for command in commands], atomic=atomic)

    def packet(self, story: str, role: str, chapter: int, *, scene: str | None = None, budget: int | None = None,
               after: int | None = None, at: int | None = None, record: bool = True, draft: str | None = None) -> Packet:
        return self.services.packet(Request(story, role, chapter, scene, budget, draft), after=after, at=at,
                                    record=record)

    def audit(self, packet_id: str) -> AuditReport:
        return self.services.auditor.audit(packet_id)

    def position(self) -> int:
        return self.services.ledger.event_log.position()

    @property
    def views(self) -> Any:
        """``projections.story_views.StoryViews``, reflecting everything applied."""
        return self.services.views()

    def close(self) -> None:
        self.services.close()

    def __enter__(self) -> LedgerAPI:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def open_ledger_api(url: str | None = None, *, embedder: Any = None) -> LedgerAPI:
    """Open (creating if new) the store at ``url`` (default ``$CANON_DATABASE_URL`` or
    ``sqlite:///canon.db``)."""
    return LedgerAPI(bootstrap(url, embedder=embedder))
