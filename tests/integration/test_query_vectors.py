"""Query vectors kept in the store, on both stores: a process that finds a query's vector there
embeds nothing and builds the same packet, byte for byte; a worker following the log embeds a
newly planned chapter's L1 queries before any request, so its first packet embeds nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.infrastructure.providers.offline import HashingEmbedder
from canon_ledger.infrastructure.worker import ProjectionWorker
from tests.helpers import applied, apply_demo


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    uses_quota = False

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name = self.inner.name
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def _services(store_url: str, **options: Any) -> tuple[Any, CountingEmbedder]:
    embedder = CountingEmbedder()
    return bootstrap(store_url, embedder=embedder, **options), embedder


def _plan(s: Any, chapter: int) -> None:
    applied(s, {"type": "plan_chapter", "command_id": f"plan-{chapter}", "story_id": STORY, "chapter": chapter,
                "volume": 1, "goals": ["Ilse follows the lamplighter across the flooded Quay."]},
            {"type": "add_scene_card", "command_id": f"card-{chapter}", "story_id": STORY, "chapter": chapter,
             "scene_id": f"{chapter}a", "summary": "The ninth bell; a wick trimmed twice; the ledger's missing page.",
             "characters": [], "locations": [], "threads": [], "callbacks": [], "items": []})


def test_a_stored_query_vector_is_read_not_embedded_and_gives_the_same_packet(store_url: str) -> None:
    first, counted = _services(store_url)
    try:
        apply_demo(first)
        request = Request(STORY, "writer", 5)
        packet = first.packets.packet(request, record=False)
        assert counted.texts  # this process embedded the query (and the chunks)
        query = first.packets.l1_queries(STORY, 5)[0]
        assert first.query_vectors.get(counted.name, query) == HashingEmbedder().embed([query])[0]
    finally:
        first.close()
    second, fresh = _services(store_url)
    try:
        again = second.packets.packet(request, record=False)
        assert query not in fresh.texts  # read from the store
        assert again.hash == packet.hash
    finally:
        second.close()


def test_a_worker_embeds_a_newly_planned_chapter_s_queries_before_any_request(store_url: str) -> None:
    services, counted = _services(store_url, indexed_by_worker=True)
    worker = ProjectionWorker(services)
    try:
        apply_demo(services)
        worker.start()
        deadline = time.monotonic() + 30
        while not worker.caught_up() and time.monotonic() < deadline:
            time.sleep(0.05)
        _plan(services, 6)
        queries = services.packets.l1_queries(STORY, 6)
        while not any("ninth bell" in q for q in queries) and time.monotonic() < deadline:  # the card projected
            time.sleep(0.05)
            queries = services.packets.l1_queries(STORY, 6)
        # The whole chapter's query and its one scene's are the same words: one query.
        assert len(queries) == 1 and "ninth bell" in queries[0]
        while services.query_vectors.missing(counted.name, queries) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert services.query_vectors.missing(counted.name, queries) == []
    finally:
        worker.stop()
        services.close()
    reader, fresh = _services(store_url)
    try:
        first = reader.packets.packet(Request(STORY, "writer", 6), record=False)
        scene = reader.packets.packet(Request(STORY, "writer", 6, scene="6a"), record=False)
        assert not set(queries) & set(fresh.texts)  # the first packets embedded no query
        reader.packets.retriever.search.pipeline.query_store = None  # embed them here: the same packets
        reader.packets.retriever.search.pipeline._vectors.clear()
        assert reader.packets.packet(Request(STORY, "writer", 6), record=False).hash == first.hash
        assert reader.packets.packet(Request(STORY, "writer", 6, scene="6a"), record=False).hash == scene.hash
    finally:
        reader.close()


@pytest.mark.parametrize("uses_quota", [True])
def test_a_metered_embedder_is_never_used_ahead_of_a_request(store_url: str, uses_quota: bool) -> None:
    embedder = CountingEmbedder()
    embedder.uses_quota = uses_quota
    services = bootstrap(store_url, embedder=embedder)
    try:
        assert ProjectionWorker(services).queries is None
    finally:
        services.close()
