"""``canon worker --split`` as real processes on PostgreSQL: several workers share canon and
authoring story by story, knowledge and the keyword index collection by collection (each share
claimed by one worker at a time), a killed worker's shares are taken over from the committed
positions, nothing is applied twice, and the read models equal what a single fresh rebuild
makes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.runner import partitions, tracking
from tests.cli_runner import canon
from tests.e2e.test_worker import (
    assert_as_rebuilt,
    assert_current,
    assert_moves_forward,
    load,
    story_commands,
    watched,
    worker,
)

pytestmark = pytest.mark.postgres
STORIES = ("north", "south", "east")
SPLIT = ("canon", "authoring", "knowledge", "retrieval", "vectors")
COLLECTIONS = ("guild", "lore")


def load_stories(url: str, chapters: int = 40) -> None:
    """The stories (whose accepted chapters fill the collections ``story:<id>``), and documents
    in two collections of their own."""
    for story in STORIES:
        load(url, story_commands(story, chapters=chapters, entries=chapters * 10, seed=sum(map(ord, story))))
    load(url, [{"type": "ingest_document", "command_id": f"doc-{collection}-{i}", "collection_id": collection,
                "document_id": f"d{i}.md", "title": f"{collection} {i}",
                "text": f"# {collection} {i}\n\n## Lamps\n\nLamps {i} are lit at dusk.\n\n## Bells\n\nBells {i} ring.\n"}
               for collection in COLLECTIONS for i in range(chapters // 4)])


def rows(services: Any) -> dict[str, int]:
    """Every tracking row and every story's row of a split build, by name."""
    with services.canon.read_engine.begin() as conn:
        out = {name: position for name, position in conn.execute(tracking.select()).all()}
        out.update({f"{name}/{story}": position for name, story, position in conn.execute(partitions.select()).all()})
        return out


def events_per_share(services: Any, model: str) -> dict[str, int]:
    """How many of ``model``'s events each share (story, collection) has in the log."""
    models = services.read_models[model]
    topics = models.spec.projection(models.tables(models.active())).topics
    of = models.partitioning().of
    counts: dict[str, int] = {}
    for _, event in services.ledger.event_log.read(1, 10**9, None, topics):
        counts[of(event)] = counts.get(of(event), 0) + 1
    return counts


def applied(log: Path) -> dict[tuple[str, str], int]:
    """Events each (model, share) was applied, summed over the workers' JSON lines."""
    out: dict[tuple[str, str], int] = {}
    for line in log.read_text().splitlines():
        if line.startswith("{") and '"applied"' in line:
            item = json.loads(line)
            key = (item["model"], item.get("story", item.get("collection")))
            out[key] = out.get(key, 0) + item["events"]
    return out


def finish(proc: Any, log: Path, timeout: float = 600) -> None:
    try:
        assert proc.wait(timeout) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_split_workers_apply_each_share_s_events_exactly_once(pg_url: str, tmp_path: Path) -> None:
    load_stories(pg_url)
    services = bootstrap(pg_url, indexed_by_worker=True, embedder="hashing")
    try:
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        procs = [worker(pg_url, "--split", "--split-after", "0", "--page-size", "100", "--once", log=log)
                 for log in logs]
        for proc, log in zip(procs, logs, strict=True):
            finish(proc, log)
        assert_current(services)
        for model in SPLIT:
            expected = events_per_share(services, model)
            got = {story: sum(applied(log).get((model, story), 0) for log in logs) for story in expected}
            assert got == expected, (model, got, expected)  # none applied twice, none lost
            # Both workers took part (a story each at least) in canon, the bulk of the work.
            if model == "canon":
                assert all(any(m == model for m, _ in applied(log)) for log in logs), [applied(x) for x in logs]
        with services.canon.read_engine.begin() as conn:  # the low-water mark passed every story row
            assert conn.execute(partitions.select()).all() == []
        assert_as_rebuilt(services)
    finally:
        services.close()
    for log in logs:
        assert "Traceback" not in log.read_text()


@pytest.mark.slow
def test_a_killed_split_worker_s_stories_are_taken_over_and_end_as_a_rebuild(pg_url: str, tmp_path: Path) -> None:
    load_stories(pg_url, chapters=60)
    services = bootstrap(pg_url, indexed_by_worker=True, embedder="hashing")
    log = tmp_path / "workers.log"
    a = worker(pg_url, "--split", "--split-after", "0", "--page-size", "50", log=log)
    b = worker(pg_url, "--split", "--split-after", "0", "--page-size", "50", "--once", log=log)
    try:
        with watched(pg_url, rows, 0.02) as samples:
            deadline = time.monotonic() + 120
            while not any("/" in name for name in rows(services)):  # a story's share committed: mid-way
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.01)
            time.sleep(0.5)
            os.kill(a.pid, signal.SIGKILL)
            a.wait()
            finish(b, log)  # the survivor takes over a's stories and catches everything up
    finally:  # a worker must never outlive its test
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    try:
        assert_current(services)
        shares = {name for sample in samples for name in sample if "/" in name}
        assert len(shares) >= 2, shares  # the work was split by story
        assert_moves_forward(samples)
        for model in SPLIT:  # the survivor applied no more than the log holds
            expected = events_per_share(services, model)
            for story, n in expected.items():
                assert applied(log).get((model, story), 0) <= n
        assert_as_rebuilt(services)
    finally:
        services.close()
    assert "Traceback" not in log.read_text()


def test_split_worker_needs_postgres(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'canon.db'}"
    load(url, story_commands("small", chapters=2, entries=10))
    out = canon("--db", url, "--format", "json", "worker", "--split", "--once", env={"CANON_EMBEDDER": "hashing"},
                timeout=120)  # refused before it works: in-process
    assert out.returncode != 0
    assert json.loads(out.stdout or out.stderr)["error"]["code"] == "split_needs_postgres", out
