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

    first = canon_json(db, "import", "manuscript", str(WAR_AND_PEACE), "--story", "wp", "--title", "War and Peace")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["chapters"] == 365 and report["volumes"] == 17 and len(report["new_drafts"]) == 365
    assert report["counts"] == {"applied": 1 + 365 * 3}

    again = json.loads(canon_json(db, "import", "manuscript", str(WAR_AND_PEACE), "--story", "wp").stdout)
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
