"""The files built once per install (issue 39: cold start): the tokenizer's rank table and the
embedding model's optimized graph. Each gives exactly what building it afresh gives; a damaged
file is never used (it is built again); no cache directory means each process builds its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken

from canon_ledger.infrastructure import tokenizer, user_cache
from canon_ledger.infrastructure.providers import minilm

TEXT = ("The lamplighter's ledger, 1873: forty-one lamps on the Quay, and café prices in £ — ünïcödé, "
        "emoji 🪔, tabs\tand  double  spaces.\n")


def test_the_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert user_cache.cache_dir() == tmp_path / "mine"
    for off in ("", "off", " OFF "):
        monkeypatch.setenv(user_cache.CACHE_ENV, off)
        assert user_cache.cache_dir() is None and user_cache.cached_path("x", "y") is None
    monkeypatch.delenv(user_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.cache_dir() == tmp_path / "xdg" / "canon-ledger"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert user_cache.cache_dir() == Path.home() / ".cache" / "canon-ledger"


def test_the_counter_loads_its_encoding_on_its_first_count(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    counter = tokenizer.TiktokenCounter()
    assert counter.name == "cl100k_base" and not counter.loaded
    assert counter.count("") == 0 and not counter.loaded
    expected = tiktoken.get_encoding(tokenizer.DEFAULT_ENCODING).encode_ordinary(TEXT)
    assert counter.count(TEXT) == len(expected) and counter.loaded
    with pytest.raises(ValueError):  # a name the user gives is checked at once, as it always was
        tokenizer.TiktokenCounter("no_such_encoding")


def test_the_cached_rank_table_is_the_encoding_itself(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    name = tokenizer.DEFAULT_ENCODING
    reference = tiktoken.get_encoding(name)
    path = tokenizer._ranks_path(name)
    assert path is not None and path.parent == tmp_path / "tiktoken" and not path.exists()
    tokenizer.load_encoding(name)  # the first process parses tiktoken's file and saves the table
    assert path.is_file()
    cached = tokenizer._read_ranks(path, name)
    assert cached is not None and cached is not reference
    assert cached._mergeable_ranks == reference._mergeable_ranks
    assert cached._special_tokens == reference._special_tokens and cached._pat_str == reference._pat_str
    assert cached.encode_ordinary(TEXT) == reference.encode_ordinary(TEXT)
    assert cached.decode(reference.encode_ordinary(TEXT)) == TEXT
    assert tokenizer._read_ranks(path, "another_name") is None

    damaged = bytearray(path.read_bytes())
    damaged[-10] ^= 0xFF
    path.write_bytes(bytes(damaged))
    assert tokenizer._read_ranks(path, name) is None  # its digest no longer matches: never read
    assert tokenizer.load_encoding(name).encode_ordinary(TEXT) == reference.encode_ordinary(TEXT)
    assert tokenizer._read_ranks(path, name) is not None  # written again
    path.write_bytes(b"not a rank table")
    assert tokenizer._read_ranks(path, name) is None
    assert list(path.parent.glob("*.tmp")) == []  # no half-written file left behind


def test_without_a_cache_directory_nothing_is_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    monkeypatch.chdir(tmp_path)
    assert tokenizer._ranks_path(tokenizer.DEFAULT_ENCODING) is None
    assert tokenizer.load_encoding(tokenizer.DEFAULT_ENCODING).encode_ordinary("lamp") == \
        tiktoken.get_encoding(tokenizer.DEFAULT_ENCODING).encode_ordinary("lamp")
    unwritable = tmp_path / "file"
    unwritable.write_text("a file where the cache folder would be")
    monkeypatch.setenv(user_cache.CACHE_ENV, str(unwritable))
    assert tokenizer.load_encoding(tokenizer.DEFAULT_ENCODING).encode_ordinary("lamp")  # no cache, no error


def test_the_cached_optimized_graph_gives_the_same_vectors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    texts = [TEXT, "who stole lamp 33", "", "x " * 400]

    def vectors() -> list[list[float]]:
        monkeypatch.setattr(minilm, "_LOADED", {})  # a fresh load, as in a new process
        return minilm.minilm().embed(texts)

    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    reference = vectors()  # onnxruntime optimizing the model itself, as before the cache
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    assert vectors() == reference  # optimized and saved
    (saved,) = (tmp_path / "onnx").glob("*.onnx")
    assert saved.stat().st_size > 0 and not list((tmp_path / "onnx").glob("*.tmp"))
    assert vectors() == reference  # loaded from the saved graph, bit for bit
    saved.write_bytes(b"damaged")
    assert vectors() == reference  # a damaged file is optimized again and replaced
    assert saved.stat().st_size > len(b"damaged")
