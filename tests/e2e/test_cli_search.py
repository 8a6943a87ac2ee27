"""`canon search` as a user runs it (in-process through ``cli.main``: tests/cli_runner.py), real stores,
the packaged model once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import canon
from tests.conftest import initialised

GUIDE = """# Lamplighting

How the Guild trims lamps.

## Wicks

Trim the wick once a night. A trimmed wick burns clean and shows its memory.

## Oil

Colza oil only. Whale oil smokes and clouds the glass.
"""
HASHING = {"CANON_EMBEDDER": "hashing"}


@pytest.fixture
def guild(tmp_path: Path, store_url: str) -> str:
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    result = canon("--db", store_url, "ingest", "--collection", "guild", "guide.md", env=HASHING,
                   cwd=tmp_path)  # a named file is named by its path from the working directory
    assert result.returncode == 0, result.stderr
    return store_url


def test_search_json_carries_hits_and_every_stage(guild: str) -> None:
    result = canon("--db", guild, "search", "--collection", "guild", "whale oil smoke", "--top", "2",
                   "--format", "json", env=HASHING)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)  # stdout is one JSON document, nothing else
    assert body["hits"][0]["id"] == "guild/guide.md#lamplighting/oil/0" and len(body["hits"]) == 2
    assert body["hits"][0]["sources"] and body["position"] >= 1
    assert [s["step"] for s in body["stages"]] == ["step-back", "embed", "keyword", "vector", "feedback", "fuse",
                                                   "rerank", "overview", "select"]
    assert all(s["detail"] for s in body["stages"])


def test_search_feedback_modes(guild: str) -> None:
    hybrid = canon("--db", guild, "search", "--collection", "guild", "whale oil smoke", "--top", "2",
                   "--feedback", "hybrid", "--format", "json", env=HASHING)
    assert hybrid.returncode == 0, hybrid.stderr
    stages = [s["step"] for s in json.loads(hybrid.stdout)["stages"]]
    assert stages[stages.index("vector") + 1] == "feedback"  # between the first pass and the second fusion
    wrong = canon("--db", guild, "search", "--collection", "guild", "oil", "--feedback", "sometimes", env=HASHING)
    assert wrong.returncode == 2 and "--feedback" in wrong.stderr and wrong.stdout == ""


def test_search_text_and_usage_errors(guild: str) -> None:
    text = canon("--db", guild, "search", "--collection", "guild", "what is this about overall", env=HASHING)
    assert text.returncode == 0, text.stderr
    assert "[overview] overview:guild" in text.stdout and "stages:" in text.stdout
    unknown = canon("--db", guild, "search", "--collection", "nowhere", "oil", env=HASHING)
    assert unknown.returncode == 2 and "nowhere" in unknown.stderr and unknown.stdout == ""
    empty = canon("--db", guild, "search", "--collection", "guild", "  ", env=HASHING)
    assert empty.returncode == 2 and "empty" in empty.stderr
    no_key = canon("--db", guild, "search", "--collection", "guild", "oil", "--provider", "gemini",
                   env={**HASHING, "GEMINI_API_KEY": ""})
    assert no_key.returncode == 2 and "GEMINI_API_KEY" in no_key.stderr


def test_the_default_embedder_is_the_packaged_minilm(tmp_path: Path) -> None:
    url = initialised(f"sqlite:///{tmp_path / 'semantic.db'}")
    (tmp_path / "pets.md").write_text("# Pets\n\n## Cats\n\nThe cat sleeps on the mat all afternoon.\n\n"
                                      "## Engines\n\nThe turbine blade cracked under thermal stress.\n", encoding="utf-8")
    assert canon("--db", url, "ingest", "--collection", "pets", "pets.md", cwd=tmp_path).returncode == 0
    result = canon("--db", url, "search", "--collection", "pets", "a kitten napping", "--top", "1", "--format", "json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    stages = {s["step"]: s for s in body["stages"]}
    assert stages["embed"]["detail"].startswith("all-MiniLM-L6-v2-int8, 384 dimensions")
    assert stages["keyword"]["detail"].endswith("0 hit(s)")  # no shared word: only meaning finds it
    assert body["hits"][0]["id"] == "pets/pets.md#pets/cats/0"
