"""What ``/openapi.json`` declares for routes that answer bytes they build themselves (a raw
``Response``), so that generated clients get typed answers. Nothing here touches the bytes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from canon_ledger.application.packets.schema import Packet, PacketStage

_PACKET_HEADERS: dict[str, Any] = {
    "ETag": {"description": "the packet hash, quoted: send it back as `If-None-Match`", "schema": {"type": "string"}},
    "X-Canon-Packet-Id": {"description": "the packet's `packet_id`", "schema": {"type": "string"}},
    "X-Canon-Position": {"description": "the packet's `position`", "schema": {"type": "integer"}},
    "X-Canon-Recorded": {"description": "`true` if the log holds the packet's record (recorded now or before), "
                                        "`false` if not (a worker key past its recording budget); absent with "
                                        "`at` or `record=false`", "schema": {"type": "string", "enum": ["true", "false"]}},
}

# ``GET /v1/stories/{story}/packet``: the packet (``Packet.to_json``'s bytes), or 304.
PACKET_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Packet, "description": "The packet: the bytes `canon packet --format json` prints",
          "headers": _PACKET_HEADERS},
    304: {"description": "Not Modified: `If-None-Match` named this packet's ETag (no body)",
          "headers": _PACKET_HEADERS},
}


class FindingEntry(BaseModel):
    """The canon entry a finding is about."""

    kind: str
    key: str
    name: str = Field(description="its display name (the latest version's)")


class FindingSpan(BaseModel):
    """Where in the draft's text: Python string indices, `start` inclusive, `end` exclusive."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    text: str = Field(description="the draft's text in the span")


class FindingEvidence(BaseModel):
    """A canon step that proves the finding."""

    text: str = Field(description="the step's canon text, as a packet renders it")
    valid_from: int = Field(description="the chapter it takes effect")
    source: int = Field(description="the log position of the canon event that made it")
    hidden_until: int | None = Field(description="the step's, when it has one (its text is withheld below "
                                                       "author scope while it is hidden)")


class FindingDismissal(BaseModel):
    reason: str
    source: int = Field(description="the log position of the dismissal's event")


class ContinuityFinding(BaseModel):
    """One contradiction between the draft and the canon in force at its chapter."""

    id: str = Field(description="stable for the same draft and canon: what a dismissal names")
    type: str = Field(description="not_yet_in_canon, retired, spoiler, field_conflict, unavailable_character or "
                                  "knowledge_leak; `llm:` and a type for a finding of the LLM review (`provider`)")
    severity: Literal["error", "warning"]
    entry: FindingEntry
    span: FindingSpan
    evidence: list[FindingEvidence]
    message: str


class DismissedFinding(ContinuityFinding):
    """A finding a person dismissed as intentional: not counted, listed with the dismissal."""

    dismissed: FindingDismissal


class ContinuityReport(BaseModel):
    """``canon check --format json``: a draft checked against the confirmed canon in force at its
    chapter. Fields may be added; none is ever renamed."""

    story_id: str
    draft_id: str
    chapter: int = Field(description="the draft's chapter: the canon in force there is what it is checked against")
    position: int = Field(description="the log position the canon was read at")
    status: Literal["submitted", "accepted", "rejected"] = Field(description="the draft's state")
    findings: list[ContinuityFinding] = Field(description="in the draft's order (span start, then type)")
    dismissed: list[DismissedFinding] = Field(description="findings a person dismissed on this draft")
    errors: int = Field(ge=0, description="findings of severity error: `canon check` exits 1 when any")
    warnings: int = Field(ge=0)
    stages: list[PacketStage] = Field(description="read, rules, dismissed, and the LLM review when asked "
                                                   "(`provider`), with why it fell back when it did")


# ``GET /v1/stories/{story}/drafts/{draft}/check``
CHECK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": ContinuityReport,
          "description": "The report, also when it holds error findings: they are the answer"},
}


# -- who knows what: ``application.who_knows`` -----------------------------------------------------

class KnownBy(BaseModel):
    """One character who knows a secret as of the chapter read."""

    character: str = Field(description="the character's key")
    name: str = Field(description="its name as of the chapter (its key when that is hidden from this key)")
    chapter: int = Field(description="the chapter from which it knows the secret")
    how: str = Field(description="how it learned it (told by, overheard, deduced)")
    source: int = Field(description="the log position of the knowledge record (`CanonEntry.KnowledgeRecorded`)")


class Secret(BaseModel):
    """An entry whose version in force at the chapter read is a secret (`fields.secret`), listed as
    the canon view lists it: below author scope, one hidden at the chapter keeps only kind, key,
    step, valid_from, hidden_until and source (name and text `""`) and who knows it is withheld."""

    kind: str
    key: str
    step: int = Field(description="the entry's step (event version) in force")
    valid_from: int
    name: str
    hidden_until: int | None
    text: str = Field(description="the version's canon text, as a packet renders it")
    source: int = Field(description="the log position of the version's event")
    hidden: bool = Field(description="hidden at the chapter read (`hidden_until` later than it)")
    reason: str | None = Field(None, description="why it is hidden (only when it is)")
    known_by: list[KnownBy] = Field(description="who knows it as of the chapter read, by chapter then character")


class SecretsRow(BaseModel):
    """A character of the grid: one who knows a secret shown, or a scene's point of view."""

    key: str
    name: str
    pov: bool = Field(description="the point of view of a scene card up to the chapter read")
    knows: int = Field(ge=0, description="how many of the secrets listed it knows")


class SecretsView(BaseModel):
    """``canon secrets --format json``: the secrets in force as of a chapter and who knows each."""

    story_id: str
    as_of: int = Field(description="the chapter read (default: the story's latest planned chapter)")
    secrets: list[Secret] = Field(description="by kind and key")
    characters: list[SecretsRow] = Field(description="the characters who know any, and the point-of-view "
                                                     "characters, by name")


class Known(BaseModel):
    """One entry a character knows as of the chapter read."""

    kind: str
    key: str
    name: str = Field(description="the entry's name as of the chapter read (its key once retired)")
    secret: bool = Field(description="its version in force at the chapter read is a secret")
    retired: bool
    chapter: int = Field(description="the chapter from which the character knows it")
    how: str
    source: int = Field(description="the log position of the knowledge record")
    hidden: bool = Field(description="hidden at the chapter read: only an author key is shown it")
    reason: str | None = Field(None, description="why it is hidden (only when it is)")


class CharacterKnowledge(BaseModel):
    """``canon knowledge --format json``: what one character knows as of a chapter."""

    story_id: str
    as_of: int
    character: str = Field(description="the character's key")
    name: str = Field(description="its name as of the chapter (its key when that is hidden from this key)")
    knows: list[Known] = Field(description="by chapter, then kind and key")


# ``GET /v1/stories/{story}/secrets`` and ``.../characters/{character}/knowledge``
SECRETS_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": SecretsView, "description": "Who knows what"}}
KNOWLEDGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": CharacterKnowledge, "description": "What the character knows"}}
