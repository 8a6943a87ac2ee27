"""``canon worker`` as real processes: killed with SIGKILL at random points while it catches
up a generated story, then restarted, its read models equal a fresh rebuild's (nothing lost,
nothing applied twice); two workers at once on PostgreSQL, one killed, share the work the same
way; ``canon status`` tells the truth about the backlog."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.runner import quarantined, tracking
from tests.cli_runner import CANON, canon, child_env
from tests.generated_story import gen_story
from tests.helpers import examples

MODELS = ("canon", "authoring", "knowledge", "retrieval", "vectors")


def story_commands(story: str, chapters: int, entries: int, seed: int = 7) -> list[dict[str, Any]]:
    return gen_story.for_story(story, seed=seed, chapters=chapters, entries=entries)


def load(url: str, commands: list[dict[str, Any]], batch: int = 250) -> int:
    services = bootstrap(url, indexed_by_worker=True, embedder="hashing")
    try:
        parsed = [parse_command(c) for c in commands]
        for i in range(0, len(parsed), batch):
            results = services.ledger.apply(parsed[i:i + batch], atomic=True)
            assert all(r.status == "applied" for r in results), [r.as_dict() for r in results if not r.ok][:3]
        return services.ledger.event_log.position()
    finally:
        services.close()


def worker(url: str, *extra: str, log: Path | None = None) -> subprocess.Popen:
    """``canon worker`` as a real process (it is killed, and it follows the log until stopped)."""
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    return subprocess.Popen([*CANON, "--db", url, "--format", "json", "worker", *extra], stdout=out,
                            stderr=subprocess.STDOUT, env=child_env({"CANON_EMBEDDER": "hashing"}))


def working(proc: subprocess.Popen, services: Any, start: dict[str, int], timeout: float = 60.0) -> None:
    """Wait until the worker has committed a page (a tracking row moved past ``start``): a kill
    timed from its launch would depend on how fast this machine imports and projects (a fast
    one catches up a round's ~800 events in 0.1 s, before any fixed delay ends)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(position > start.get(name, 0) for name, position in positions(services).items()):
            return
        time.sleep(0.005)
    raise AssertionError(f"the worker committed nothing in {timeout:.0f} s (exit {proc.poll()})")


def positions(services: Any) -> dict[str, int]:
    """Every tracking row (builds and any claims), by name."""
    with services.canon.read_engine.begin() as conn:
        return dict(conn.execute(tracking.select()).all())


def checksums(services: Any) -> dict[str, str]:
    out = {}
    for name in MODELS:
        models = services.read_models[name]
        with models.read_engine.begin() as conn:
            out[name] = table_checksum(conn, models.tables(models.active(conn)))
    return out


def assert_as_rebuilt(services: Any) -> None:
    """Nothing quarantined, and every model's tables equal what a fresh rebuild makes."""
    with services.canon.read_engine.begin() as conn:
        assert quarantined(conn) == []
    before = checksums(services)
    for name in MODELS:
        services.read_models[name].rebuild()
    assert before == checksums(services)


@contextmanager
def watched(url: str, read: Callable[[Any], dict[str, int]], every: float) -> Iterator[list[dict[str, int]]]:
    """Samples of ``read(services)`` taken from a process of the test's own while the block runs."""
    samples: list[dict[str, int]] = []
    stop = threading.Event()

    def sample() -> None:
        watcher = bootstrap(url, indexed_by_worker=True, embedder="hashing")
        try:
            while not stop.is_set():
                samples.append(read(watcher))
                time.sleep(every)
        finally:
            watcher.close()

    watching = threading.Thread(target=sample)
    watching.start()
    try:
        yield samples
    finally:
        stop.set()
        watching.join()


def assert_moves_forward(samples: list[dict[str, int]]) -> None:
    """Enough samples, and no row ever moved back (a row may go: a story's row once G passes it)."""
    assert len(samples) > 10
    for earlier, later in zip(samples, samples[1:]):
        for name, position in earlier.items():
            if name in later:
                assert later[name] >= position, (name, position, later[name])


def assert_current(services: Any) -> None:
    statuses = services.status()
    assert all(s.pending == 0 for s in statuses.values()), {n: s.as_dict() for n, s in statuses.items()}


@pytest.mark.slow
def test_a_worker_killed_at_random_points_resumes_to_what_a_rebuild_gives(store_url: str, tmp_path: Path) -> None:
    rng = random.Random(20)
    # The suite's run: 12 kills over a 120-chapter serial (~11,000 events); CANON_HYPOTHESIS=deep
    # keeps the 20 kills over 240 chapters (> 20,000 events) it ran before the suite had a budget.
    rounds, chapters = examples(12, 20), examples(120, 240)
    commands = story_commands("killed", chapters=chapters, entries=chapters * 10)
    first, rest = commands[: len(commands) * 3 // 10], commands[len(commands) * 3 // 10:]
    end = load(store_url, first)
    step = len(rest) // rounds + 1
    log = tmp_path / "worker.log"
    services = bootstrap(store_url, indexed_by_worker=True, embedder="hashing")
    kills_while_behind = 0
    seen: dict[str, int] = {}
    try:
        for round_ in range(rounds):
            if rest and round_ > 0:  # the log grows under the worker too
                part, rest = rest[:step], rest[step:]
                end = load(store_url, part)
            proc = worker(store_url, "--page-size", "5", log=log)
            working(proc, services, seen or positions(services))
            time.sleep(rng.uniform(0.0, 0.3))  # a random point of the pages that follow
            before_kill = services.status()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills_while_behind += any(s.pending for s in before_kill.values())
            now = positions(services)
            for name, position in now.items():  # a tracking row never moves back
                assert position >= seen.get(name, 0), (name, position, seen[name])
            seen = now
        if rest:
            end = load(store_url, rest)
        assert end > 85 * chapters, end
        # Most kills land mid-work; a few land on a worker that has just caught up.
        assert kills_while_behind >= rounds * 3 // 10, (
            f"only {kills_while_behind} of {rounds} kills hit a worker with work left")
        finished = worker(store_url, "--once", log=log)
        try:
            assert finished.wait(600) == 0, log.read_text()[-2000:]
        finally:  # a worker that never finishes must not outlive the test
            if finished.poll() is None:
                finished.kill()
                finished.wait()
        assert_current(services)
        assert_as_rebuilt(services)
    finally:
        services.close()
    assert "Traceback" not in log.read_text()


@pytest.mark.slow
@pytest.mark.postgres
def test_two_workers_share_three_stories_and_one_survives_the_others_death(pg_url: str, tmp_path: Path) -> None:
    for story in ("north", "south", "east"):
        load(pg_url, story_commands(story, chapters=60, entries=600, seed=hash(story) % 1000))
    services = bootstrap(pg_url, indexed_by_worker=True, embedder="hashing")
    log = tmp_path / "workers.log"
    with watched(pg_url, positions, 0.05) as samples:
        a = worker(pg_url, "--page-size", "50", log=log)
        b = worker(pg_url, "--page-size", "50", log=log)
        time.sleep(3.0)
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        deadline = time.monotonic() + 600
        while any(s.pending for s in services.status().values()):
            assert b.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the surviving worker did not finish"
            time.sleep(0.2)
        b.send_signal(signal.SIGTERM)
        assert b.wait(60) == 0
    try:
        assert_moves_forward(samples)
        assert_as_rebuilt(services)
    finally:
        services.close()
    assert "Traceback" not in log.read_text()


def test_status_counts_the_backlog_and_a_worker_clears_it(store_url: str, tmp_path: Path) -> None:
    load(store_url, story_commands("small", chapters=6, entries=60))
    services = bootstrap(store_url, indexed_by_worker=True, embedder="hashing")
    try:
        before = services.status()
        assert before["canon"].pending > 0 and before["vectors"].texts > 0 and before["vectors"].seconds >= 0
        shown = canon("--db", store_url, "--format", "json", "status", env={"CANON_EMBEDDER": "hashing"})
        assert shown.returncode == 0, shown.stderr
        body = json.loads(shown.stdout)
        assert body["read_models"]["vectors"]["backlog_texts"] == before["vectors"].texts
        assert body["read_models"]["canon"]["behind"] == before["canon"].pending
        done = worker(store_url, "--once")
        assert done.wait(300) == 0
        assert_current(services)
        assert services.status()["vectors"].texts == 0
    finally:
        services.close()
