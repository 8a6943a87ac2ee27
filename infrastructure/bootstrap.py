"""Wires the adapters: one call gives the ledger, its read models and the packet service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from application.audit import Auditor
from application.knowledge.quota import Quota, QuotaPolicy
from application.ledger import CanonLedger
from application.packets.service import PacketService
from infrastructure.read_store import engines
from infrastructure.scratch import scratch_canon
from infrastructure.stores import StoreConfig, resolve_url, schema_lock, store_config
from infrastructure.tokenizer import token_counter
from projections import authoring, canon_tables
from projections.canon import CanonProjection
from projections.canon_view import SqlCanonReader
from projections.knowledge import KnowledgeProjection
from projections.knowledge_tables import VERSION as KNOWLEDGE_VERSION
from projections.knowledge_tables import knowledge_tables
from projections.knowledge_view import SqlKnowledgeReader
from projections.read_models import ProjectionSpec, ReadModels
from projections.runner import PAGE_SIZE, tracked


def canon_spec(tokens: Any) -> ProjectionSpec:
    return ProjectionSpec("canon", canon_tables.VERSION, canon_tables.canon_tables,
                          lambda tables: CanonProjection(tables, tokens))


def knowledge_spec(tokens: Any) -> ProjectionSpec:
    return ProjectionSpec("knowledge", KNOWLEDGE_VERSION, knowledge_tables,
                          lambda tables: KnowledgeProjection(tables, tokens))


AUTHORING = ProjectionSpec("authoring", authoring.VERSION, authoring.authoring_tables, authoring.AuthoringProjection)


@dataclass
class Services:
    config: StoreConfig
    ledger: CanonLedger
    canon: ReadModels
    authoring: ReadModels
    packets: PacketService
    auditor: Auditor
    knowledge: ReadModels
    knowledge_reader: SqlKnowledgeReader
    quota: Quota

    @property
    def read_models(self) -> dict[str, ReadModels]:
        return {"canon": self.canon, "authoring": self.authoring, "knowledge": self.knowledge}

    def compiler(self, provider: str = "offline", **options: Any) -> Any:
        """The wiki compiler with the named provider (``offline`` or ``gemini``)."""
        from application.knowledge.compile import WikiCompiler
        from infrastructure.providers.offline import ExtractiveWriter, HashingEmbedder

        if provider == "offline":
            writer, embedder = ExtractiveWriter(), HashingEmbedder()
        elif provider == "gemini":
            from infrastructure.providers.gemini import GeminiEmbedder, GeminiProvider

            writer = GeminiProvider(**options)
            embedder = GeminiEmbedder(writer)
        else:
            raise ValueError(f"unknown provider {provider!r} (offline or gemini)")
        return WikiCompiler(self.ledger, self.knowledge_reader, self.knowledge.catch_up, writer, embedder,
                            self.quota, provider)

    def close(self) -> None:
        self.canon.write_engine.dispose()
        self.canon.read_engine.dispose()
        self.ledger.close()


def bootstrap(url: str | None = None, *, page_size: int = PAGE_SIZE, quota_policy: QuotaPolicy | None = None) -> Services:
    config = store_config(resolve_url(url))
    tokens = token_counter()
    with schema_lock(config):
        ledger = CanonLedger(env=config.env, tokens=tokens)
        read, write = engines(config)
        canon = ReadModels(canon_spec(tokens), ledger, write, read, page_size)
        authoring_models = ReadModels(AUTHORING, ledger, write, read, page_size)
        knowledge = ReadModels(knowledge_spec(tokens), ledger, write, read, page_size)
        canon.setup()
        authoring_models.setup()
        knowledge.setup()

    def active_canon(conn: Connection) -> tuple[Any, int]:
        build = canon.active(conn)
        return canon.tables(build), tracked(conn, canon.runner(build).tracking_name) or 0

    live = SqlCanonReader(read, active_canon)
    packets = PacketService(ledger, canon.catch_up, live, tokens)
    auditor = Auditor(ledger, lambda story, position: scratch_canon(ledger, tokens, story, position), live,
                      canon.catch_up, tokens)
    knowledge_reader = SqlKnowledgeReader(read, lambda conn: knowledge.tables(knowledge.active(conn)))
    quota = Quota(ledger, quota_policy)
    return Services(config, ledger, canon, authoring_models, packets, auditor, knowledge, knowledge_reader, quota)
