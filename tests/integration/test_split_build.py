"""A canon build split by story (PostgreSQL): story steps, whole-build steps and requests'
catch-ups mixed in any order apply every event exactly once, and a request for one story
catches up that story only.

"Applied" is observed on the real projection: each runner's ``ops`` is wrapped to note the
positions it is given in transactions that commit (a step that rolls back is not counted)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import event as sa_event

from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.parsing import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.runner import partitions, tracked
from tests.generated_story import gen_story

pytestmark = pytest.mark.postgres
STORIES = ("north", "south", "east")


def load(services: Any, commands: list[dict[str, Any]], batch: int = 250) -> None:
    parsed = [parse_command(c) for c in commands]
    for i in range(0, len(parsed), batch):
        results = services.ledger.apply(parsed[i:i + batch], atomic=True)
        assert all(r.status in ("applied", "duplicate") for r in results)


class Applied:
    """Positions the canon projection of ``services`` was given, in committed transactions."""

    def __init__(self, services: Any) -> None:
        self.counts: Counter[int] = Counter()
        self._pending: dict[int, list[int]] = {}
        models = services.canon
        runner = models.runner(models.active())
        ops = runner.projection.ops

        def noted(events: list[tuple[int, Any]], conn: Any = None) -> list[Any]:
            if conn is not None:
                self._pending.setdefault(id(conn.connection.dbapi_connection), []).extend(p for p, _ in events)
            return ops(events, conn)

        runner.projection.ops = noted
        engine = models.write_engine
        sa_event.listen(engine, "commit", lambda conn: self.counts.update(
            self._pending.pop(id(conn.connection.dbapi_connection), [])))
        sa_event.listen(engine, "rollback", lambda conn: self._pending.pop(id(conn.connection.dbapi_connection), None))


def canon_positions(services: Any) -> list[int]:
    models = services.canon
    topics = models.spec.projection(models.tables(models.active())).topics
    return [p for p, _ in services.ledger.read(1, 10**9, None, topics)]


def checksum(services: Any) -> str:
    models = services.canon
    with models.read_engine.begin() as conn:
        return table_checksum(conn, models.tables(models.active(conn)))


@pytest.fixture
def stories(pg_url: str) -> Any:
    services = bootstrap(pg_url, embedder="hashing")
    for story in STORIES:
        load(services, gen_story.for_story(story, seed=sum(map(ord, story)), chapters=12, entries=120))
    yield pg_url, services
    services.close()


def test_story_steps_and_a_whole_build_step_apply_each_event_once(stories: Any) -> None:
    url, services = stories
    applied = Applied(services)
    end = services.ledger.position()
    models = services.canon
    models.catch_up_partition("north", end // 2)
    models.catch_up_partition("south", end)
    g, ahead = models.shares()
    assert g == 0 and set(ahead) == {"north", "south"}
    models.catch_up(end)  # a whole-build step: skips what the story steps applied
    assert applied.counts == Counter(canon_positions(services))  # every event once
    with models.read_engine.begin() as conn:
        assert tracked(conn, f"canon:{models.active().tag}") == end
        assert conn.execute(partitions.select()).all() == []  # G passed them: the rows went
    split = checksum(services)
    models.rebuild()
    assert checksum(services) == split


def test_a_request_catches_up_its_own_story_only(stories: Any) -> None:
    url, services = stories
    models = services.canon
    end = services.ledger.position()
    models.catch_up_partition("south", end // 3)  # a worker's claim: the build is split now
    request = Request("north", "writer", 3)
    packet = services.packets.packet(request, record=False)
    g, ahead = models.shares()
    assert g == 0 and ahead["north"] == end and ahead["south"] == end // 3 and "east" not in ahead
    models.catch_up(end)
    assert services.packets.packet(request, record=False).hash == packet.hash


def test_a_claim_of_appended_events_defers_to_a_story_step_that_took_them(pg_url: str) -> None:
    writer = bootstrap(pg_url, embedder="hashing")
    other = bootstrap(pg_url, embedder="hashing")  # another process: a split worker
    try:
        commands = gen_story.for_story("north", seed=3, chapters=9, entries=90)
        load(writer, commands[:-200])
        writer.canon.catch_up()  # the writer's runner knows the row: its next catch-up claims blind
        applied = Applied(writer)
        worked = Applied(other)
        start = writer.ledger.position()
        load(writer, commands[-200:])
        end = writer.ledger.position()
        assert end > start
        other.canon.catch_up_partition("north", end)  # takes the writer's appends first
        writer.canon.reach(end)  # its blind claim finds north ahead: rolled back, nothing repeated
        fresh = [p for p in canon_positions(writer) if p > start]
        assert fresh and not set(fresh) & set(applied.counts)
        assert worked.counts == Counter(fresh)
        with writer.canon.read_engine.begin() as conn:
            assert tracked(conn, f"canon:{writer.canon.active().tag}") == end
    finally:
        other.close()
        writer.close()
