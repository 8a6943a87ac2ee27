"""The packet's JSON as pydantic models: its JSON Schema, for ``/openapi.json`` (the packet
route's 200) and for any client that wants a typed packet.

These mirror ``packet.Packet.as_dict`` field for field; nothing builds a packet through them
(its bytes stay ``Packet.to_json``'s). ``tests/integration/test_http_api.py`` validates a real
packet answer against the schema with every object closed, so a field added to the packet and
not here fails there. Extra members are allowed by the schema itself: fields are only ever
added to the packet (``packet.py``), so a client validating against an older schema keeps
working.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from canon_ledger.application.packets.packet import Status
from canon_ledger.domain.tiers import HOLDS, TIERS, Tier

Role = Literal["planner", "writer", "qa", "summarizer", "chat"]  # domain.story.ROLES


class PacketItem(BaseModel):
    """One candidate of the packet, kept or not, with why."""

    tier: Tier = Field(description=", ".join(f"{tier} {HOLDS[tier]}" for tier in TIERS))
    kind: str = Field(description="what the item is: a canon kind (character, location, ...) or a packet part "
                                  "(style_guardrails, goals, chapter_summary, draft_under_review, ...)")
    key: str = Field(description="the canon key, or the part's own key")
    text: str = Field(description="the text given to the worker (cut short when trimmed, empty when dropped)")
    tokens: int = Field(ge=0, description="tokens of `text`, counted with the packet's tokenizer (0 when dropped)")
    status: Status = Field(description="included whole, trimmed to fit, or dropped")
    reason: str = Field(description="why the item is in the packet, and why it was trimmed or dropped")
    sources: list[int] = Field(description="positions in the global log of the events it was built from")


class PacketTier(BaseModel):
    """One tier's counts (every tier is listed, P0 to P4, in order)."""

    tier: Tier
    included: int = Field(ge=0, description="items included whole")
    trimmed: int = Field(ge=0, description="items trimmed to fit")
    dropped: int = Field(ge=0, description="items dropped")
    tokens: int = Field(ge=0, description="tokens of the included and trimmed items")


class PacketStage(BaseModel):
    """One step of building the packet (L0 structured recall, L1 retrieval, ...)."""

    step: str
    status: Literal["active", "done", "skipped", "error"]
    detail: str = Field(description="what the step did or why it did not run")


class Packet(BaseModel):
    """A worker's context packet: the bytes ``canon packet --format json`` prints. The same
    request at the same position gives the same bytes, ``hash`` and ``packet_id``. Fields may be
    added; none is ever renamed."""

    packet_id: str = Field(pattern=r"^pkt_[0-9a-f]{24}$", description="`pkt_` and the hash's first 24 hex digits")
    story_id: str
    role: Role
    chapter: int = Field(ge=1)
    scene: str | None = Field(description="the scene it is narrowed to, or null for the whole chapter")
    position: int = Field(ge=0, description="the last position in the global log that changed the story's canon")
    budget: int = Field(ge=0, description="tokens the packet may use")
    used_tokens: int = Field(ge=0, description="tokens of the included and trimmed items (the tiers' sum)")
    tokenizer: str = Field(description="what counted the tokens (tiktoken cl100k_base)")
    tiers: list[PacketTier] = Field(description=f"{TIERS[0]} to {TIERS[-1]}, in order")
    items: list[PacketItem] = Field(description="every candidate, in packet order")
    stages: list[PacketStage] = Field(description="how the packet was built, step by step")
    hash: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the packet's body (every field but "
                                                             "`packet_id` and `hash`): the route's ETag")
