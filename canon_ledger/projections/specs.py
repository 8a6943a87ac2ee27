"""What each read model is made of (``ProjectionSpec``): its name, its schema version, how a
build's tables are named and the projection that fills them. The composition root
(``infrastructure.wiring``) gives each spec its ``ReadModels``; a spec reads no
configuration of its own beyond what it is handed (the token counter, the embedder, the
dialect)."""

from __future__ import annotations

from typing import Any

from canon_ledger.projections import authoring, canon_tables
from canon_ledger.projections.canon import CanonProjection
from canon_ledger.projections.knowledge import KnowledgeProjection
from canon_ledger.projections.knowledge_tables import VERSION as KNOWLEDGE_VERSION
from canon_ledger.projections.knowledge_tables import knowledge_tables
from canon_ledger.projections.read_models import ProjectionSpec
from canon_ledger.projections.retrieval import KeywordProjection, VectorProjection
from canon_ledger.projections.retrieval_tables import VECTORS_VERSION, retrieval_tables, vector_tables
from canon_ledger.projections.retrieval_tables import VERSION as RETRIEVAL_VERSION
from canon_ledger.projections.token_memo import TokenMemo

AUTHORING = ProjectionSpec("authoring", authoring.VERSION, authoring.authoring_tables, authoring.AuthoringProjection)


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
