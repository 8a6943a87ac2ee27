"""A canon build split by story (PostgreSQL): story steps, whole-build steps and requests'
catch-ups mixed in any order apply every event exactly once, and a request for one story
catches up that story only.

"Applied" is observed on the real projection: each runner's ``ops`` is wrapped to note the
positions it is given in transactions that commit (a step that rolls back is not counted)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import event as sa_event

from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.api_key import Principal
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
    """Positions the canon projection of ``services`` was given, in committed transactions.
    A page's ops are made in the thread that then commits or rolls back its transaction, so
    what a thread was given is counted at its next commit on this engine, dropped at a rollback."""

    def __init__(self, services: Any) -> None:
        self.counts: Counter[int] = Counter()
        self._pending: dict[int, list[int]] = {}
        models = services.canon
        runner = models.runner(models.active())
        ops = runner.projection.ops

        def noted(events: list[tuple[int, Any]]) -> Any:
            self._pending.setdefault(threading.get_ident(), []).extend(p for p, _ in events)
            return ops(events)

        runner.projection.ops = noted
        engine = models.write_engine
        sa_event.listen(engine, "commit", lambda conn: self.counts.update(
            self._pending.pop(threading.get_ident(), [])))
        sa_event.listen(engine, "rollback", lambda conn: self._pending.pop(threading.get_ident(), None))


def canon_positions(services: Any) -> list[int]:
    models = services.canon
    topics = models.spec.projection(models.tables(models.active())).topics
    return [p for p, _ in services.ledger.event_log.read(1, 10**9, None, topics)]


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
    end = services.ledger.event_log.position()
    models = services.canon
    models.catch_up_partition("north", end // 2)
    models.catch_up_partition("south", end)
    g, ahead = models.shares()
    assert g == 0 and set(ahead) == {"north", "south"}
    models.catch_up_serving(end)  # a whole-build step: skips what the story steps applied
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
    end = services.ledger.event_log.position()
    models.catch_up_partition("south", end // 3)  # a worker's claim: the build is split now
    request = Request("north", "writer", 3)
    packet = services.packets.packet(request, record=False)
    g, ahead = models.shares()
    assert g == 0 and ahead["north"] == end and ahead["south"] == end // 3 and "east" not in ahead
    assert services.status()["canon"].as_dict()["shares"] == {
        "north": {"position": end, "behind_positions": 0}, "south": {"position": end // 3, "behind_positions": end - end // 3}}
    models.catch_up_serving(end)
    assert services.packets.packet(request, record=False).hash == packet.hash


def test_a_claim_of_appended_events_defers_to_a_story_step_that_took_them(pg_url: str) -> None:
    writer = bootstrap(pg_url, embedder="hashing")
    other = bootstrap(pg_url, embedder="hashing")  # another process: a split worker
    try:
        commands = gen_story.for_story("north", seed=3, chapters=9, entries=90)
        load(writer, commands[:-200])
        writer.canon.catch_up_serving()  # the writer's runner knows the row: its next catch-up claims blind
        applied = Applied(writer)
        worked = Applied(other)
        start = writer.ledger.event_log.position()
        load(writer, commands[-200:])
        end = writer.ledger.event_log.position()
        assert end > start
        other.canon.catch_up_partition("north", end)  # takes the writer's appends first
        writer.canon.ensure_reflects(end)  # its blind claim finds north ahead: rolled back, nothing repeated
        fresh = [p for p in canon_positions(writer) if p > start]
        assert fresh and not set(fresh) & set(applied.counts)
        assert worked.counts == Counter(fresh)
        with writer.canon.read_engine.begin() as conn:
            assert tracked(conn, f"canon:{writer.canon.active().tag}") == end
    finally:
        other.close()
        writer.close()


GUIDE = "# {title}\n\n## Lamps\n\nThe {word} lamps are lit at dusk by the guild.\n\n## Bells\n\nBells ring {word} times.\n"


def ingest(services: Any, collection: str, document: str, word: str) -> None:
    load(services, [{"type": "ingest_document", "command_id": f"ingest-{collection}-{document}-{word}",
                     "collection_id": collection, "document_id": document, "title": document,
                     "text": GUIDE.format(title=document, word=word)}])


def model_positions(services: Any, name: str) -> list[int]:
    models = services.read_models[name]
    topics = models.spec.projection(models.tables(models.active())).topics
    return [p for p, _ in services.ledger.event_log.read(1, 10**9, None, topics)]


def model_checksum(services: Any, name: str) -> str:
    models = services.read_models[name]
    with models.read_engine.begin() as conn:
        return table_checksum(conn, models.tables(models.active(conn)))


@pytest.mark.parametrize("name", ["knowledge", "retrieval", "vectors"])
def test_a_collection_model_split_by_collection_applies_each_event_once(pg_url: str, name: str) -> None:
    """Knowledge, the keyword index and the vectors split by collection: documents' collections and each
    story's chapter collection (``story:<id>``, fed by ``Chapter.TextAccepted``) are shares;
    share steps then a whole-build step apply every event once, and the tables equal a rebuild's."""
    services = bootstrap(pg_url, embedder="hashing")
    try:
        for i in range(3):
            ingest(services, "guild", f"doc{i}.md", "amber")
        services.compiler("offline").nightly(budget=3)  # wiki pages (WikiPage.Opened, PageCompiled)
        for story in ("north", "south"):
            load(services, gen_story.for_story(story, seed=len(story), chapters=6, entries=40))
        for i in range(3):
            ingest(services, "lore", f"doc{i}.md", "violet")
        ingest(services, "guild", "doc0.md", "cobalt")  # re-ingested: chunk events of an opened document
        models = services.read_models[name]
        partitioning = models.partitioning()
        assert partitioning is not None and partitioning.name == "collection"
        start = models.position()  # the compile caught knowledge up to its pages
        topics = models.spec.projection(models.tables(models.active())).topics
        shares = {partitioning.of(e) for _, e in services.ledger.event_log.read(start + 1, 10**9, None, topics)}
        assert {"guild", "lore", "story:north", "story:south"} <= shares
        counts: Counter[int] = Counter()
        runner = models.runner(models.active())
        ops = runner.projection.ops
        runner.projection.ops = lambda page: counts.update(p for p, _ in page) or ops(page)
        end = services.ledger.event_log.position()
        models.catch_up_partition("guild", end)
        models.catch_up_partition("story:north", (start + end) // 2)
        g, ahead = models.shares()
        assert g == start and ahead == {"guild": end, "story:north": (start + end) // 2}
        status = services.status()[name]  # ``canon status`` and /readyz: the low-water mark, and each share past it
        assert status.position == start and status.as_dict()["shares"] == {
            "guild": {"position": end, "behind_positions": 0},
            "story:north": {"position": (start + end) // 2, "behind_positions": end - (start + end) // 2}}
        scoped = Principal("reader", "worker", ("north",))  # a key of one story sees its collection only
        assert set(status.as_dict(scoped.sees)["shares"]) == {"story:north"}
        assert "shares" not in status.as_dict(Principal("other", "worker", ("south",)).sees)
        models.catch_up_serving(end)  # a whole-build step: skips what the collection steps applied
        assert counts == Counter(p for p in model_positions(services, name) if p > start)  # every event once
        split = model_checksum(services, name)
        models.rebuild()
        assert model_checksum(services, name) == split
    finally:
        services.close()


def test_an_embedder_outage_in_a_share_step_quarantines_nothing_and_is_retried(pg_url: str) -> None:
    """A vector share's step embeds inside its transaction: an embedder that fails there (an
    outage, a rate limit) fails the step, which rolls back and is retried later; its events are
    never quarantined, and the vectors end as a rebuild makes them."""
    services = bootstrap(pg_url, embedder="hashing")
    try:
        for i in range(3):
            ingest(services, "guild", f"doc{i}.md", "amber")
        models = services.read_models["vectors"]
        runner = models.runner(models.active())
        embedder = runner.projection.embedder
        real, calls = embedder.embed, [0]

        def down(texts: list[str]) -> Any:
            calls[0] += 1
            raise RuntimeError("503 the embedding service is unavailable")

        embedder.embed = down
        end = services.ledger.event_log.position()
        with pytest.raises(ProviderError, match="unavailable"):
            models.catch_up_partition("guild", end)
        assert calls[0] == 1  # not retried event by event: the step failed as a whole
        assert services.quarantined() == []
        g, ahead = models.shares()
        assert ahead.get("guild", g) < end  # nothing committed for the share
        embedder.embed = real
        assert models.catch_up_partition("guild", end) == end
        models.catch_up_serving(end)
        split = model_checksum(services, "vectors")
        models.rebuild()
        assert model_checksum(services, "vectors") == split
    finally:
        services.close()
