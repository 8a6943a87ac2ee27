"""``canon import lorebook`` as a user runs it (issue 41): ``--dry-run`` shows every entry and
writes nothing, an entry out of bounds is named and left out while the rest imports (exit 1),
and a file of another shape gets an error that says what it holds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import cli_runner
from tests.lorebook_formats import risu_entry, risu_export, risu_folder, world_info_list


def canon(db: str, *args: str, fmt: str = "json") -> subprocess.CompletedProcess[str]:
    return cli_runner.canon("--db", db, "--format", fmt, *args, env={"CANON_EMBEDDER": "hashing"}, timeout=120)


WORLD = {"entries": {
    "0": {"uid": 0, "key": ["圣光", "holy light"], "comment": "圣光", "content": "圣光是{{char}}的力量。", "order": 100,
          "selective": True, "keysecondary": ["夜晚"], "selectiveLogic": 0},
    "1": {"uid": 1, "key": ["huge"], "comment": "Huge", "content": "x" * 100_001, "order": 5, "ignoreBudget": True},
    "2": {"uid": 2, "key": ["old"], "comment": "Old", "content": "Gone.", "disable": True},
    "3": {"uid": 3, "key": ["sky"], "comment": "Sky", "content": "The sky is violet.", "constant": True}}}


def _file(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_a_dry_run_shows_each_entry_and_writes_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    assert canon(db, "init").returncode == 0
    world = _file(tmp_path, "world.json", WORLD)
    dry = canon(db, "import", "lorebook", world, "--story", "new", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert out["dry_run"] is True and out["format"] == "sillytavern"
    assert out["counts"] == {"import": 2, "refused": 1, "disabled": 1}
    entries = {e["name"]: e for e in out["entries"]}
    assert entries["圣光"] | {"tokens": 0} == {
        "index": 0, "uid": "0", "name": "圣光", "status": "import", "kind": "world_rule", "key": "圣光",
        "keys": ["圣光", "holy light"], "activation": "selective", "secondary_keys": ["夜晚"], "logic": "and_any",
        "chars": 15, "tokens": 0, "order": 100, "ignore_budget": False, "refusal": None}
    assert entries["Huge"]["refusal"]["message"] == "text: String should have at most 100000 characters"
    assert entries["Huge"]["ignore_budget"] is True and entries["Sky"]["activation"] == "always-on"
    text = canon(db, "import", "lorebook", world, "--story", "new", "--dry-run", fmt="text")
    assert text.returncode == 0 and "dry run: nothing written" in text.stdout
    assert 'entry 1 "Huge" -> world_rule huge: keys [huge]; keys; ' in text.stdout
    assert "refused: invalid_field: text: String should have at most 100000 characters" in text.stdout
    assert 'entry 2 "Old": disabled, not imported' in text.stdout
    events = canon(db, "events", "--limit", "5")
    assert events.returncode == 0 and events.stdout.strip() == ""  # not even the story was started
    assert canon(db, "import", "lorebook", world, "--story", "x", "--dry-run", "--db", "sqlite:////nowhere/x.db"
                 ).returncode == 0  # the store is not opened


def test_an_entry_out_of_bounds_is_named_and_the_rest_imports(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert canon(db, "init").returncode == 0
    world = _file(tmp_path, "world.json", WORLD)
    first = canon(db, "import", "lorebook", world, "--story", "w", "--confirm")
    assert first.returncode == 1, first.stderr
    report = json.loads(first.stdout)
    assert report["counts"] == {"applied": 5} and report["failed"] is None  # start_story, 2 entries x 2
    assert [(r["index"], r["name"], r["field"]) for r in report["refused"]] == [(1, "Huge", "text")]
    assert 'refused: entry 1 "Huge": invalid_field: text: String should have at most 100000 characters' in first.stderr
    again = canon(db, "import", "lorebook", world, "--story", "w", "--confirm", fmt="text")
    assert again.returncode == 1 and "4 duplicate" in again.stdout
    assert 'refused, not imported: entry 1 "Huge": invalid_field' in again.stdout


def test_other_shapes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert canon(db, "init").returncode == 0
    risu = _file(tmp_path, "risu.json", risu_export([risu_folder("f", "Places"),
                                                     risu_entry("lamp, lamps", "Lit at dusk.", comment="Lamps")]))
    imported = canon(db, "import", "lorebook", risu, "--story", "r")
    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert {k: report[k] for k in ("story_id", "format", "entries", "disabled", "refused", "counts", "failed")} == {
        "story_id": "r", "format": "risu", "entries": 1, "disabled": [], "refused": [], "counts": {"applied": 2},
        "failed": None}
    listed = _file(tmp_path, "list.json", world_info_list([{"keys": ["moth"], "content": "Moths.", "enabled": True}]))
    assert json.loads(canon(db, "import", "lorebook", listed, "--story", "r").stdout)["format"] == "lorebook_v3"
    top = _file(tmp_path, "top.json", [{"keys": ["moth"], "content": "Moths."}])
    refused = canon(db, "import", "lorebook", top, "--story", "r")
    assert refused.returncode == 2
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "unknown_lorebook_format" and "a JSON list of 1 item (object)" in error["message"]
