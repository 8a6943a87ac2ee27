"""Operations: health, readiness, metrics, background rebuilds and key management."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from canon_ledger.application.access import require
from canon_ledger.domain.api_key import MAX_KEY_NAME, SCOPES, Principal
from canon_ledger.domain.chunking import collection_story
from canon_ledger.domain.commands import StoryId
from canon_ledger.infrastructure.http import problems
from canon_ledger.infrastructure.http.auth import OPEN, needs, optional_caller
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.door import RETRY_AFTER
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.http.routes.common import json_body, json_response
from canon_ledger.infrastructure.store_faults import is_store_fault

router = APIRouter(tags=["operations"])
PROJECTIONS = ("canon", "authoring", "knowledge", "retrieval", "vectors", "all")



@router.get("/healthz", summary="Liveness: the process answers (no key needed; says nothing else)")
def healthz() -> Response:
    return json_response({"status": "ok"})


def _status(value: str) -> dict[str, Any]:
    return {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": [value]}}}


@router.get("/readyz", summary="Readiness: the store answers; with a key, how far each read model is behind the log",
            description="Without a key (a load balancer's probe): only `{\"status\": \"ready\"}` (200) or "
                        "`{\"status\": \"not ready\"}` (503: the store does not answer), one cheap read of the "
                        "log's end. With a key (worker or above; a bad key is 401): the log's position and each read "
                        "model's lag, the worker, the embedder and the quarantined count (a key limited to stories "
                        "sees only its stories' shares of a split build and quarantined events, and no worker "
                        "error text).",
            responses={200: {"description": "Ready; with a key, the detail",
                             "content": {"application/json": {"schema": _status("ready")}}},
                       503: {"description": "Not ready: the store does not answer (with a key: the problem "
                                            "`store_unavailable`)",
                             "content": {"application/json": {"schema": _status("not ready")},
                                         "application/problem+json": {
                                             "schema": {"$ref": "#/components/schemas/Problem"}}}}})
def readyz(request: Request, principal: Annotated[Principal | None, Depends(optional_caller)]) -> Response:
    context = ctx(request)
    services = context.services
    if principal is None:  # a stranger (a load balancer): ready or not, and nothing else
        try:
            services.ledger.event_log.position()
        except Exception as e:
            if not is_store_fault(e):
                raise
            problems.unexpected(dict(request.scope), e)  # logged once, and the door's gate opens, as for any route
            return not_ready()
        return json_response({"status": "ready"})
    require(principal, "worker")
    end = services.ledger.event_log.position()
    worker = context.worker
    sees = None if principal.unrestricted else principal.sees  # a scoped key: its stories' shares only
    quarantined = [q for q in services.quarantined() if sees is None or _of_its_stories(principal, q["scope"])]
    return json_response({"status": "ready", "position": end, "read_models": {
        name: status.as_dict(sees) for name, status in services.status().items()},
        # the worker's last error may name any story's event: for keys not limited to stories
        "worker": None if worker is None else {"alive": worker.alive, "faults": worker.faults,
                                               "last_error": worker.last_error if sees is None else None},
        "embedder": services.embedder_name, "quarantined": len(quarantined)})


def _of_its_stories(principal: Principal, scope: str | None) -> bool:
    """Is a quarantined event's scope (its story, or its collection) one of this key's stories?"""
    if scope is None:
        return False
    story = collection_story(scope)
    return principal.sees(scope if story is None else story)


def not_ready() -> Response:
    """``/readyz``'s answer to a caller without a key while the store does not answer."""
    return json_response({"status": "not ready"}, 503, {"Retry-After": str(RETRY_AFTER)})


@router.get("/metrics", summary="Prometheus metrics (text exposition format)",
            description="Figures of the whole store and process (requests by route, packets by role, read "
                        "models' lag, quota left): for an admin key not limited to stories.")
def metrics(request: Request, principal: Annotated[Principal, Depends(needs("admin", every_story=True))]) -> Response:
    return Response(ctx(request).metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.post("/v1/rebuild", summary="Rebuild read models in the background, then switch (see GET /v1/rebuild)")
def post_rebuild(request: Request, principal: Annotated[Principal, Depends(needs("admin", every_story=True))],
                 projection: Literal[PROJECTIONS] = "all") -> Response:  # type: ignore[valid-type]
    context = ctx(request)
    names = context.services.named_models(projection)
    job = context.rebuilds.start(names)
    if job is None:
        raise Problem(409, "rebuild_running", "a rebuild is running in this process; see GET /v1/rebuild")
    return json_response(job.as_dict(), 202)


@router.get("/v1/rebuild", summary="The last rebuild of this process and how far it got")
def get_rebuild(request: Request,
                principal: Annotated[Principal, Depends(needs("admin", every_story=True))]) -> Response:
    job = ctx(request).rebuilds.job
    return json_response(job.as_dict() if job is not None else {"running": False, "projections": [], "reports": []})


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scope: Literal[SCOPES]  # type: ignore[valid-type]
    stories: list[StoryId] = Field(default=[], max_length=500)
    name: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_NAME)


@router.get("/v1/keys", summary="Every key (never a token), revoked ones included")
def list_keys(request: Request, principal: Annotated[Principal, Depends(needs("admin", every_story=True))]) -> Response:
    return json_response({"keys": [k.as_dict() for k in ctx(request).keys.list()]})


KEY_IN = TypeAdapter(KeyIn)


@router.post("/v1/keys", summary="Create a key; its token is in this answer only",
             description="The body is a `KeyIn`, read only once the caller's key is checked.")
async def create_key(request: Request,
                     principal: Annotated[Principal, Depends(needs("admin", every_story=True))]) -> Response:
    key = await json_body(request, KEY_IN)
    token, info = await run_in_threadpool(lambda: ctx(request).keys.create(key.scope, key.stories, key.name,
                                                                           minted_open=principal is OPEN))
    return json_response({"token": token, **info.as_dict()}, 201)


@router.delete("/v1/keys/{name}", summary="Revoke a key (idempotent)")
def revoke_key(request: Request, name: Annotated[str, Path(min_length=1, max_length=MAX_KEY_NAME)],
               principal: Annotated[Principal, Depends(needs("admin", every_story=True))]) -> Response:
    changed = ctx(request).keys.revoke(name)
    return json_response({"name": name, "revoked": True, "changed": changed})
