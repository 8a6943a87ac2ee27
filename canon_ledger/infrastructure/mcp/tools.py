"""What an LLM agent may do through MCP: read packets, search, canon and threads; propose canon.

Each method takes the caller (a ``Principal``) and answers what the HTTP API answers for the
same question, through the same services and the same checks (``application.access``: scope,
the key's stories, a story that does not exist), or raises the same errors (``CanonError``).
Every method blocks: the MCP server runs it in a worker thread.

Invariant: no method confirms, rejects or retires canon, or accepts or rejects a draft. An
agent's ``propose_canon`` leaves a proposal (``proposed``) that only a person (an author key in the
API, or the review queue) can confirm; until then no packet includes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from canon_ledger.application import canon_reads, who_knows
from canon_ledger.application.access import apply_for, issued_record, require, search_collection, story_views, visible
from canon_ledger.application.command_reader import read_value
from canon_ledger.application.packets.recipes import Request as PacketRequest
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.errors import CanonError

if TYPE_CHECKING:  # built by the door that serves the tools: ``canon serve`` or ``canon mcp``
    from canon_ledger.infrastructure.http.context import ServerContext


def proposal_digest(story: str, kind: str, key: str, name: str, text: str, aliases: list[str],
                    fields: dict[str, Any], valid_from: int) -> str:
    """The proposal's content hash: the same proposal asked twice gets the same ids (a
    ``duplicate``), a changed one new ids."""
    body = json.dumps([story, kind, key, name, text, aliases, fields, valid_from], sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


class AgentTools:
    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.services = context.services

    def get_packet(self, principal: Principal, story: str, role: str, chapter: int, scene: str | None = None,
                   budget: int | None = None, after: int | None = None, draft: str | None = None) -> str:
        """The packet JSON, byte for byte what ``GET /v1/stories/{story}/packet`` sends."""
        return self.issue_packet(principal, story, role, chapter, scene, budget, after, draft)[0]

    def issue_packet(self, principal: Principal, story: str, role: str, chapter: int, scene: str | None = None,
                     budget: int | None = None, after: int | None = None,
                     draft: str | None = None) -> tuple[str, bool]:
        """The packet JSON and whether it is recorded, so that ``audit_packet`` can replay it:
        as the API records it (a key below author scope within its recording budget,
        ``infrastructure.http.recording``)."""
        require(principal, "worker")
        visible(principal, story)
        packet, recorded = self.context.reading(self.services.issue,
                                                PacketRequest(story, role, chapter, scene, budget, draft),
                                                after=after, may_record=self.context.records.gate(principal))
        return packet.to_json(), recorded

    def search(self, principal: Principal, collection: str, query: str, top: int = 8,
               as_of: int | None = None) -> dict[str, Any]:
        require(principal, "worker")
        return search_collection(self.context, principal, collection, query, top, field="query",
                                 as_of=as_of).as_dict()

    def list_canon(self, principal: Principal, story: str, as_of: int, kind: str | None = None) -> dict[str, Any]:
        require(principal, "worker")
        views = story_views(self.context, principal, story, None)
        return {"story_id": story, "as_of": as_of, "kind": kind,
                "entries": canon_reads.canon_as_of(principal, views, story, as_of, kind)}

    def canon_entry(self, principal: Principal, story: str, kind: str, key: str,
                    as_of: int | None = None) -> dict[str, Any]:
        """Every confirmed version of one entry; with ``as_of``, only what a reader of that
        chapter may know: the version in force then (``in_force``) and the versions valid from
        that chapter or before (an entry not in force then is unknown, as it is to a packet).
        Hidden versions as ``canon_reads.entry`` shows them to this key."""
        require(principal, "worker")
        views = story_views(self.context, principal, story, None)
        return canon_reads.entry(principal, views, story, kind, key, as_of)

    def open_threads(self, principal: Principal, story: str, chapter: int) -> dict[str, Any]:
        require(principal, "worker")
        views = story_views(self.context, principal, story, None)
        return {"story_id": story, "chapter": chapter,
                "threads": canon_reads.canon_as_of(principal, views, story, chapter, "thread", active=True)}

    def secrets(self, principal: Principal, story: str, as_of: int | None = None) -> dict[str, Any]:
        """``GET /v1/stories/{story}/secrets``: the secrets in force as of the chapter and who knows each."""
        require(principal, "worker")
        views = story_views(self.context, principal, story, None)
        return self.context.reading(who_knows.secrets, principal, views, story, as_of)

    def character_knowledge(self, principal: Principal, story: str, character: str,
                            as_of: int | None = None) -> dict[str, Any]:
        """``GET /v1/stories/{story}/characters/{character}/knowledge``: what it knows as of the chapter."""
        require(principal, "worker")
        views = story_views(self.context, principal, story, None)
        return self.context.reading(who_knows.character_knowledge, principal, views, story, character, as_of)

    def propose_canon(self, principal: Principal, story: str, kind: str, key: str, name: str, text: str,
                      valid_from: int, aliases: list[str] | None = None,
                      fields: dict[str, Any] | None = None) -> dict[str, Any]:
        """Append a ``propose_canon`` with ids derived from its content: asking again is a
        ``duplicate`` and appends nothing."""
        require(principal, "author")
        visible(principal, story)
        aliases, fields = list(aliases or []), dict(fields or {})
        digest = proposal_digest(story, kind, key, name, text, aliases, fields, valid_from)
        proposal_id = f"agent-{digest[:24]}"
        command = read_value({"type": "propose_canon", "command_id": f"mcp-propose-{digest[:32]}",
                              "story_id": story, "proposal_id": proposal_id, "kind": kind, "key": key,
                              "name": name, "aliases": aliases, "text": text, "fields": fields,
                              "valid_from": valid_from})
        if isinstance(command, CanonError):
            raise command
        ledger = self.services.ledger
        [result] = apply_for(ledger, [command], principal, atomic=True)
        if result.error is not None:
            raise result.error
        return {"status": result.status, "proposal_id": proposal_id, "command_id": command.command_id,
                "position": result.position if result.position is not None else ledger.event_log.position(),
                "proposal_status": "proposed", "pending": True,  # "pending": the same, as older clients read it
                "how_to_confirm": (
                    "Only a person confirms canon. It stays proposed until an author confirms it in the review queue "
                    f"(/stories/{story}/review in `canon serve`) or sends "
                    f'{{"type": "confirm_canon", "story_id": "{story}", "proposal_id": "{proposal_id}"}} '
                    "to POST /v1/commands with an author key; until then no packet includes it.")}

    def audit_packet(self, principal: Principal, packet_id: str) -> dict[str, Any]:
        require(principal, "worker")
        issued_record(self.services.ledger, principal, packet_id)
        return self.context.reading(self.services.auditor.audit, packet_id).as_dict()

    def check_draft(self, principal: Principal, story: str, draft: str) -> dict[str, Any]:
        """``GET /v1/stories/{story}/drafts/{draft}/check``'s report, for a key that may read the
        draft: an author key any draft of its stories; a worker key (a qa agent) only a submitted
        one, the draft a qa packet would hold (an accepted or rejected one: ``draft_not_under_review``)."""
        require(principal, "worker")
        story_views(self.context, principal, story, None)
        report = self.context.reading(self.services.continuity().check, story, draft,
                                      spoilers=canon_reads.sees_spoilers(principal))
        if not principal.has("author") and report.status != "submitted":
            raise CanonError("draft_not_under_review", f"draft {draft!r} is {report.status}; a key below author "
                             "scope checks only a submitted draft, as a qa packet holds it", "draft")
        return report.as_dict()

    def stories(self, principal: Principal) -> dict[str, Any]:
        require(principal, "worker")
        return {"stories": self.context.reading(self.services.views, None).stories(principal.stories)}
