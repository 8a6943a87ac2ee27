"""What a command came to: one result per command, in input order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from canon_ledger.domain.errors import CanonError

Status = Literal["applied", "unchanged", "duplicate", "rejected", "not_applied", "conflict"]


@dataclass(frozen=True)
class CommandResult:
    index: int
    status: Status
    command_id: str | None = None
    type: str | None = None
    position: int | None = None
    error: CanonError | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("applied", "unchanged", "duplicate")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "status": self.status}
        if self.command_id is not None:
            out["command_id"] = self.command_id
        if self.type is not None:
            out["type"] = self.type
        if self.position is not None:
            out["position"] = self.position
        if self.error is not None:
            out["error"] = self.error.as_dict()
        return out
