"""``canon import manuscript`` as a user runs it: War and Peace into a story, again (all
duplicates), a dry run that writes nothing, and refusals that name the problem."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import cli_runner
from tests.shared_data import WAR_AND_PEACE


def canon_json(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``canon --db DB --format json ARGS`` on the hashing embedder (``tests.cli_runner``, in-process)."""
    return cli_runner.canon("--db", db, "--format", "json", *args, env={"CANON_EMBEDDER": "hashing"}, timeout=600)


def test_war_and_peace_imports_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'wp.db'}"
    assert canon_json(db, "init").returncode == 0
    dry = canon_json(db, "import", "manuscript", str(WAR_AND_PEACE), "--story", "wp", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    structure = json.loads(dry.stdout)
    assert len(structure["chapters"]) == 365 and len(structure["volumes"]) == 17
    events = canon_json(db, "events", "--limit", "5")
    assert events.returncode == 0 and events.stdout.strip() == ""  # the dry run wrote nothing

    # --no-index: the indexing an import does is tested on a small book (tests/e2e/test_import_indexes.py)
    first = canon_json(db, "import", "manuscript", str(WAR_AND_PEACE), "--story", "wp", "--title", "War and Peace",
                       "--no-index")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["chapters"] == 365 and report["volumes"] == 17 and len(report["new_drafts"]) == 365
    assert report["counts"] == {"applied": 1 + 365 * 3}

    again = json.loads(canon_json(db, "import", "manuscript", str(WAR_AND_PEACE), "--story", "wp", "--no-index").stdout)
    assert again["counts"] == {"duplicate": 365 * 3} and again["position"] == report["position"]


def test_refusals(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert canon_json(db, "init").returncode == 0
    prose = tmp_path / "prose.txt"
    prose.write_text("Nothing here looks like a chapter.\n", encoding="utf-8")
    cases = {
        "no_chapters": ["import", "manuscript", str(prose), "--story", "s"],
        "invalid_pattern": ["import", "manuscript", str(prose), "--story", "s", "--chapter-pattern", "(oops"],
        "unreadable_file": ["import", "manuscript", str(tmp_path / "missing.md"), "--story", "s"],
    }
    for code, args in cases.items():
        out = canon_json(db, *args)
        assert out.returncode != 0 and json.loads(out.stdout)["error"]["code"] == code, (code, out.stdout, out.stderr)
    binary = tmp_path / "book.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    out = canon_json(db, "import", "manuscript", str(binary), "--story", "s")
    assert json.loads(out.stdout)["error"]["code"] == "unreadable_file"


def test_volumes_agree_and_a_lorebook_starts_a_new_story(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'v.db'}"
    assert canon_json(db, "init").returncode == 0
    book = tmp_path / "two-parts.md"
    book.write_text("PART ONE\n\nChapter 1\n\nIlse woke.\n\nChapter 2\n\nOskar left.\n\n"
                    "PART TWO\n\nChapter 3\n\nThe river ran clear.\n", encoding="utf-8")
    imported = json.loads(canon_json(db, "import", "manuscript", str(book), "--story", "tp").stdout)
    assert imported["chapters"] == 3 and imported["volumes"] == 2
    # No volume has a summary: every view counts the volumes the chapters are in, as the import did.
    [listed] = [s for s in json.loads(canon_json(db, "stories").stdout)["stories"] if s["story_id"] == "tp"]
    assert listed["volumes"] == 2
    from canon_ledger.infrastructure.api import open_ledger_api

    with open_ledger_api(db, embedder="hashing") as api:  # GET /v1/stories/{s} and MCP answer from this view
        assert [(v["volume"], v["summarised"]) for v in api.views.story("tp")["volumes"]] == [(1, False), (2, False)]

    lore = tmp_path / "world.json"
    lore.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["lamp"], "comment": "Lamps",
                                                  "content": "Every lamp is lit at dusk.", "disable": False}}}),
                    encoding="utf-8")
    first = canon_json(db, "import", "lorebook", str(lore), "--story", "fresh", "--title", "A Fresh World")
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads(first.stdout)["counts"] == {"applied": 2}  # start_story, then the entry's proposal
    [fresh] = [s for s in json.loads(canon_json(db, "stories").stdout)["stories"] if s["story_id"] == "fresh"]
    assert fresh["title"] == "A Fresh World" and fresh["proposals_proposed"] == 1
    again = canon_json(db, "import", "lorebook", str(lore), "--story", "fresh")
    assert json.loads(again.stdout)["counts"] == {"duplicate": 1}  # the story exists now: nothing is started twice
