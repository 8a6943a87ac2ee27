"""Knowledge: ingest documents, search, compile the wiki, lint it, read the LLM quota."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from canon_ledger.application.access import apply_for, may_read, no_documents, search_collection
from canon_ledger.application.command_reader import read_value
from canon_ledger.application.retrieval.feedback import MODES as FEEDBACK_MODES
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_CHAPTER, MAX_COLLECTION_ID, MAX_DOCUMENT_ID, MAX_DOCUMENT_TEXT, MAX_NAME
from canon_ledger.domain.document import title_of
from canon_ledger.infrastructure.http.auth import needs
from canon_ledger.infrastructure.http.context import ServerContext, ctx
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.http.routes.commands import answer
from canon_ledger.infrastructure.http.routes.common import json_body, json_response

router = APIRouter(tags=["knowledge"])
Collection = Annotated[str, Path(min_length=1, max_length=MAX_COLLECTION_ID)]


class DocumentIn(BaseModel):
    """A document to ingest; re-sending an unchanged one is ``unchanged`` (or a ``duplicate``)."""

    model_config = ConfigDict(extra="forbid")
    document_id: str = Field(min_length=1, max_length=MAX_DOCUMENT_ID)
    text: str = Field(max_length=MAX_DOCUMENT_TEXT)
    title: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    max_chunk_tokens: int = Field(default=256, ge=32, le=8192)


DOCUMENTS_IN: TypeAdapter[DocumentIn | list[DocumentIn]] = TypeAdapter(DocumentIn | list[DocumentIn])


@router.post("/v1/collections/{collection}/documents", summary="Ingest documents into a collection (chunked, indexed)",
             description="The body is a `DocumentIn` or a list of them, read only once the caller's key is checked.")
async def post_documents(request: Request, collection: Collection,
                         principal: Annotated[Principal, Depends(needs("author"))]) -> Response:
    documents = await json_body(request, DOCUMENTS_IN)
    return await run_in_threadpool(_ingest, ctx(request), collection, principal, documents)


def _ingest(context: ServerContext, collection: str, principal: Principal,
            documents: DocumentIn | list[DocumentIn]) -> Response:
    batch = documents if isinstance(documents, list) else [documents]
    if not 1 <= len(batch) <= 1000:
        raise Problem(422, "invalid_field", "send 1..1,000 documents", "body")
    items = []
    for d in batch:
        title = d.title or title_of(d.document_id, d.text)
        digest = hashlib.sha256("\x1f".join((collection, d.document_id, title, str(d.max_chunk_tokens), d.text))
                                .encode("utf-8", "surrogatepass")).hexdigest()[:32]
        items.append(read_value({"type": "ingest_document", "command_id": f"ingest-{digest}",
                                 "collection_id": collection, "document_id": d.document_id, "title": title,
                                 "text": d.text, "max_chunk_tokens": d.max_chunk_tokens}))
    ledger = context.services.ledger
    results = apply_for(ledger, items, principal, atomic=True)  # all or nothing
    return answer(results, ledger.event_log.position(), [{"document_id": d.document_id} for d in batch])


@router.get("/v1/collections/{collection}/search", summary="Hybrid keyword + semantic search, with its stages")
async def search(request: Request, collection: Collection, principal: Annotated[Principal, Depends(needs("worker"))],
                 q: Annotated[str, Query(min_length=1, max_length=10_000)],
                 top: Annotated[int, Query(ge=1, le=1000)] = 8,
                 feedback: Literal[FEEDBACK_MODES] | None = None,  # type: ignore[valid-type]
                 as_of: Annotated[int | None, Query(ge=1, le=MAX_CHAPTER, description=(
                     "A story's collection (story:<id>): only chunks of chapters up to this one (default, "
                     "below author scope: the story's latest planned chapter)"))] = None) -> Response:
    context = ctx(request)
    result = await run_in_threadpool(search_collection, context, principal, collection, q, top, feedback,
                                     as_of=as_of)
    return json_response(result.as_dict())


@router.post("/v1/compile", summary="Compile stale wiki pages, oldest drift first, within the LLM quota")
def compile_wiki(request: Request, principal: Annotated[Principal, Depends(needs("admin", every_story=True))],
                 budget: Annotated[int | None, Query(ge=0, le=100_000)] = None,
                 collection: Annotated[str | None, Query(min_length=1, max_length=MAX_COLLECTION_ID)] = None,
                 provider: Literal["offline", "gemini"] = "offline") -> Response:
    compiler = ctx(request).services.compiler(provider)
    return json_response(compiler.nightly(budget, collection).as_dict())


@router.get("/v1/lint", summary="Check the wiki (no LLM calls)",
            description="Every collection this key may read (a key limited to stories: its stories' "
                        "`story:<id>` collections and the shared ones), or the one named: 404 for a collection "
                        "that holds nothing or is another story's, alike.")
def lint_wiki(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
              collection: Annotated[str | None, Query(min_length=1, max_length=MAX_COLLECTION_ID)] = None) -> Response:
    context = ctx(request)
    if collection is not None:
        may_read(principal, collection)
    sees = None if principal.unrestricted else principal.sees_collection

    def run() -> Any:
        report = context.services.lint(collection, sees)
        if collection is not None and not report.pages and collection not in context.services.collections():
            raise no_documents(collection)
        return report

    return json_response(context.reading(run).as_dict())


@router.get("/v1/quota", summary="LLM calls spent and left today")
def quota(request: Request, principal: Annotated[Principal, Depends(needs("admin", every_story=True))],
          provider: Annotated[str, Query(min_length=1, max_length=40)] = "gemini") -> Response:
    return json_response(ctx(request).services.quota.status(provider))
