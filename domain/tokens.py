"""The token-counting port: packets are budgeted in tokens, counted the same everywhere."""

from __future__ import annotations

from typing import Protocol


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (on token boundaries) that fits ``max_tokens``."""
        ...
