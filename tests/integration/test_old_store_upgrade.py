"""A whole store as an earlier release left it: refused until `canon rebuild`, then it serves and
its recorded packets audit OK (SQLite, the `canon` verbs through ``cli.main`` in this process:
tests/cli_runner.py; the installed console script itself is run by tests/e2e/test_first_story.py
and test_readme.py).

``tests/fixtures/canon-v5-store.sqlite3.gz`` is a SQLite store written by the release at commit
548a0a8 (canon read-model schema v5, compiler 4): the event log and its read models, tracking
rows and build registry as that release left them (see tests/fixtures/README.md).
``canon-v5-store-packets.jsonl`` holds the five packets it printed, each a ``PacketIssued`` in
the store. ``tests/fixtures/canon-v7-store.sqlite3.gz`` is the same story as the release at
commit 86baa56 left it (canon schema v7, compiler 7), the last before schema v8 (issue 42: the
canon table's ``facts``). Each test runs on both releases' stores (``release``), each on a copy
in tmp_path; a fixture is never opened in place.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.canon_tables import VERSION, canon_tables
from canon_ledger.projections.canon_view import SqlCanonReader
from tests import cli_runner
from tests.helpers import DEMO_PACKET

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORY = "lamplight"
WRITER = ("packet", "--story", STORY, "--role", "writer", "--chapter", "5")


def canon(*args: str, json_format: bool = True) -> subprocess.CompletedProcess[str]:
    # No CANON_* setting of the caller's: the store's vectors are the packaged MiniLM's, the
    # default embedder, which the old release used too (another embedder changes L1's hits).
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CANON_")}
    return cli_runner.canon(*(("--format", "json") if json_format else ()), *args, env=unset, timeout=120)


def _state(path: Path) -> dict[str, Any]:
    """What the refusal must leave as it was: the log's rows, the build registry and tracking."""
    with sqlite3.connect(path) as conn:
        return {"events": conn.execute("SELECT count(*) FROM stored_events").fetchone()[0],
                "builds": sorted(conn.execute("SELECT * FROM rm_projections").fetchall()),
                "tracking": sorted(conn.execute("SELECT * FROM rm_tracking").fetchall())}


def _recorded_packets(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT state FROM stored_events WHERE topic LIKE '%:PacketRecord.PacketIssued'").fetchall()
    return [json.loads(state)["packet_id"] for (state,) in rows]


def _canon_columns(path: Path, build: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f'PRAGMA table_info("rm_canon_{build}")')}


@pytest.fixture(params=["v5", "v7"])
def release(request: pytest.FixtureRequest) -> str:
    """The canon schema an earlier release's store was built with (its build ``{release}_1``)."""
    return str(request.param)


@pytest.fixture
def old_store(release: str, tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    with gzip.open(FIXTURES / f"canon-{release}-store.sqlite3.gz") as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def test_an_old_release_s_store_is_refused_until_rebuilt_then_serves_and_audits(release: str, old_store: Path,
                                                                                   tmp_path: Path) -> None:
    url = f"sqlite:///{old_store}"
    build, schema = f"{release}_1", int(release[1:])
    before = _state(old_store)
    # The fixture is what it claims: the old schema's canon build, the log read up to its end.
    assert ("canon", build, schema, None, None, 1) in before["builds"]
    assert (f"canon:{build}", before["events"] - 5) in before["tracking"]  # five PacketIssued after it
    assert "facts" not in _canon_columns(old_store, build)  # schema v8's column
    recorded = _recorded_packets(old_store)
    assert len(recorded) == 5
    if release == "v5":
        printed = (FIXTURES / "canon-v5-store-packets.jsonl").read_text().splitlines(keepends=True)
        assert sorted(recorded) == sorted(json.loads(p)["packet_id"] for p in printed)

    # (a) Refused with the structured error naming the remedy; nothing in the store changes.
    refused = canon("--db", url, *WRITER)
    assert refused.returncode != 0
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "read_model_outdated" and "canon rebuild" in error["message"], error
    assert _state(old_store) == before

    # (b) The remedy it names.
    rebuilt = canon("--db", url, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    reports = {r["projection"]: r for r in map(json.loads, rebuilt.stdout.splitlines())}
    new = reports["canon"]["new"]
    assert reports["canon"]["old"] == build and new.startswith(f"v{VERSION}_") and VERSION == 9, reports

    # (c) It serves the packet a fresh store of today's demo serves, byte for byte.
    served = canon("--db", url, *WRITER)
    assert served.returncode == 0, served.stderr
    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    demo = canon("--db", fresh_url, "demo")
    assert demo.returncode == 0, demo.stderr
    fresh = canon("--db", fresh_url, *WRITER)
    assert fresh.returncode == 0, fresh.stderr
    assert served.stdout == fresh.stdout
    assert json.loads(served.stdout)["packet_id"] == DEMO_PACKET
    # A packet the store had not recorded is recorded once; one it had is not recorded again.
    assert _state(old_store)["events"] == before["events"] + (DEMO_PACKET not in recorded)
    if release == "v5":
        # Not the bytes the old release printed for it (compiler 4 then): compiler 7 adds chapter
        # 4's ending to P2, so it is a new packet, recorded once; the old one audits OK below.
        assert json.loads(printed[0])["packet_id"] != DEMO_PACKET and DEMO_PACKET not in recorded

    # The rebuilt canon table holds each version's facts (schema v8), read back as the
    # continuity check reads them: Ilse's two versions, as the demo confirmed them.
    assert "facts" in _canon_columns(old_store, new)
    engine = create_engine(url)
    try:
        reader = SqlCanonReader(engine, lambda conn, story: (canon_tables(new), 0))
        with reader.snapshot(STORY) as snap:
            ilse = snap.steps(STORY, (("character", "ilse"),))
    finally:
        engine.dispose()
    assert [(s.step, s.valid_to, s.facts) for s in ilse] == [
        (1, ilse[1].valid_from, {"licence": "none", "status": "apprentice"}),
        (2, None, {"licence": "Quay ward", "status": "licensed"})], ilse
    assert ilse[1].keys == ("Ilse Marrow", "the Marrow girl", "Lamplighter Marrow")

    # (d) Every packet the old release recorded audits OK against the log.
    for packet_id in recorded:
        audit = canon("--db", url, "audit", packet_id)
        assert audit.returncode == 0, (packet_id, audit.stdout, audit.stderr)
        report = json.loads(audit.stdout)
        assert report["packet_id"] == packet_id and report["verdict"] == "ok", (packet_id, report)

    # (e) Who knows what (issue 43) on the rebuilt store: its versions are no secrets, its scene
    # cards (events stored before ``pov`` existed) have none, and it knows nothing; its aggregates,
    # loaded from the old release's events, take a card with a pov and a knowledge record.
    services = bootstrap(url, embedder="hashing")
    try:
        with services.packets.reader.snapshot(STORY) as snap:
            assert [c.pov for c in snap.scenes(STORY, 5)] == [None]
            entries = snap.entries_by_key(STORY, 5, ("ilse", "oskar", "clerk-hobb"))
            assert len(entries) == 3 and not any(e.secret for e in entries)
            assert snap.knowledge(STORY, 5) == []
        results = services.ledger.apply([parse_command({"command_id": f"upgrade-{n}", "story_id": STORY, **c})
                                         for n, c in (
            (1, {"type": "add_scene_card", "chapter": 5, "scene_id": "5z", "summary": "Oskar watches Ilse.",
                 "characters": ["oskar"], "locations": [], "threads": [], "callbacks": [], "items": [],
                 "pov": "oskar"}),
            (2, {"type": "record_knowledge", "character": "oskar", "kind": "character", "key": "ilse", "chapter": 4,
                 "how": "saw her licence"}))])
        assert [r.status for r in results] == ["applied", "applied"], [r.as_dict() for r in results]
        services.canon.catch_up_serving()
        with services.packets.reader.snapshot(STORY) as snap:
            assert [(c.scene_id, c.pov) for c in snap.scenes(STORY, 5)] == [("5a", None), ("5z", "oskar")]
            assert [(k.character, k.key, k.chapter, k.how) for k in snap.knowledge(STORY, 5)] == [
                ("oskar", "ilse", 4, "saw her licence")]
    finally:
        services.close()


def test_status_explains_an_outdated_build_and_how_to_rebuild(release: str, old_store: Path) -> None:
    """Issue 38: `canon status` is the verb that explains an outdated store, so it never refuses
    with the refusal it is asked about; it changes nothing."""
    url = f"sqlite:///{old_store}"
    before = _state(old_store)
    done = canon("--db", url, "status")
    status, out, err = done.returncode, done.stdout, done.stderr
    assert status == 0, err
    body = json.loads(out)
    canon_model = body["read_models"]["canon"]
    build, schema = f"{release}_1", int(release[1:])
    assert canon_model["outdated"] == {"build": build, "schema_version": schema, "reads_schema_version": VERSION,
                                       "remedy": "canon rebuild"}, canon_model
    assert "canon" in body["outdated"]  # (and any other model whose schema moved on since that release)
    assert {n for n, m in body["read_models"].items() if "outdated" in m} == set(body["outdated"])
    assert "outdated" not in body["read_models"]["vectors"]
    done = canon("--db", url, "status", json_format=False)
    status, out, err = done.returncode, done.stdout, done.stderr
    assert status == 0, err
    line = next(line for line in out.splitlines() if line.strip().startswith("canon "))
    assert "OUTDATED" in line and f"build {build}" in line and f"schema version {schema}" in line, out
    assert "canon rebuild" in line, out
    assert "canon rebuild" in out.splitlines()[-1]  # the remedy, once more, where a person reads last
    assert _state(old_store) == before


def test_audit_replays_the_log_on_an_outdated_build(old_store: Path) -> None:
    """Issue 38: audit replays the log, which an upgrade does not outdate; only its check of the
    live read model needs a current build, and that check says it was skipped, and why."""
    url = f"sqlite:///{old_store}"
    before = _state(old_store)
    for packet_id in _recorded_packets(old_store):
        done = canon("--db", url, "audit", packet_id)
        status, out, err = done.returncode, done.stdout, done.stderr
        assert status == 0, (packet_id, out, err)
        report = json.loads(out)
        assert report["verdict"] == "ok" and report["recorded_hash"] == report["replayed_hash"], report
        assert report["live"].startswith("skipped") and "canon rebuild" in report["live"], report["live"]
    assert _state(old_store) == before
