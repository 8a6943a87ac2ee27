"""The hub loader, for online users: tested offline with the packaged model standing in for
the download (no network here), and for its failures."""

from __future__ import annotations

import sys

import pytest

from canon_ledger.infrastructure.wiring import choose_embedder
from canon_ledger.infrastructure.providers.hub import hub_embedder
from canon_ledger.infrastructure.providers.minilm import SemanticUnavailable, minilm


def test_a_fetched_model_embeds_like_the_same_model_shipped() -> None:
    shipped = minilm()
    fetched: list[tuple[str, str]] = []

    def download(repo_id: str, filename: str) -> str:  # the hub's cache, holding the shipped files
        fetched.append((repo_id, filename))
        return str(shipped.model_path if filename.endswith(".onnx") else shipped.tokenizer_path)

    embedder = hub_embedder("sentence-transformers/all-MiniLM-L6-v2", download)
    assert embedder.name == "hub:sentence-transformers/all-MiniLM-L6-v2"
    assert fetched == [("sentence-transformers/all-MiniLM-L6-v2", "onnx/model.onnx"),
                       ("sentence-transformers/all-MiniLM-L6-v2", "tokenizer.json")]
    texts = ["The lamplighter counts lamps on the quay.", "Fog sat on the river."]
    assert embedder.embed(texts) == shipped.embed(texts)


def test_a_failed_download_says_what_to_do_offline() -> None:
    def offline(repo_id: str, filename: str) -> str:
        raise ConnectionError("Name or service not known")

    with pytest.raises(SemanticUnavailable) as e:
        hub_embedder("org/model:model.onnx", offline)
    assert "org/model" in str(e.value) and "CANON_EMBEDDER=minilm" in str(e.value)


def test_without_huggingface_hub_the_choice_is_refused_clearly(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import raises ImportError, as uninstalled
    with pytest.raises(SemanticUnavailable) as e:
        choose_embedder("hub:sentence-transformers/all-MiniLM-L6-v2")
    assert "pip install huggingface_hub" in str(e.value)
