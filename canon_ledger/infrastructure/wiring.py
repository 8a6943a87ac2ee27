"""The composition of one store: what ``wire`` builds and how the parts are connected
(``Wiring``): the ledger, its read models over the ledger's log, the packet service, the
auditor, the knowledge and retrieval readers, the quota, the embedder, the caches. Nothing
here decides anything a door asks for: that is the facade over these parts
(``services.Services``). ``infrastructure.bootstrap`` (the composition root every door opens
a store through) calls both."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Self

from canon_ledger.application.audit import Auditor
from canon_ledger.application.knowledge.ports import Embedder
from canon_ledger.application.knowledge.quota import Quota, QuotaPolicy
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.packets.service import PacketService
from canon_ledger.application.retrieval.metered import MeteredEmbedder
from canon_ledger.infrastructure.read_store import engines
from canon_ledger.infrastructure.scratch import scratch_canon
from canon_ledger.infrastructure.stores import StoreConfig, ledger_of, schema_lock
from canon_ledger.infrastructure.tokenizer import token_counter
from canon_ledger.projections.canon_view import SqlCanonReader
from canon_ledger.projections.draft_view import SqlDrafts
from canon_ledger.projections.knowledge_view import SqlKnowledgeReader
from canon_ledger.projections.read_models import ReadModels
from canon_ledger.projections.retrieval_view import ActiveBuilds, SqlRetrievalReader
from canon_ledger.projections.runner import PAGE_SIZE
from canon_ledger.projections.specs import AUTHORING, canon_spec, knowledge_spec, retrieval_spec, vectors_spec
from canon_ledger.projections.token_memo import TokenMemo

EMBEDDER_ENV = "CANON_EMBEDDER"


def choose_embedder(choice: str | None = None) -> tuple[Embedder | None, str]:
    """(embedder or None, note for the embed stage). ``auto`` (the default): the packaged MiniLM
    (part of every install); if it cannot be found, None: search and L1 are keyword only and
    their embed stage says why (a word-hashing embedder is never fused unless asked for).
    ``minilm`` (MiniLM or an error), ``hashing`` (tests, and users who ask for it),
    ``onnx:MODEL.onnx:TOKENIZER.json`` (any sentence model exported to ONNX, loaded from disk), or
    ``hub:REPO[:ONNX_FILE]`` (downloaded from the Hugging Face hub: online users only). Nothing
    here imports onnxruntime: the model loads on its first embed."""
    from canon_ledger.infrastructure.providers.minilm import OnnxEmbedder, SemanticUnavailable, minilm
    from canon_ledger.infrastructure.providers.offline import HashingEmbedder

    choice = (choice or os.environ.get(EMBEDDER_ENV) or "auto").strip()
    if choice == "auto":
        try:
            return minilm(), ""
        except SemanticUnavailable as e:
            return None, f"semantic model unavailable ({e})"
    if choice == "minilm":
        return minilm(), ""
    if choice == "hashing":
        return HashingEmbedder(), f"word hashing, not semantic (chosen by {EMBEDDER_ENV})"
    if choice == "gemini":  # gemini-embedding-001 ($GEMINI_API_KEY); every call goes through the quota ledger
        from canon_ledger.infrastructure.providers.gemini import GeminiEmbedder, GeminiProvider

        return GeminiEmbedder(GeminiProvider()), ""
    if choice.startswith("hub:"):  # online users only: downloads from the Hugging Face hub
        from canon_ledger.infrastructure.providers.hub import hub_embedder

        return hub_embedder(choice[len("hub:"):]), ""
    if choice.startswith("onnx:"):
        model, _, tokenizer = choice[len("onnx:"):].rpartition(":")
        if not model or not tokenizer:
            raise ValueError(f"{EMBEDDER_ENV}=onnx:MODEL.onnx:TOKENIZER.json, not {choice!r}")
        from pathlib import Path

        return OnnxEmbedder(f"onnx:{Path(model).stem}", Path(model), Path(tokenizer)), ""
    raise ValueError(f"unknown embedder {choice!r} (auto, minilm, hashing, gemini, onnx:MODEL:TOKENIZER or hub:REPO)")


@dataclass
class Wiring:
    """The parts of one store, built and connected by ``wire``. Every read model reads the
    ledger's log (``ledger.event_log``); the packet service and the auditor read the canon
    model through one reader (``SqlCanonReader``)."""

    config: StoreConfig
    ledger: CanonLedger
    canon: ReadModels
    authoring: ReadModels
    packets: PacketService
    auditor: Auditor
    knowledge: ReadModels
    knowledge_reader: SqlKnowledgeReader
    quota: Quota
    retrieval: ReadModels
    vectors: ReadModels | None  # None with no embedder: search and L1 are keyword only
    embedder: Any
    embedder_note: str
    retrieval_reader: SqlRetrievalReader
    stepback_cache: Any
    # Query vectors kept in the store (``infrastructure.query_vectors``): read before an embed.
    query_vectors: Any = None

    @property
    def read_models(self) -> dict[str, ReadModels]:
        models = {"canon": self.canon, "authoring": self.authoring, "knowledge": self.knowledge,
                  "retrieval": self.retrieval}
        return models if self.vectors is None else {**models, "vectors": self.vectors}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store's parts: the auditor's kept replays, the read store's engines, the ledger."""
        self.auditor.close()  # its kept replays
        self.canon.write_engine.dispose()
        self.canon.read_engine.dispose()
        self.ledger.close()


def chosen_embedder(embedder: str | Embedder | None) -> tuple[Embedder | None, str]:
    """(embedder, note for the embed stage): ``choose_embedder``'s for a name (or None), an
    embedder object as it is."""
    if embedder is None or isinstance(embedder, str):
        return choose_embedder(embedder)
    return embedder, ""


def wire(config: StoreConfig, embedder: Embedder | None, embedder_note: str, *, ledger: CanonLedger | None = None,
         page_size: int | None = None, quota_policy: QuotaPolicy | None = None) -> Wiring:
    """Every part of the store at ``config``, its read models' tables created if new (under
    the store's schema lock): around ``ledger`` when one is open already, else around a ledger
    opened here. The packet service's L1 retriever is left to the facade
    (``Services.of``): how it keeps the indexes current is the facade's choice."""
    from canon_ledger.infrastructure.query_vectors import SqlQueryVectors
    from canon_ledger.infrastructure.stepback_cache import SqlStepBackCache

    page_size = PAGE_SIZE if page_size is None else page_size  # PAGE_SIZE: each model's own size
    tokens = token_counter()
    with schema_lock(config):
        ledger = ledger_of(config) if ledger is None else ledger
        log = ledger.event_log  # what every read model projects from
        quota = Quota(ledger, quota_policy)
        read, write = engines(config)
        TokenMemo.setup(write)  # the live canon builds reuse counts; the audit's replay does not
        canon = ReadModels(canon_spec(tokens, TokenMemo(tokens.name)), log, write, read, page_size)
        authoring_models = ReadModels(AUTHORING, log, write, read, page_size)
        knowledge = ReadModels(knowledge_spec(tokens), log, write, read, page_size)
        retrieval = ReadModels(retrieval_spec(tokens, config.is_postgres), log, write, read, page_size)
        # A metered embedder (Gemini) reserves every index call in the quota ledger.
        indexer = (MeteredEmbedder(embedder, quota, "gemini")
                   if embedder is not None and getattr(embedder, "uses_quota", False) else embedder)
        vectors = None if embedder is None else ReadModels(vectors_spec(tokens, indexer), log, write, read, page_size)
        stepback_cache = SqlStepBackCache(write, read)
        for models in (canon, authoring_models, knowledge, retrieval, vectors):
            if models is not None:
                models.setup()

    live = SqlCanonReader(read, canon.serving_tables)
    packets = PacketService(ledger, canon, live, tokens, drafts=SqlDrafts(authoring_models))
    auditor = Auditor(ledger, lambda story, position: scratch_canon(ledger, tokens, story, position), live,
                      canon.catch_up_serving, tokens)
    knowledge_reader = SqlKnowledgeReader(read, knowledge.active_tables)
    query_vectors = SqlQueryVectors(write, read)
    retrieval_reader = SqlRetrievalReader(read, ActiveBuilds(retrieval, vectors, knowledge),
                                          None if embedder is None else embedder.name,
                                          query_vectors=query_vectors)
    return Wiring(config, ledger, canon, authoring_models, packets, auditor, knowledge, knowledge_reader, quota,
                  retrieval, vectors, embedder, embedder_note, retrieval_reader, stepback_cache, query_vectors)
