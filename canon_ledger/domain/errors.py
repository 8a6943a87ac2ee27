"""Structured errors. Every refusal names the rule it enforces (``code``)."""

from __future__ import annotations


class CanonError(Exception):
    """A refusal the caller can act on: ``code`` is stable, ``message`` is for people."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "field": self.field}


class RuleViolated(CanonError):
    """A domain invariant refused the command."""


class NotFound(CanonError):
    """The command refers to something that does not exist."""


def unknown_story(story_id: str) -> NotFound:
    """The one refusal of a story never started (and, at a door, of one its key may not see)."""
    return NotFound("unknown_story", f"story {story_id!r} has not been started", "story_id")


def unknown_series(series_id: str) -> NotFound:
    """The one refusal of a series never started (and, at a door, of one its key may not see)."""
    return NotFound("unknown_series", f"series {series_id!r} has not been started", "series_id")


class InvalidCommand(CanonError):
    """The command could not be read (malformed JSON, unknown type, bad field)."""


class Forbidden(CanonError):
    """The caller's key may not do this (its scope, or the stories it is limited to)."""
