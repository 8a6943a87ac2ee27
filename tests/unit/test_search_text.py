"""The analyser both keyword indexes share, and FTS5 quoting."""

from __future__ import annotations

from canon_ledger.projections.retrieval_tables import collection_token
from canon_ledger.projections.retrieval_text import key64, query_terms, terms
from canon_ledger.projections.retrieval_view import _quote


def test_terms_are_folded_stemmed_and_stopword_free() -> None:
    assert terms("The Whales were running to the lamps") == ["whale", "run", "lamp"]
    assert terms("Bezúkhov") == terms("BEZUKHOV") == ["bezukhov"]
    assert terms("it's, what--is (this)?!") == ["s"]
    assert terms("") == [] and terms("!!! ??? ...") == []
    assert terms("x" * 41 + " oil") == ["oil"]  # run-together noise is not a term


def test_query_terms_are_distinct_in_order() -> None:
    assert query_terms("oil whale oil Whales") == ["oil", "whale"]


def test_fts_strings_cannot_escape_their_quotes() -> None:
    assert _quote('a"b') == '"a""b"'
    assert _quote("NEAR(") == '"NEAR("'


def test_keys_are_stable_and_collection_tokens_are_one_word() -> None:
    assert key64("guild", "guild/a#b/0") == key64("guild", "guild/a#b/0") != key64("guild", "guild/a#b/1")
    assert -(2**63) <= key64("x") < 2**63
    assert collection_token("story:lamp light/é").isalnum()
