"""The default install searches semantically; without the model it is keyword only, and says so.

The test environment installs canon-ledger with its test tools only (no extra): what it finds
is what `pip install canon-ledger` and `./scripts/demo` give a user. "Unavailable" is made
real in a child process whose ``onnxruntime`` cannot be imported (a ``sitecustomize`` on its
path marks the module missing), as on a machine where the runtime failed to install.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cli_runner import canon
from tests.conftest import initialised

DOC = ("# Pets\n\n## Cats\n\nThe cat sleeps on the mat all afternoon.\n\n"
       "## Engines\n\nThe turbine blade cracked under thermal stress.\n")
NO_ONNXRUNTIME = "import sys\nsys.modules['onnxruntime'] = None  # as if it were not installed\n"


def _store(tmp_path: Path) -> str:
    (tmp_path / "pets.md").write_text(DOC, encoding="utf-8")
    url = initialised(f"sqlite:///{tmp_path / 'pets.db'}")
    ingested = canon("--db", url, "ingest", "--collection", "pets", "pets.md", cwd=tmp_path,
                     env={"CANON_EMBEDDER": ""})
    assert ingested.returncode == 0, ingested.stderr
    return url


def _stages(result) -> dict[str, tuple[str, str]]:
    assert result.returncode == 0, result.stderr
    return {s["step"]: (s["status"], s["detail"]) for s in json.loads(result.stdout)["stages"]}


def test_search_from_the_default_install_is_semantic(tmp_path: Path) -> None:
    url = _store(tmp_path)
    result = canon("--db", url, "--format", "json", "search", "--collection", "pets", "a kitten napping",
                   "--top", "1", env={"CANON_EMBEDDER": ""})
    stages = _stages(result)
    assert stages["embed"][0] == "done" and "all-MiniLM-L6-v2-int8" in stages["embed"][1]
    assert stages["vector"][0] == "done" and "all-MiniLM-L6-v2-int8" in stages["vector"][1]
    assert "hashing" not in result.stdout
    # No word of the query is in the cat's section: only the semantic model can place it first.
    assert json.loads(result.stdout)["hits"][0]["id"].startswith("pets/pets.md#pets/cats")


def test_without_the_model_search_is_keyword_only_and_labelled(tmp_path: Path) -> None:
    url = _store(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_ONNXRUNTIME, encoding="utf-8")
    env = {"CANON_EMBEDDER": "", "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    # A process: only a fresh interpreter reads the sitecustomize that hides onnxruntime.
    result = canon("--db", url, "--format", "json", "search", "--collection", "pets", "the cat on the mat",
                   env=env, process=True)
    stages = _stages(result)
    status, detail = stages["embed"]
    assert status == "skipped" and "keyword search only" in detail
    assert "semantic model unavailable" in detail and "onnxruntime" in detail
    assert stages["vector"][0] == "skipped"
    assert stages["keyword"][0] == "done"
    assert "hashing" not in result.stdout  # never fused in its place by default
    assert json.loads(result.stdout)["hits"][0]["id"].startswith("pets/pets.md#pets/cats")
    status_json = canon("--db", url, "--format", "json", "status", env=env, process=True)
    assert status_json.returncode == 0, status_json.stderr
    body = json.loads(status_json.stdout)
    assert body["embedder"].startswith("none") and "vectors" not in body["read_models"]
