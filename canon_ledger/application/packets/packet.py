"""The packet: the workers' JSON contract and its hash (its text form: ``render.render_text``).

Field names here are a public contract: add, never rename. Bytes are deterministic: the
same request at the same position gives the same JSON, hash and packet_id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from canon_ledger.domain.tiers import TIERS as TIERS  # the packet's tiers, in order
from canon_ledger.domain.tiers import Tier as Tier

Status = Literal["included", "trimmed", "dropped"]


# slots, not frozen: built for every candidate of every packet, and a frozen init is slower.
@dataclass(slots=True)
class Item:
    tier: Tier
    kind: str
    key: str
    text: str
    tokens: int
    status: Status
    reason: str
    sources: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "kind": self.kind, "key": self.key, "text": self.text, "tokens": self.tokens,
                "status": self.status, "reason": self.reason, "sources": list(self.sources)}


@dataclass(frozen=True)
class Stage:
    step: str
    status: Literal["active", "done", "skipped", "error"]
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class Packet:
    story_id: str
    role: str
    chapter: int
    scene: str | None
    position: int
    budget: int
    tokenizer: str
    items: tuple[Item, ...]
    stages: tuple[Stage, ...]
    hash: str = field(default="")
    packet_id: str = field(default="")
    body_json: bytes = field(default=b"", repr=False, compare=False)  # the sealed body, reused by to_json
    recall: Any = field(default=None, repr=False, compare=False)  # ports.Recall: what L1 selected, for the record
    compiler: int = field(default=1, compare=False)  # which compiler built it (not in the JSON)
    draft: Any = field(default=None, repr=False, compare=False)  # ports.DraftView: the draft under review, if any
    # A book of a series: the stories it read inherited canon from (``inherited``), not in the JSON.
    homes: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def used_tokens(self) -> int:
        return sum(i.tokens for i in self.items if i.status != "dropped")

    def tiers(self) -> list[dict[str, Any]]:
        counts: dict[Tier, dict[str, Any]] = {
            tier: {"tier": tier, "included": 0, "trimmed": 0, "dropped": 0, "tokens": 0} for tier in TIERS}
        for i in self.items:
            row = counts[i.tier]
            row[i.status] += 1
            if i.status != "dropped":
                row["tokens"] += i.tokens
        return list(counts.values())

    def _body(self) -> dict[str, Any]:
        tiers = self.tiers()
        return {
            "story_id": self.story_id,
            "role": self.role,
            "chapter": self.chapter,
            "scene": self.scene,
            "position": self.position,
            "budget": self.budget,
            "used_tokens": sum(t["tokens"] for t in tiers),
            "tokenizer": self.tokenizer,
            "tiers": tiers,
            "items": [i.as_dict() for i in self.items],
            "stages": [s.as_dict() for s in self.stages],
        }

    def sealed(self) -> Packet:
        """The packet with its hash and id: both derive from the body, so equal bodies share them."""
        body = canonical_bytes(self._body())
        digest = hashlib.sha256(body).hexdigest()
        return Packet(**{**self.__dict__, "hash": digest, "packet_id": f"pkt_{digest[:24]}", "body_json": body})

    def as_dict(self) -> dict[str, Any]:
        return {"packet_id": self.packet_id, **self._body(), "hash": self.hash}

    def to_json(self) -> str:
        if not self.body_json:
            return canonical_json(self.as_dict())
        # The same bytes as canonical_json(as_dict()): the body's members between the id and the hash.
        head = canonical_bytes({"packet_id": self.packet_id})[:-1]
        tail = canonical_bytes({"hash": self.hash})[1:]
        return (head + b"," + self.body_json[1:-1] + b"," + tail).decode()


def canonical_json(obj: Any) -> str:
    """The contract's definition of a packet's bytes: compact, keys in insertion order, UTF-8."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def canonical_bytes(obj: Any) -> bytes:
    """``canonical_json(obj).encode()`` through orjson (a property test holds them equal)."""
    return orjson.dumps(obj)
