"""The CLI against hostile input and broken stores: structured errors, never a traceback
(issue 16). In-process through ``cli.main`` (``tests.cli_runner``); real processes where only a
process shows it: a reader that leaves (the pipe closing, the interpreter's last flush) and a
lock held by another process."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from canon_ledger.infrastructure.demo import SAMPLE
from tests.cli_runner import CANON, canon, child_env
from tests.conftest import initialised


def run(*args: str, stdin: bytes | None = None, env: dict | None = None, timeout: int = 120,
        process: bool = False) -> subprocess.CompletedProcess:
    """``canon ARGS`` with bytes in and out (in-process unless ``process``)."""
    return canon(*args, stdin=stdin, env=env, timeout=timeout, process=process, text=False)


def _no_traceback(result: subprocess.CompletedProcess) -> None:
    err = result.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 1, err


def _strict(line: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-strict JSON: {name}")

    return json.loads(line, parse_constant=refuse)


HOSTILE = b"\n".join([
    b'{"type": "start_story", "command_id": "h-1", "story_id": "h", "title": "T", "style_guardrails": [], "output_contract": "md"}',
    b'{"type": "plan_chapter", "command_id": "h-2", "story_id": "h", "chapter": ' + b"1" + b"0" * 30 + b', "volume": 1, "goals": []}',
    b'{"type": "plan_chapter", "command_id": "h-3", "story_id": "h", "chapter": 2147483648, "volume": 1, "goals": []}',
    b'{"type": "plan_chapter", "command_id": "h-4", "story_id": "h", "chapter": ' + b"9" * 5000 + b', "volume": 1, "goals": []}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"type": "plan_chapter", "command_id": "h-5", "story_id": "h", "chapter": 1, "volume": 1, "goals": ["bad \xff byte"]}',
    b'{"type": "plan_chapter", "command_id": "h-6", "story_id": "h", "chapter": 1, "volume": 1, "goals": ["\\ud800"]}',
    b'{"type": "propose_canon", "command_id": "h-7", "story_id": "h", "proposal_id": "p", "kind": "item", "key": "k", "name": "N\\u0000", "aliases": [], "text": "", "fields": {}, "valid_from": 1}',
    b'{"type": "propose_canon", "command_id": "h-8", "story_id": "h", "proposal_id": "p", "kind": "item", "key": "k", "name": "N", "aliases": [], "text": "", "fields": {"x": NaN}, "valid_from": 1}',
    "\u2028".encode(),
    b'{"type": "plan_chapter", "command_id": "h-9", "story_id": "h", "chapter": 1, "volume": 1, "goals": ["fine"]}',
]) + b"\n"


@pytest.mark.parametrize("atomic", [False, True])
def test_hostile_lines_get_one_structured_result_each_from_a_file_and_from_stdin(tmp_path: Path, atomic: bool) -> None:
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(HOSTILE)
    outputs = []
    for n, source in enumerate((str(path), "-")):
        db = initialised(f"sqlite:///{tmp_path / f'h{n}.db'}")
        args = ["--db", db, "--format", "json", "apply", source] + (["--atomic"] if atomic else [])
        result = run(*args, stdin=HOSTILE if source == "-" else None)
        _no_traceback(result)
        assert result.returncode == 1
        lines = [_strict(line) for line in result.stdout.decode().splitlines()]
        outputs.append([(r["line"], r["status"], (r.get("error") or {}).get("code")) for r in lines])
        events = run("--db", db, "--format", "json", "events")
        count = len(events.stdout.decode().splitlines())
        if atomic:
            assert count == 0  # all or nothing
        else:
            assert count > 0 and [s for _, s, _ in outputs[-1]].count("applied") == 2
    assert outputs[0] == outputs[1]  # the same bytes, the same answers, from a file or stdin
    codes = {line: code for line, _, code in outputs[0]}
    assert codes[2] == codes[3] == "invalid_field"
    assert codes[4] == "invalid_number" and codes[5] == "malformed_json" and codes[6] == "invalid_utf8"
    assert codes[7] == codes[8] == "invalid_field" and codes[9] == codes[10] == "malformed_json"


def test_a_batch_repeating_a_refused_command_never_calls_the_copy_duplicate(tmp_path: Path) -> None:
    bad = b'{"type": "plan_chapter", "command_id": "x", "story_id": "nope", "chapter": 1, "volume": 1, "goals": []}'
    result = run("--db", initialised(f"sqlite:///{tmp_path / 'a.db'}"), "--format", "json", "apply", "-", "--atomic",
                 stdin=bad + b"\n" + bad + b"\n")
    statuses = [json.loads(line)["status"] for line in result.stdout.decode().splitlines()]
    assert statuses == ["rejected", "rejected"]
    good = (b'{"type": "start_story", "command_id": "s", "story_id": "s", "title": "T", "style_guardrails": [], '
            b'"output_contract": "md"}')
    result = run("--db", initialised(f"sqlite:///{tmp_path / 'b.db'}"), "--format", "json", "apply", "-", "--atomic",
                 stdin=b"\n".join([good, good, bad]) + b"\n")
    statuses = [json.loads(line)["status"] for line in result.stdout.decode().splitlines()]
    assert statuses == ["not_applied", "not_applied", "rejected"]  # the copy was not written either


@pytest.mark.parametrize("args", [
    ["packet", "--story", "s", "--role", "writer", "--chapter", "1" + "0" * 30],
    ["packet", "--story", "s", "--role", "writer", "--chapter", "1", "--budget", "1" + "0" * 30],
    ["packet", "--story", "s", "--role", "writer", "--chapter", "1", "--after", "99999999999"],
    ["events", "--from", "1" + "0" * 30],
    ["rebuild", "--page-size", "0"],
    ["search", "--collection", "c", "q", "--top", "0"],
])
def test_numeric_options_out_of_range_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = run("--db", f"sqlite:///{tmp_path / 'n.db'}", *args)
    assert result.returncode == 2, result.stderr
    err = result.stderr.decode()
    assert "Traceback" not in err and "outside" in err  # a number, out of range: never "not a whole number"


def test_a_reader_that_leaves_early_ends_the_output_quietly(tmp_path: Path) -> None:
    """`canon events --format json | head -c 100`: the pipe closes mid-output; the command
    stops with exit 0 and no traceback (the demo's log is ~50 KB, more than one pipe buffer
    once the reader has gone)."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    assert run("--db", url, "demo").returncode == 0
    proc = subprocess.Popen([*CANON, "--db", url, "events", "--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env())
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()  # the reader leaves
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_an_error_meets_a_reader_that_has_left_with_its_own_status(tmp_path: Path) -> None:
    """The reader has gone before the error's JSON line is written: the line is dropped
    quietly, the message still goes to stderr and the exit status is the error's, not 0."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    assert run("--db", url, "init").returncode == 0
    for unbuffered in ("", "1"):  # the line kept in a buffer until exit, or written at once
        env = {k: v for k, v in child_env().items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            env["PYTHONUNBUFFERED"] = unbuffered
        proc = subprocess.Popen([*CANON, "--db", url, "--format", "json", "packet", "--story", "nowhere", "--role",
                                 "writer", "--chapter", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader leaves before anything is written
        err = proc.stderr.read().decode()
        status = proc.wait(60)
        assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
        assert status == 1 and "unknown_story" in err, (unbuffered, status, err)


def _demo_store(tmp_path: Path) -> str:
    db = initialised(f"sqlite:///{tmp_path / 'demo.db'}")
    assert run("--db", db, "apply", str(SAMPLE)).returncode == 0
    return db


def test_store_faults_exit_3_with_one_line_and_a_json_error(tmp_path: Path) -> None:
    not_db = tmp_path / "not.db"
    not_db.write_bytes(b"this is not a database at all" * 100)
    result = run("--db", f"sqlite:///{not_db}", "--format", "json", "events")
    _no_traceback(result)
    assert result.returncode == 3
    assert _strict(result.stdout.decode())["error"]["code"] == "store_unavailable"

    db = _demo_store(tmp_path)
    path = tmp_path / "demo.db"
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    result = run("--db", f"sqlite:///{truncated}", "packet", "--story", "lamplight", "--role", "writer",
                 "--chapter", "5")
    _no_traceback(result)
    assert result.returncode == 3 and result.stderr.decode().startswith("canon: store unavailable")


def test_a_read_only_store_and_a_held_lock_exit_3(tmp_path: Path) -> None:
    db = _demo_store(tmp_path)
    path = tmp_path / "demo.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the lock past the timeout
    try:
        started = time.monotonic()
        result = run("--db", db, "--format", "json", "packet", "--story", "lamplight", "--role", "writer",
                     "--chapter", "5", "--no-record", env={"CANON_LOCK_TIMEOUT": "1"}, process=True)
        _no_traceback(result)
        assert result.returncode == 3, result.stderr
        assert _strict(result.stdout.decode())["error"]["code"] == "store_unavailable"
        assert time.monotonic() - started < 60
    finally:
        holder.rollback()
        holder.close()
    # Read-only: the file and its folder (root ignores permission bits, so the URL says so too).
    ro = f"sqlite:///file:{path}?mode=ro&uri=true" if os.geteuid() == 0 else db
    os.chmod(path, stat.S_IRUSR)
    try:
        result = run("--db", ro, "rebuild", "--projection", "canon")
        _no_traceback(result)
        assert result.returncode == 3, result.stderr
    finally:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


def test_ingest_names_files_by_path_and_refuses_two_inputs_with_one_id(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.md").write_text(f"# Notes {folder}\n\nAbout {folder}.\n")
    db = initialised(f"sqlite:///{tmp_path / 'k.db'}")
    env = {"CANON_EMBEDDER": "hashing"}
    ok = canon("--db", db, "--format", "json", "ingest", "--collection", "k", "a/notes.md", "b/notes.md",
               cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stderr
    assert sorted(json.loads(line)["document_id"] for line in ok.stdout.splitlines()) == ["a/notes.md", "b/notes.md"]
    clash = canon("--db", db, "--format", "json", "ingest", "--collection", "k2", "a", "b", cwd=tmp_path, env=env)
    assert clash.returncode == 2 and "notes.md" in clash.stderr
    assert json.loads(clash.stdout)["error"]["code"] == "document_id_collision"
    events = run("--db", db, "--format", "json", "events")
    assert not any("k2" in line for line in events.stdout.decode().splitlines())  # nothing was written


def test_canon_quarantine_lists_what_a_poisoned_store_skipped(tmp_path: Path) -> None:
    from tests.fixture_log import fixture_rows, insert_rows
    from canon_ledger.infrastructure.stores import open_ledger

    db = f"sqlite:///{tmp_path / 'poison.db'}"
    ledger = open_ledger(db)
    try:
        insert_rows(ledger, fixture_rows("poison-events.jsonl"))
    finally:
        ledger.close()
    result = run("--db", db, "--format", "json", "quarantine", env={"CANON_EMBEDDER": "hashing"})
    _no_traceback(result)
    assert result.returncode == 0
    rows = [_strict(line) for line in result.stdout.decode().splitlines()]
    canon = [(r["position"], r["event_type"]) for r in rows if r["projection"].startswith("canon:")]
    assert [t for _, t in canon] == ["Chapter.Planned", "Chapter.Planned", "CanonEntry.Established"]
    text = run("--db", db, "quarantine", env={"CANON_EMBEDDER": "hashing"})
    assert text.returncode == 0 and b"Unstorable" in text.stdout


def test_json_output_is_strict_even_for_values_that_are_not() -> None:
    import io
    from contextlib import redirect_stdout

    from canon_ledger.infrastructure.cli.output import emit as _emit

    out = io.StringIO()
    with redirect_stdout(out):
        _emit({"score": float("nan"), "nested": [float("inf"), 1.5], "ok": "x"})
    assert _strict(out.getvalue()) == {"score": None, "nested": [None, 1.5], "ok": "x"}
