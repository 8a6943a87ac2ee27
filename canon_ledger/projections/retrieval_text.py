"""Text -> index terms: one analyser for documents and queries, on both stores.

SQLite's FTS5 and the PostgreSQL postings both index these terms (FTS5 with a tokenizer
that only splits on spaces, so it cannot re-analyse them), and a query goes through the same
function: both stores see the same words. Case-folded, accents dropped (so "Bezukhov" finds
"Bezúkhov"), English stopwords removed, Snowball English (Porter 2) stemming.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_TERM = 40  # longer "words" are noise (hashes, run-together text); they would bloat the index
STOPWORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being below between "
    "both but by can could did do does doing down during each few for from further had has have having he her "
    "here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not "
    "now of off on once only or other our ours ourselves out over own same she should so some such than that the "
    "their theirs them themselves then there these they this those through to too under until up very was we "
    "were what when where which while who whom why will with would you your yours yourself yourselves".split()
)
_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    stem: str = _stemmer.stemWord(word)
    return stem


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept (their count is the term frequency)."""
    return [_stem(w) for w in _WORD.findall(_fold(text)) if w not in STOPWORDS and len(w) <= MAX_TERM]


def term_counts(text: str) -> Counter[str]:
    return Counter(terms(text))


def query_terms(text: str) -> list[str]:
    """A query's distinct terms, in first-seen order (the last queries' are remembered: a
    packet asked again searches with the same words)."""
    return list(_query_terms(text))


@lru_cache(maxsize=1024)
def _query_terms(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(terms(text)))


def key64(*parts: str) -> int:
    """A stable signed 64-bit key: FTS5 rowids and the postings' compact document keys."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
