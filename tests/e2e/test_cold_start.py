"""A verb that needs no embedder never imports onnxruntime (nor loads a model), and a verb
that reads only the log (apply, events) imports no SQL toolkit or numpy either: its process
starts in the time of its own work. The writer packet, which embeds its L1 query, shows that
the check sees an import when there is one (and, asked again, that a query vector kept in the
store needs no model).

Issue 39: a verb that reads no command never imports the command models (pydantic); a verb
that counts no tokens never loads the tokenizer's encoding (tiktoken); a verb that reads no
vector never imports numpy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import canon

PROBE = ("import sys\nfrom canon_ledger.infrastructure.cli import main\nrc = main(sys.argv[1:])\nsys.stdout.flush()\n"
         "sys.stderr.write('\\nloaded: ' + ' '.join(m for m in ('onnxruntime', 'tokenizers', 'sqlalchemy', 'numpy', 'tiktoken', 'pydantic') if m in sys.modules))\n"
         "sys.exit(rc)\n")


def _loaded(*args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return set(result.stderr.rsplit("loaded:", 1)[1].split())


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    folder = tmp_path_factory.mktemp("cold")
    url = f"sqlite:///{folder / 'demo.db'}"
    assert canon("--db", url, "demo", "--format", "json", cwd=folder).returncode == 0
    packet = canon("--db", url, "--format", "json", "packet", "--story", "lamplight", "--role", "writer",
                   "--chapter", "5")
    assert packet.returncode == 0, packet.stderr
    commands = folder / "more.jsonl"
    commands.write_text(json.dumps({"type": "record_chapter_summary", "command_id": "cold-1", "story_id": "lamplight",
                                    "chapter": 1, "text": "Ilse counts the lamps of the Quay."}) + "\n")
    return url, json.loads(packet.stdout)["packet_id"], commands


@pytest.mark.parametrize("verb", ["apply", "events", "schema", "audit", "summarizer packet", "chat packet",
                                  "status", "canon", "stories", "quarantine", "quota"])
def test_a_verb_without_retrieval_imports_no_model_runtime(demo: tuple[str, str, Path], verb: str) -> None:
    url, packet_id, commands = demo
    args = {
        "apply": ["apply", str(commands)],
        "events": ["events", "--limit", "5"],
        "schema": ["schema"],
        "audit": ["audit", packet_id],
        "summarizer packet": ["packet", "--story", "lamplight", "--role", "summarizer", "--chapter", "2"],
        "chat packet": ["packet", "--story", "lamplight", "--role", "chat", "--chapter", "5"],
        "status": ["status"],
        "canon": ["canon", "--story", "lamplight", "--as-of", "5"],
        "stories": ["stories"],
        "quarantine": ["quarantine"],
        "quota": ["quota"],
    }[verb]
    loaded = _loaded("--db", url, "--format", "json", *args)
    assert loaded & {"onnxruntime", "tokenizers"} == set()
    if verb in ("apply", "events"):  # the log alone: no read model, so no SQL toolkit and no numpy
        assert loaded & {"sqlalchemy", "numpy"} == set()
    else:  # read models, but not the vector index
        assert "numpy" not in loaded
    if verb not in ("apply", "schema"):  # no command read: no command models
        assert "pydantic" not in loaded
    if verb in ("apply", "events", "schema", "quarantine", "quota"):  # nothing counted: no encoding loaded
        assert "tiktoken" not in loaded


def test_the_writer_packet_loads_the_model_it_embeds_with(demo: tuple[str, str, Path]) -> None:
    url, _, _ = demo
    asked = ("--db", url, "--format", "json", "packet", "--story", "lamplight", "--role", "writer",
             "--chapter", "4", "--no-record")
    loaded = _loaded(*asked)  # a query no process has embedded yet
    assert "onnxruntime" in loaded
    assert "tiktoken" in loaded and "numpy" in loaded  # it counts its items and scores vectors
    # Asked again by another process: the query's vector is read from the store, no model loads.
    again = _loaded(*asked)
    assert "onnxruntime" not in again and "numpy" in again
