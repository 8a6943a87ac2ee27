"""``canon export lorebook`` as a user runs it: an imported world info file exported to a file
(whole, as it came) and to stdout, the issue's `--format sillytavern` spelling, and refusals
that name the problem and write no file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli_import import canon_json
from tests.lorebook_formats import problems
from tests.shared_data import LOREBOOKS as SAMPLES

WORLD_INFO = SAMPLES / "sillytavern-world-info-eldoria.json"


def _story(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'lore.db'}"
    assert canon_json(db, "init").returncode == 0
    start = tmp_path / "start.jsonl"
    start.write_text(json.dumps({"type": "start_story", "command_id": "s", "story_id": "el", "title": "Eldoria",
                                 "style_guardrails": [], "output_contract": ""}) + "\n", encoding="utf-8")
    assert canon_json(db, "apply", str(start)).returncode == 0
    imported = canon_json(db, "import", "lorebook", str(WORLD_INFO), "--story", "el", "--confirm")
    assert imported.returncode == 0, imported.stderr
    return db


def test_export_to_a_file_and_to_stdout(tmp_path: Path) -> None:
    db = _story(tmp_path)
    out = tmp_path / "world.json"
    written = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--as", "sillytavern", "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert json.loads(written.stdout) == {"story_id": "el", "as_of": 1, "format": "sillytavern", "entries": 4,
                                          "hidden": 0, "hidden_nodes": 0, "by_source": {"sillytavern": 4},
                                          "file": str(out)}
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(WORLD_INFO.read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    # the issue's spelling: --format names the lorebook's format, and the summary is text
    issue = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--format", "novelai")
    assert issue.returncode == 0, issue.stderr
    doc = json.loads(issue.stdout)  # without -o, stdout is the lorebook alone
    assert problems("novelai", doc) == [] and [e["displayName"] for e in doc["entries"]] == [
        "eldoria", "shadowfang", "glade", "power"]
    characters = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--as", "lorebook_v3",
                       "--kind", "character", "--kind", "location")
    assert characters.returncode == 0 and json.loads(characters.stdout)["data"]["entries"] == []  # world rules only


def test_refusals_write_no_file(tmp_path: Path) -> None:
    db = _story(tmp_path)
    out = tmp_path / "never.json"
    cases = {
        "unknown_story": (["--story", "nope", "--as-of", "1", "--as", "sillytavern"], 1),
        "usage_error": (["--story", "el", "--as-of", str(10**30), "--as", "sillytavern"], 2),
        "lorebook_format_required": (["--story", "el", "--as-of", "1"], 2),
    }
    for code, (args, status) in cases.items():
        ran = canon_json(db, "export", "lorebook", *args, "-o", str(out))
        assert ran.returncode == status and json.loads(ran.stdout)["error"]["code"] == code, (code, ran.stdout,
                                                                                               ran.stderr)
        assert not out.exists()
    both = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--as", "novelai", "--format",
                 "sillytavern", "-o", str(out))  # this --format is the lorebook's: the refusal is text
    assert both.returncode == 2 and "name two lorebook formats" in both.stderr and not out.exists()
    unknown = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--as", "kobold", "-o", str(out))
    error = json.loads(unknown.stdout)["error"]
    assert unknown.returncode == 2 and (error["code"], error["field"]) == ("usage_error", "lorebook_format")
    assert "invalid choice: 'kobold'" in error["message"] and not out.exists()
    missing_dir = canon_json(db, "export", "lorebook", "--story", "el", "--as-of", "1", "--as", "novelai",
                        "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert missing_dir.returncode == 2 and json.loads(missing_dir.stdout)["error"]["code"] == "unwritable_output"
