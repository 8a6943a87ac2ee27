"""``canon import`` leaves no backlog for a packet to pay in silence (issue 40): it brings every
read model and both search indexes to the log's end before it returns (quiet with ``--format
json``), hands that to a running worker when one follows the store, or (``--no-index``) leaves it
to the next packet or search, which says what the catch-up cost, outside the packet's hashed
bytes. A failed indexing keeps the import (exit 3) and the next import indexes. On the hashing
embedder, with a three-chapter book: every verb runs in this process (``tests.cli_runner``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.following import followed
from canon_ledger.infrastructure.worker import ProjectionWorker
from canon_ledger.infrastructure import progress
from canon_ledger.infrastructure.cli import importing as cli_import
from tests import cli_runner

MODELS = ["canon", "authoring", "knowledge", "retrieval", "vectors"]
HASHING = {"CANON_EMBEDDER": "hashing"}
BOOK = ("# Chapter 1\n\nIlse woke before the bells; the lamps of the Quay still burned.\n\n"
        "# Chapter 2\n\nOskar left the workshop at noon with the brass key.\n\n"
        "# Chapter 3\n\nThe river ran clear, and one lamp of the Quay was missing.\n")


def canon(url: str, *args: str, fmt: str = "json", env: dict[str, str] | None = None,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli_runner.canon("--db", url, "--format", fmt, *args, env=env or HASHING, stdin=stdin)


@pytest.fixture
def book(tmp_path: Path) -> str:
    path = tmp_path / "book.md"
    path.write_text(BOOK, encoding="utf-8")
    return str(path)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a terminal (stderr a tty, which the in-process runner's is not): bars unless --format json."""
    for module in (cli_import, progress):
        monkeypatch.setattr(module, "quiet", lambda fmt: fmt == "json")


def imported(url: str, book: str, story: str, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = canon(url, "import", "manuscript", book, "--story", story, *extra, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == ""  # no bar and no note with --format json (nor off a terminal)
    [line] = out.stdout.splitlines()
    return dict(json.loads(line))


def status(url: str) -> tuple[int, dict[str, Any]]:
    body = json.loads(canon(url, "status").stdout)
    return body["position"], {name.split(":")[0]: m for name, m in body["read_models"].items()}


def current(url: str, names: list[str] = MODELS) -> bool:
    """Do these read models reflect the log's end? (None of their events after their position: a
    model's tracking row need not move for others' events, ``runner.QUIET_GAP``.)"""
    _, models = status(url)
    return all(models[n]["behind"] == 0 and not models[n].get("backlog_texts") for n in names)


def test_an_import_indexes_before_it_returns(store_url: str, book: str, tmp_path: Path, terminal: None) -> None:
    report = imported(store_url, book, "ix")  # no bar with --format json, even on a terminal
    assert report["counts"] == {"applied": 10}  # the report's fields as they were, and one more
    indexed = report["indexed"]
    assert (indexed["by"], indexed["models"], indexed["handed_to_worker"]) == ("import", MODELS, [])
    assert indexed["chunks"] == 3 and indexed["position"] == report["position"] and indexed["seconds"] > 0
    assert "error" not in indexed
    end, _ = status(store_url)
    assert end == report["position"] and current(store_url)

    # In text mode, on a terminal: a bar per model, and the embedding's with its total and an ETA.
    text = canon(store_url, "import", "manuscript", book, "--story", "iy", fmt="text")
    assert text.returncode == 0, text.stdout + text.stderr
    bars = text.stderr.replace("\r", "\n")
    assert "embed: 100%" in bars and "| 3/3 [" in bars and "<00:00" in bars and "vectors: 100%" in bars, bars
    assert text.stdout.splitlines()[-1].startswith("indexed for packets and search up to position ")
    assert current(store_url)

    # A lorebook too: one line says it.
    lore = tmp_path / "world.json"
    lore.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["lamp"], "comment": "Lamps",
                                                  "content": "Every lamp is lit at dusk.", "disable": False}}}))
    text = canon(store_url, "import", "lorebook", str(lore), "--story", "ix", fmt="text")
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.splitlines()[-1].startswith("indexed for packets and search up to position ")
    assert current(store_url)


def test_no_index_leaves_it_to_the_next_packet_or_search_which_say_what_it_cost(store_url: str, book: str,
                                                                                 terminal: None) -> None:
    report = imported(store_url, book, "ni", "--no-index")
    assert report["indexed"] == {"by": "none", "position": report["position"], "seconds": 0.0, "chunks": 0,
                                 "models": [], "handed_to_worker": []}
    _, models = status(store_url)
    assert models["vectors"]["backlog_texts"] == 3 and models["retrieval"]["backlog_texts"] == 3
    plan = {"type": "plan_chapter", "command_id": "ni-plan-4", "story_id": "ni", "chapter": 4, "volume": 1,
            "goals": ["Ilse looks for the missing lamp of the Quay"]}
    assert canon(store_url, "apply", "-", stdin=json.dumps(plan) + "\n").returncode == 0

    args = ("packet", "--story", "ni", "--role", "writer", "--chapter", "4")
    first = canon(store_url, *args, fmt="text")  # on a terminal: a bar for L1's catch-up, then a note
    assert first.returncode == 0, first.stderr
    bars, _, note = first.stderr.replace("\r", "\n").rstrip().rpartition("\n")
    assert "catch-up: embed: 100%" in bars and "| 3/3 [" in bars, bars
    assert note.startswith("caught up the indexes before this packet's L1 retrieval (not part of the packet) in ")
    assert note.endswith(": 3 text(s) embedded")
    assert "caught up" not in first.stdout  # the packet's bytes do not say it
    assert current(store_url, ["canon", "knowledge", "retrieval", "vectors"])  # what a writer packet reads
    again = canon(store_url, *args)
    assert again.stderr == ""  # nothing to catch up: no bar, no note
    packet = json.loads(again.stdout)
    assert packet["hash"] in first.stdout  # the same packet as the one that caught up
    assert [i["kind"] for i in packet["items"] if i["tier"] == "P4"].count("chunk") >= 1  # L1 found the book
    audit = canon(store_url, "audit", packet["packet_id"])
    assert json.loads(audit.stdout)["verdict"] == "ok", audit.stdout

    # A search's stages are not hashed: the catch-up it paid for is its first stage.
    imported(store_url, book, "ns", "--no-index")
    search = canon(store_url, "search", "--collection", "story:ns", "missing lamp")
    assert search.returncode == 0, search.stderr
    stages = json.loads(search.stdout)["stages"]
    assert stages[0]["step"] == "catch-up" and stages[0]["detail"].startswith("caught up the indexes first in ")
    assert stages[0]["detail"].endswith(": 3 text(s) embedded")


def test_an_import_leaves_the_indexing_to_a_running_worker(store_url: str, book: str) -> None:
    services = bootstrap(store_url, embedder="hashing", indexed_by_worker=True)
    worker = ProjectionWorker(services).start()
    try:
        names = [services.read_models[n].spec.name for n in MODELS]
        deadline = time.monotonic() + 10
        while followed(services.config, names) != set(names):  # marked once its loop starts
            assert time.monotonic() < deadline, "the worker never marked its models followed"
            time.sleep(0.01)
        out = canon(store_url, "import", "manuscript", book, "--story", "wk", fmt="text")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines()[-1] == (f"indexing of {', '.join(MODELS)} handed to the running worker: "
                                               "`canon status` shows its progress")
        deadline = time.monotonic() + 30
        while not current(store_url):  # and the worker indexes it
            assert time.monotonic() < deadline, status(store_url)
            time.sleep(0.05)
    finally:
        worker.stop()
        services.close()
    assert followed(services.config, names) == set()  # stopped: no mark left
    report = imported(store_url, book, "wk2")
    assert report["indexed"]["by"] == "import" and report["indexed"]["chunks"] == 3


def test_a_failed_indexing_keeps_the_import_and_importing_again_indexes(tmp_path: Path, book: str) -> None:
    from tests.conftest import sqlite_store

    url = sqlite_store(tmp_path / "canon.db")
    broken = {"CANON_EMBEDDER": f"onnx:{tmp_path / 'missing.onnx'}:{tmp_path / 'missing.json'}"}
    out = canon(url, "import", "manuscript", book, "--story", "fx", env=broken)
    assert out.returncode == 3, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["counts"] == {"applied": 10}  # the import stands
    assert report["indexed"]["error"]["code"] == "indexing_failed"
    assert "ProviderError" in report["indexed"]["error"]["message"]
    assert out.stderr.startswith("canon: indexing failed after the import, whose commands are applied: ")
    again = imported(url, book, "fx")
    assert again["counts"] == {"duplicate": 9} and again["indexed"]["chunks"] == 3 and current(url)
