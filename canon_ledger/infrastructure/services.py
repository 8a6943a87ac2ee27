"""The services of one store, wired: the ledger, its read models, the packet service, the
auditor, search and the wiki (``Services``). ``wire`` builds them; ``infrastructure.bootstrap``
(the composition root every door opens a store through) calls it."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from canon_ledger.application.audit import Auditor
from canon_ledger.application.continuity import ContinuityCheck
from canon_ledger.application.knowledge.ports import Embedder, PageWriter
from canon_ledger.application.knowledge.quota import Quota, QuotaPolicy
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.packets.service import Issued, PacketService
from canon_ledger.application.retrieval.metered import MeteredEmbedder
from canon_ledger.application.retrieval.search import HybridSearch
from canon_ledger.domain.errors import NotFound
from canon_ledger.infrastructure.packet_retrieval import StoryRetriever
from canon_ledger.infrastructure.read_store import engines
from canon_ledger.infrastructure.scratch import scratch_canon
from canon_ledger.infrastructure.stores import StoreConfig, ledger_of, schema_lock
from canon_ledger.infrastructure.tokenizer import token_counter
from canon_ledger.projections import authoring, canon_tables
from canon_ledger.projections.canon import CanonProjection
from canon_ledger.projections.canon_view import SqlCanonReader
from canon_ledger.projections.draft_view import SqlDrafts
from canon_ledger.projections.knowledge import KnowledgeProjection
from canon_ledger.projections.knowledge_tables import VERSION as KNOWLEDGE_VERSION
from canon_ledger.projections.knowledge_tables import knowledge_tables
from canon_ledger.projections.knowledge_view import SqlKnowledgeReader
from canon_ledger.projections.model_status import (SCAN, ModelStatus, TextCounts, collections_in, model_status, pending_records,
                                      texts_waiting)
from canon_ledger.projections.read_models import ProjectionSpec, ReadModels
from canon_ledger.projections.retrieval import KeywordProjection, VectorProjection, catch_up_vectors
from canon_ledger.projections.retrieval_tables import VECTORS_VERSION, retrieval_tables, vector_tables
from canon_ledger.projections.retrieval_tables import VERSION as RETRIEVAL_VERSION
from canon_ledger.projections.retrieval_view import Builds, SqlRetrievalReader
from canon_ledger.projections.runner import PAGE_SIZE, quarantined
from canon_ledger.projections.story_views import StoryViews
from canon_ledger.projections.token_memo import TokenMemo

EMBEDDER_ENV = "CANON_EMBEDDER"


def canon_spec(tokens: Any, memo: TokenMemo | None = None) -> ProjectionSpec:
    return ProjectionSpec("canon", canon_tables.VERSION, canon_tables.canon_tables,
                          lambda tables: CanonProjection(tables, tokens, memo))


def knowledge_spec(tokens: Any) -> ProjectionSpec:
    return ProjectionSpec("knowledge", KNOWLEDGE_VERSION, knowledge_tables,
                          lambda tables: KnowledgeProjection(tables, tokens))


def retrieval_spec(tokens: Any, postgres: bool) -> ProjectionSpec:
    return ProjectionSpec("retrieval", RETRIEVAL_VERSION,
                          lambda tag, version: retrieval_tables(tag, version, postgres=postgres),
                          lambda tables: KeywordProjection(tables, tokens))


def vectors_spec(tokens: Any, embedder: Any) -> ProjectionSpec:
    """One read model per embedding model: switching models builds the new one beside the old."""
    return ProjectionSpec(f"vectors:{embedder.name}", VECTORS_VERSION,
                          lambda tag, version: vector_tables(embedder.name, tag, version),
                          lambda tables: VectorProjection(tables, tokens, embedder))


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
    retrieval: ReadModels
    vectors: ReadModels | None  # None with no embedder: search and L1 are keyword only
    embedder: Any
    embedder_note: str
    retrieval_reader: SqlRetrievalReader
    stepback_cache: Any
    # A worker keeps knowledge, the keyword index and the vectors current (``canon worker``, or
    # the one ``canon serve`` runs): requests read what is indexed and say how far behind it is,
    # and never catch those models up themselves. False (the CLI): each read catches them up.
    indexed_by_worker: bool = False
    # Texts each pending entry brings the retrieval models: counted once per process.
    text_counts: TextCounts = field(default_factory=TextCounts)
    # A CLI verb's eye on the catch-ups its reads make themselves (``indexing.CatchUpWatch``).
    watch: Any = None
    # Query vectors kept in the store (``infrastructure.query_vectors``): read before an embed.
    query_vectors: Any = None
    _views: StoryViews | None = None

    @property
    def read_models(self) -> dict[str, ReadModels]:
        models = {"canon": self.canon, "authoring": self.authoring, "knowledge": self.knowledge,
                  "retrieval": self.retrieval}
        return models if self.vectors is None else {**models, "vectors": self.vectors}

    def named_models(self, projection: str) -> list[str]:
        """The read models ``projection`` names (``all``: every one), or ``no_vector_index``
        for ``vectors`` when there is no embedder."""
        if projection == "all":
            return list(self.read_models)
        if projection == "vectors" and self.vectors is None:
            raise NotFound("no_vector_index", f"there is no vector index: {self.embedder_note}", "projection")
        if projection not in self.read_models:
            raise NotFound("unknown_read_model", f"no read model {projection!r} (known: {', '.join(self.read_models)})",
                           "projection")
        return [projection]

    @property
    def embedder_name(self) -> str:
        """The embedding model's name, or what stands in for it when there is none."""
        return self.embedder.name if self.embedder is not None else "none (keyword search only)"

    def catch_up_vectors(self, target: int, progress: Any = None) -> None:
        """The vector index up to ``target`` (embedding before its write transaction opens);
        nothing without an embedder."""
        if self.vectors is not None:
            catch_up_vectors(self.vectors, target, progress)

    def catch_up_retrieval(self, target: int | None = None, progress: Any = None) -> None:
        """Knowledge, keyword index and vectors up to ``target`` (the vectors embed before their
        write transaction opens)."""
        goal = self.ledger.position() if target is None else target
        self.knowledge.catch_up_serving(goal)
        self.retrieval.catch_up_serving(goal)
        self.catch_up_vectors(goal, progress)

    def continuity(self, provider: str = "offline", **options: Any) -> ContinuityCheck:
        """The continuity check of drafts (``application.continuity``); ``gemini`` adds one
        metered LLM review per (draft, canon position), falling back to the deterministic findings."""
        judges: dict[str, Callable[[], Any]] = {}
        if provider == "gemini":
            from canon_ledger.infrastructure.judge_cache import SqlJudgeCache
            from canon_ledger.infrastructure.providers.gemini_judge import GeminiJudge

            def judge() -> Any:
                cache = SqlJudgeCache(self.stepback_cache.write_engine, self.stepback_cache.read_engine)
                with schema_lock(self.config):  # made on first use, like the step-back cache
                    cache.setup()
                return GeminiJudge(self.quota, cache, **options)

            judges["gemini"] = judge
        return ContinuityCheck(self.packets, judges)

    def search_service(self, provider: str = "offline", **options: Any) -> Any:
        """Hybrid search; ``gemini`` lets broad queries step back (one generate call, cached)."""
        from canon_ledger.application.retrieval.search import HybridSearch, SearchService
        from canon_ledger.application.retrieval.stepback import StepBack

        with schema_lock(self.config):  # made on first use: a store that never searches has no such table
            self.stepback_cache.setup()
        generaliser = None
        if provider == "gemini":
            from canon_ledger.infrastructure.providers.gemini import GeminiProvider

            generaliser = GeminiProvider(**options)
        elif provider != "offline":
            raise ValueError(f"unknown provider {provider!r} (offline or gemini)")
        pipeline = HybridSearch(self.embedder, StepBack(self.stepback_cache, self.quota, provider, generaliser),
                                quota=self.quota, provider="gemini",  # the metered embedder's provider
                                embedder_note=self.embedder_note, query_store=self.query_vectors)

        catch_up, vectors, lag = self._index_reads()
        return SearchService(self.ledger.position, catch_up, vectors, self.retrieval_reader, pipeline, lag=lag)

    def _index_reads(self) -> tuple[Any, Any, Any]:
        """How a read over the indexes (a search, a packet's L1) keeps current: (knowledge and
        keyword catch-up, vector catch-up, lag notes). Not ``indexed_by_worker``, it catches them up and
        has no lag; ``indexed_by_worker``, it catches nothing up and says what the worker has not indexed yet."""
        if self.indexed_by_worker:
            return (lambda goal: None), (lambda goal: None), self.index_lag

        def catch_up(goal: int) -> None:
            with self._watched():
                self.knowledge.ensure_reflects(goal)
                self.retrieval.ensure_reflects(goal)

        def catch_up_vectors(goal: int) -> None:
            with self._watched() as progress:
                self.catch_up_vectors(goal, progress)

        return catch_up, catch_up_vectors, None

    def _watched(self) -> Any:
        """Around a read's own catch-up: timed by ``watch`` (yielding its embedding progress),
        or nothing (yielding None)."""
        return nullcontext() if self.watch is None else self.watch.timed()

    def status(self, *, explain_outdated: bool = False) -> dict[str, ModelStatus]:
        """Each read model's position and how far it trails the log (``projections.model_status``).
        A model an earlier schema built is refused (``read_model_outdated``), unless
        ``explain_outdated`` (``canon status``): then it is reported outdated, with its build."""
        from canon_ledger.projections.model_status import outdated_status
        from canon_ledger.projections.read_models import Outdated

        end = self.ledger.position()
        out: dict[str, ModelStatus] = {}
        for name, models in self.read_models.items():
            try:
                out[name] = model_status(name, models, self.ledger, end,
                                         texts=self.text_counts if name in ("retrieval", "vectors") else None)
            except Outdated as e:
                if not explain_outdated:
                    raise
                out[name] = outdated_status(name, models, e)
        return out

    def index_lag(self, collections: Any) -> dict[str, str]:
        """Stage notes for a search of ``collections`` while the worker has not indexed
        everything: what the keyword index and the vectors do not hold yet."""
        end = self.ledger.position()
        notes: dict[str, str] = {}
        for stage, models, what in (("keyword", self.retrieval, "not yet indexed"),
                                    ("vector", self.vectors, "not yet embedded")):
            if models is None or models.known_to_reflect(end):  # this process's worker projected it all: no read
                continue
            _, records = pending_records(models, self.ledger, end)
            waiting = texts_waiting(models, self.ledger, records, self.text_counts, collections) if records else 0
            if waiting:
                more = "+" if len(records) >= SCAN else ""
                notes[stage] = (f"{waiting}{more} text(s) {what}; keyword only for them" if stage == "vector" else
                                f"{waiting}{more} text(s) {what}: not searchable until the worker indexes them")
        return notes

    def compiler(self, provider: str = "offline", **options: Any) -> Any:
        """The wiki compiler with the named provider (``offline`` or ``gemini``)."""
        from canon_ledger.application.knowledge.compile import WikiCompiler
        from canon_ledger.infrastructure.providers.offline import ExtractiveWriter, HashingEmbedder

        writer: PageWriter
        embedder: Embedder
        if provider == "offline":
            writer, embedder = ExtractiveWriter(), HashingEmbedder()
        elif provider == "gemini":
            from canon_ledger.infrastructure.providers.gemini import GeminiEmbedder, GeminiProvider

            gemini = GeminiProvider(**options)
            writer, embedder = gemini, GeminiEmbedder(gemini)
        else:
            raise ValueError(f"unknown provider {provider!r} (offline or gemini)")
        return WikiCompiler(self.ledger, self.knowledge_reader, self.knowledge.catch_up_serving, writer, embedder,
                            self.quota, provider)

    def summarizer(self, provider: str = "offline", **options: Any) -> Any:
        """``canon summarize``'s use case (``application.summaries.Summarizer``) with the named
        writer: ``offline`` (extractive, ``domain.summary``: no network, no quota) or ``gemini``
        (``GeminiProvider(**options)``: $GEMINI_API_KEY unless given, every call reserved in the
        quota ledger)."""
        from canon_ledger.application.summaries import Summarizer
        from canon_ledger.domain.summary import ExtractiveSummariser

        if provider == "offline":
            return Summarizer(self.ledger, self.views, ExtractiveSummariser(), self.quota)
        if provider == "gemini":
            from canon_ledger.infrastructure.providers.gemini import GeminiProvider

            return Summarizer(self.ledger, self.views, GeminiProvider(**options), self.quota, "gemini")
        raise ValueError(f"unknown provider {provider!r} (offline or gemini)")

    def views(self, after: int | None = None) -> StoryViews:
        """Browsing views (stories, canon as of a chapter, entries, chapters, proposals,
        drafts), reading your writes: canon and authoring first reach ``after`` (default:
        everything applied)."""
        goal = self.packets.within_log(after)
        self.canon.ensure_reflects(goal)
        self.authoring.ensure_reflects(goal)
        if self._views is None:
            self._views = StoryViews(self.canon.read_engine, lambda conn: self.canon.tables(self.canon.active(conn)),
                                     lambda conn: self.authoring.tables(self.authoring.active(conn)))
        return self._views

    def packet(self, request: Any, *, after: int | None = None, at: int | None = None, record: bool = True) -> Any:
        """The packet for ``request``: now (reflecting ``after``, recorded unless ``record`` is
        False) or, with ``at``, as it would have been at that past position (replayed from
        the log, never recorded). A position beyond the log is refused."""
        if at is not None:
            self.packets.within_log(at, field="at")
            return self.auditor.packet_at(request, at)
        return self.packets.packet(request, after=after, record=record)

    def issue(self, request: Any, *, after: int | None = None, at: int | None = None, record: bool = True,
              may_record: Any = None) -> Any:
        """``packet``, and whether the log holds its record (``PacketService.issue``: an
        ``Issued``); ``may_record`` is the caller's recording budget. A packet replayed ``at``
        a past position is never recorded."""
        if at is not None:
            return Issued(self.packet(request, at=at), False)
        return self.packets.issue(request, after=after, record=record, may_record=may_record)

    def collections(self) -> set[str]:
        """The knowledge collections that hold documents, reflecting everything applied (when
        ``indexed_by_worker``: what the worker has projected)."""
        if not self.indexed_by_worker:
            self.knowledge.ensure_reflects(self.ledger.position())
        with self.knowledge_reader.snapshot() as snap:
            known = set(snap.collections())
        if self.indexed_by_worker:  # and those the worker has yet to index: a search there says so
            _, records = pending_records(self.retrieval, self.ledger, self.ledger.position())
            known |= collections_in(self.retrieval, self.ledger, records, self.text_counts)
        return known

    def lint(self, collection: str | None = None, sees: Callable[[str], bool] | None = None) -> Any:
        """The wiki's lint report (no LLM calls), reflecting everything applied (when
        ``indexed_by_worker``: what the worker has projected); ``sees``: only the collections it
        accepts (``lint.lint``)."""
        from canon_ledger.application.knowledge.lint import lint

        if not self.indexed_by_worker:
            self.knowledge.ensure_reflects(self.ledger.position())
        with self.knowledge_reader.snapshot() as snap:
            return lint(snap, collection, sees)

    def quarantined(self) -> list[dict[str, Any]]:
        """Every event a read model's build quarantined (``projections.runner.project_safely``)."""
        with self.canon.read_engine.begin() as conn:
            return quarantined(conn)

    def close(self) -> None:
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
         page_size: int | None = None, quota_policy: QuotaPolicy | None = None,
         indexed_by_worker: bool = False) -> Services:
    """Every service of the store at ``config``, its read models' tables created if new (under
    the store's schema lock): around ``ledger`` when one is open already, else around a ledger
    opened here. ``indexed_by_worker``: a worker keeps the knowledge, keyword and vector models
    current (``Services.indexed_by_worker``)."""
    from canon_ledger.infrastructure.query_vectors import SqlQueryVectors
    from canon_ledger.infrastructure.stepback_cache import SqlStepBackCache

    page_size = PAGE_SIZE if page_size is None else page_size  # PAGE_SIZE: each model's own size
    tokens = token_counter()
    with schema_lock(config):
        ledger = ledger_of(config) if ledger is None else ledger
        quota = Quota(ledger, quota_policy)
        read, write = engines(config)
        TokenMemo.setup(write)  # the live canon builds reuse counts; the audit's replay does not
        canon = ReadModels(canon_spec(tokens, TokenMemo(tokens.name)), ledger, write, read, page_size)
        authoring_models = ReadModels(AUTHORING, ledger, write, read, page_size)
        knowledge = ReadModels(knowledge_spec(tokens), ledger, write, read, page_size)
        retrieval = ReadModels(retrieval_spec(tokens, config.is_postgres), ledger, write, read, page_size)
        # A metered embedder (Gemini) reserves every index call in the quota ledger.
        indexer = (MeteredEmbedder(embedder, quota, "gemini")
                   if embedder is not None and getattr(embedder, "uses_quota", False) else embedder)
        vectors = None if embedder is None else ReadModels(vectors_spec(tokens, indexer), ledger, write, read, page_size)
        stepback_cache = SqlStepBackCache(write, read)
        for models in (canon, authoring_models, knowledge, retrieval, vectors):
            if models is not None:
                models.setup()

    def active_canon(conn: Connection, story: str | None = None) -> tuple[Any, int]:
        build, position = canon.serving(conn, story)
        return canon.tables(build), position

    live = SqlCanonReader(read, active_canon)
    packets = PacketService(ledger, canon, live, tokens, drafts=SqlDrafts(authoring_models))
    auditor = Auditor(ledger, lambda story, position: scratch_canon(ledger, tokens, story, position), live,
                      canon.catch_up_serving, tokens)
    knowledge_reader = SqlKnowledgeReader(read, lambda conn: knowledge.tables(knowledge.active(conn)))

    def retrieval_builds(conn: Connection) -> Builds:
        keyword, vector, text = ReadModels.active_of(conn, [retrieval, vectors, knowledge])
        assert keyword is not None and text is not None  # their models are always there
        return Builds(retrieval.tables(keyword), None if vectors is None or vector is None else vectors.tables(vector),
                      knowledge.tables(text))

    query_vectors = SqlQueryVectors(write, read)
    retrieval_reader = SqlRetrievalReader(read, retrieval_builds, None if embedder is None else embedder.name,
                                          query_vectors=query_vectors)

    services = Services(config, ledger, canon, authoring_models, packets, auditor, knowledge, knowledge_reader, quota,
                        retrieval, vectors, embedder, embedder_note, retrieval_reader, stepback_cache, indexed_by_worker,
                        query_vectors=query_vectors)
    # Packets take L1 from the offline pipeline (no step-back): the same read models give the same bytes.
    catch_up_index, catch_up_vectors_now, lag = services._index_reads()
    packets.retriever = StoryRetriever(ledger.position, catch_up_index, catch_up_vectors_now, retrieval_reader,
                                       HybridSearch(embedder, None, quota=quota, provider="gemini",
                                                    embedder_note=embedder_note, query_store=query_vectors),
                                       knowledge_reader, lag=lag)
    return services
