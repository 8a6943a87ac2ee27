"""The use cases of one store, as the doors call them (``Services``): browsing views, packets
(now or replayed at a past position), search, the wiki's compiler and lint, summaries, the
continuity check, and the read models' status and catch-up. The parts they run on are
built in ``wiring`` (``Wiring``, which ``Services`` extends with these use cases);
``infrastructure.bootstrap`` (the composition root every door opens a store through) calls
``wiring.wire`` and ``Services.of``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from canon_ledger.application.continuity import ContinuityCheck
from canon_ledger.application.knowledge.ports import Embedder, PageWriter
from canon_ledger.application.packets.service import Issued
from canon_ledger.application.retrieval.packet_retrieval import StoryRetriever
from canon_ledger.application.retrieval.search import HybridSearch, SearchService
from canon_ledger.domain.errors import NotFound
from canon_ledger.infrastructure.stores import schema_lock
from canon_ledger.infrastructure.wiring import Wiring
from canon_ledger.projections.index_reads import IndexReads
from canon_ledger.projections.model_status import ModelStatus, TextCounts, collections_in, model_status, pending_records
from canon_ledger.projections.read_models import ReadModels
from canon_ledger.projections.retrieval import catch_up_vectors
from canon_ledger.projections.runner import quarantined
from canon_ledger.projections.story_views import StoryViews


@dataclass
class Services(Wiring):
    """What the doors call: the use cases over a store's parts (``Wiring``, whose names the
    doors read as they are: ``ledger``, ``packets``, ``canon``, ``auditor``...). Made by
    ``Services.of``; nothing here builds a part of the store."""

    # A worker keeps knowledge, the keyword index and the vectors current (``canon worker``, or
    # the one ``canon serve`` runs): requests read what is indexed and say how far behind it is,
    # and never catch those models up themselves. False (the CLI): each read catches them up.
    indexed_by_worker: bool = False
    # Texts each pending entry brings the retrieval models: counted once per process.
    text_counts: TextCounts = field(default_factory=TextCounts)
    # How a search and a packet's L1 keep the indexes current (made by ``of``).
    index_reads: IndexReads = field(init=False)
    _views: StoryViews | None = None

    @classmethod
    def of(cls, wiring: Wiring, *, indexed_by_worker: bool = False) -> Services:
        """The facade over ``wiring``'s parts (``indexed_by_worker``: see the field). The packet
        service's L1 reads the indexes as this facade's searches do (``index_reads``), from
        the offline pipeline (no step-back): the same read models give the same bytes."""
        services = cls(**{f.name: getattr(wiring, f.name) for f in fields(Wiring)}, indexed_by_worker=indexed_by_worker)
        services.index_reads = IndexReads(services.ledger.event_log, services.knowledge, services.retrieval,
                                          services.vectors, services.text_counts, by_worker=indexed_by_worker)
        services.packets.retriever = StoryRetriever(
            services._searches(HybridSearch(services.embedder, None, quota=services.quota, provider="gemini",
                                            embedder_note=services.embedder_note, query_store=services.query_vectors)),
            services.knowledge_reader)
        return services

    @property
    def watch(self) -> Any:
        """A CLI verb's eye on the catch-ups its reads make themselves (``indexing.CatchUpWatch``)."""
        return self.index_reads.watch

    @watch.setter
    def watch(self, watch: Any) -> None:
        self.index_reads.watch = watch

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
        goal = self.ledger.event_log.position() if target is None else target
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

        return self._searches(pipeline)

    def _searches(self, pipeline: HybridSearch) -> SearchService:
        """Searches with ``pipeline`` over the retrieval reader, keeping the indexes current
        as ``index_reads`` says."""
        reads = self.index_reads
        return SearchService(self.ledger.event_log.position, reads.catch_up, reads.catch_up_vectors,
                             self.retrieval_reader, pipeline, lag=reads.lag)

    def status(self, *, explain_outdated: bool = False) -> dict[str, ModelStatus]:
        """Each read model's position and how far it trails the log (``projections.model_status``).
        A model an earlier schema built is refused (``read_model_outdated``), unless
        ``explain_outdated`` (``canon status``): then it is reported outdated, with its build."""
        from canon_ledger.projections.model_status import outdated_status
        from canon_ledger.projections.read_models import Outdated

        end = self.ledger.event_log.position()
        out: dict[str, ModelStatus] = {}
        for name, models in self.read_models.items():
            try:
                out[name] = model_status(name, models, self.ledger.event_log, end,
                                         texts=self.text_counts if name in ("retrieval", "vectors") else None)
            except Outdated as e:
                if not explain_outdated:
                    raise
                out[name] = outdated_status(name, models, e)
        return out

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
            self._views = StoryViews(self.canon.read_engine, self.canon.active_tables, self.authoring.active_tables)
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
            self.knowledge.ensure_reflects(self.ledger.event_log.position())
        with self.knowledge_reader.snapshot() as snap:
            known = set(snap.collections())
        if self.indexed_by_worker:  # and those the worker has yet to index: a search there says so
            _, records = pending_records(self.retrieval, self.ledger.event_log, self.ledger.event_log.position())
            known |= collections_in(self.retrieval, self.ledger.event_log, records, self.text_counts)
        return known

    def lint(self, collection: str | None = None, sees: Callable[[str], bool] | None = None) -> Any:
        """The wiki's lint report (no LLM calls), reflecting everything applied (when
        ``indexed_by_worker``: what the worker has projected); ``sees``: only the collections it
        accepts (``lint.lint``)."""
        from canon_ledger.application.knowledge.lint import lint

        if not self.indexed_by_worker:
            self.knowledge.ensure_reflects(self.ledger.event_log.position())
        with self.knowledge_reader.snapshot() as snap:
            return lint(snap, collection, sees)

    def quarantined(self) -> list[dict[str, Any]]:
        """Every event a read model's build quarantined (``projections.runner.project_safely``)."""
        with self.canon.read_engine.begin() as conn:
            return quarantined(conn)
