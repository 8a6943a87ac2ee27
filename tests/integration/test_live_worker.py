"""A store fed by a live worker, on both stores: while the vector index is behind, a search and
a packet answer in canon time from what is indexed and say what is missing; once the worker
has caught up the same requests include the vector hits. The worker wakes on appends."""

from __future__ import annotations

import threading
import time

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.infrastructure.providers.offline import HashingEmbedder
from canon_ledger.infrastructure.worker import ProjectionWorker
from tests.helpers import apply_demo, stage_of

COLLECTION = f"story:{STORY}"


class GatedEmbedder:
    """The hashing embedder, its batches held at the gate until the test opens it: a model
    slow enough that the worker is still embedding the backlog while requests come in. A
    query (one text) passes: a request embeds its query, which a real model does in ms."""

    uses_quota = False

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name = self.inner.name
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def embed(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > 1:
            self.waiting.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return self.inner.embed(texts)


@pytest.fixture
def fed(store_url):
    embedder = GatedEmbedder()
    services = bootstrap(store_url, embedder=embedder, indexed_by_worker=True)
    worker = ProjectionWorker(services)
    yield services, worker, embedder
    embedder.gate.set()
    worker.stop()
    services.close()


def test_a_request_while_the_vectors_are_behind_answers_from_what_is_indexed_and_says_so(fed) -> None:
    services, worker, embedder = fed
    apply_demo(services)
    worker.start()
    assert embedder.waiting.wait(30), "the worker never started embedding"
    assert worker.alive
    search = services.search_service()

    started = time.perf_counter()
    behind = search.search([COLLECTION], "the lamplighters' guild", 5)
    packet = services.packet(Request(STORY, "writer", 5), record=False)
    took = time.perf_counter() - started
    assert took < 5, f"the requests waited for the embedder ({took:.1f} s)"
    vector = stage_of(behind, "vector")
    assert "not yet embedded; keyword only for them" in vector.detail, vector
    assert not any(s.step == "embed" and s.status == "error" for s in behind.stages)
    assert "not yet embedded" in stage_of(packet, "vector").detail
    assert any("Ilse" in i.text or i.kind == "character" for i in packet.items)  # canon is current all the same
    assert services.status()["vectors"].texts > 0

    embedder.gate.set()
    deadline = time.monotonic() + 60
    while not worker.caught_up():
        assert time.monotonic() < deadline, "the worker did not catch up"
        time.sleep(0.02)
    caught_up = search.search([COLLECTION], "the lamplighters' guild", 5)
    vector = stage_of(caught_up, "vector")
    assert vector.status == "done" and "not yet" not in vector.detail and " 0 hit(s)" not in vector.detail, vector
    again = services.packet(Request(STORY, "writer", 5), record=False)
    assert "not yet" not in stage_of(again, "vector").detail
    assert services.status()["vectors"].texts == 0


def test_the_worker_wakes_on_an_append_and_projects_it(fed) -> None:
    services, worker, embedder = fed
    embedder.gate.set()
    apply_demo(services)
    worker.start()
    deadline = time.monotonic() + 60
    while not worker.caught_up():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    [result] = services.ledger.apply([parse_command({
        "type": "ingest_document", "command_id": "live-doc", "collection_id": "notes", "document_id": "n.md", "title": "Notes",
        "text": "# Notes\n\nThe ferryman counts the lamps twice."})])
    assert result.status == "applied"
    started = time.monotonic()
    while "notes" not in services.collections() or services.status()["vectors"].pending:
        assert time.monotonic() - started < 10, "the worker did not pick up the append"
        time.sleep(0.005)
    hits = services.search_service().search(["notes"], "ferryman lamps", 3).hits
    assert hits and "ferryman" in hits[0].text
