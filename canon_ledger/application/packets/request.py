"""What a packet is asked for: a story, a role, a chapter (and a scene, a budget, a draft)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    story_id: str
    role: str
    chapter: int
    scene: str | None = None
    budget: int | None = None
    draft: str | None = None  # the id of the submitted draft a qa packet checks
