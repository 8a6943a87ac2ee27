"""The token-counting port: packets are budgeted in tokens, counted the same everywhere."""

from __future__ import annotations

from typing import Protocol


class TokenCounter(Protocol):
    """Counts and truncates text in the tokens of one encoding.

    The chunker (``domain.chunking``) reads a long sentence a window at a time and relies on
    one property: where ``text[i]`` is a space after a non-space, or punctuation (other than an
    apostrophe) after a letter or a digit, the tokens of ``text[:i]`` are the first tokens of
    ``text``. A tokenizer that splits text into words, numbers and punctuation before merging
    bytes into tokens has it (every tiktoken encoding does: its pieces end there, and no
    piece's tokens depend on the next piece); ``tests/unit/test_chunking_linear.py`` checks it
    for the default encoding."""

    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (on token boundaries) that fits ``max_tokens``."""
        ...
