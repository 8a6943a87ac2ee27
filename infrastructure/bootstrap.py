"""Wires the adapters: one call gives the ledger, its projections and the packet service."""

from __future__ import annotations

from dataclasses import dataclass

from application.ledger import CanonLedger
from application.packets.service import PacketService
from infrastructure.read_store import engines
from infrastructure.stores import StoreConfig, resolve_url, schema_lock, store_config
from infrastructure.tokenizer import token_counter
from projections import authoring
from projections.canon import CanonProjection
from projections.canon_tables import VERSION, canon_tables
from projections.canon_view import SqlCanonReader
from projections.runner import ProjectionRunner


@dataclass
class Services:
    config: StoreConfig
    ledger: CanonLedger
    canon: ProjectionRunner
    authoring: ProjectionRunner
    packets: PacketService

    def close(self) -> None:
        self.canon.write_engine.dispose()
        self.authoring.write_engine.dispose()
        self.ledger.close()


def bootstrap(url: str | None = None) -> Services:
    config = store_config(resolve_url(url))
    tokens = token_counter()
    with schema_lock(config):
        ledger = CanonLedger(env=config.env)
        read, write = engines(config)
        tables = canon_tables(VERSION)
        canon = ProjectionRunner(CanonProjection(tables, tokens), tables.metadata, VERSION, ledger, write, read)
        authoring_runner = ProjectionRunner(authoring.AuthoringProjection(), authoring.metadata, authoring.VERSION,
                                            ledger, write, read)
        canon.setup()
        authoring_runner.setup()
    packets = PacketService(ledger, canon.catch_up, SqlCanonReader(read, tables), tokens)
    return Services(config, ledger, canon, authoring_runner, packets)
