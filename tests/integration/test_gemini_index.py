"""Gemini embeddings as the vector index's model: every index call is reserved in the quota
ledger and settled, on both stores, against the fake Gemini server (real google-genai SDK).
When the day is spent or Gemini answers 429, the vector index trails the log and search says
so while keyword search answers alone. The ledger always equals the server's request log."""

from __future__ import annotations

import uuid

import pytest

from canon_ledger.application.knowledge.quota import QuotaPolicy
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import stage_of

GUIDE = "# Guild Guide\n\n## Lamps\n\nLamps are lit at dusk by licensed lamplighters.\n\n" \
        "## Curfew\n\nThe curfew bell rings at ten; the quay gates close.\n\n" \
        "## Ledgers\n\nEvery flood night is written into the harbour ledger.\n"


# The fake Gemini server (tests/conftest.py's ``gemini``), named by the environment as a user sets it up.
pytestmark = pytest.mark.usefixtures("gemini_env")


def _services(store_url: str, embed_per_day: int = 1000):
    return bootstrap(store_url, embedder="gemini", quota_policy=QuotaPolicy(embed_per_day=embed_per_day))


def _ingest(s, document: str) -> None:
    [result] = s.ledger.apply([parse_command({
        "type": "ingest_document", "command_id": uuid.uuid4().hex, "collection_id": "guild",
        "document_id": document, "title": "Guild Guide", "text": GUIDE})])
    assert result.ok, result.as_dict()


def test_index_calls_are_reserved_and_settled(store_url, gemini) -> None:
    s = _services(store_url)
    try:
        _ingest(s, "guide.md")
        search = s.search_service()
        result = search.search(["guild"], "when are lamps lit")
        spent = s.quota.status("gemini")["embed"]["spent"]
        assert spent == len(gemini.calls("embed")) >= 2  # the index, then the query
        assert stage_of(result, "vector").status == "done" and "gemini" in stage_of(result, "vector").detail
        assert result.hits
        again = search.search(["guild"], "when are lamps lit")  # the query's vector is remembered
        assert len(gemini.calls("embed")) == spent == s.quota.status("gemini")["embed"]["spent"]
        assert again.as_dict() | {"position": None} == result.as_dict() | {"position": None}
    finally:
        s.close()


def test_a_spent_day_leaves_the_vector_index_behind_and_search_says_so(store_url, gemini) -> None:
    s = _services(store_url, embed_per_day=1)
    try:
        _ingest(s, "guide.md")
        result = s.search_service().search(["guild"], "when are lamps lit")
        status = s.quota.status("gemini")
        assert status["embed"]["spent"] == len(gemini.calls("embed")) == 1  # nothing sent past the cap
        assert status["refused"]
        assert stage_of(result, "keyword").status == "done" and result.hits  # keyword search stands alone
        assert stage_of(result, "embed").status in ("error", "skipped") and "quota" in stage_of(result, "embed").detail
    finally:
        s.close()


def test_a_429_while_indexing_exhausts_the_day(store_url, gemini) -> None:
    s = _services(store_url)
    try:
        _ingest(s, "guide.md")
        gemini.script("429", kind="embed")
        result = s.search_service().search(["guild"], "when are lamps lit")
        status = s.quota.status("gemini")
        assert status["exhausted"] and status["embed"]["left"] == 0
        assert status["embed"]["spent"] == len(gemini.calls("embed")) == 1
        assert stage_of(result, "keyword").status == "done" and result.hits
        assert stage_of(result, "embed").status in ("error", "skipped")
    finally:
        s.close()
