"""Packets (byte for byte what ``canon packet --format json`` prints), their records, audits."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from canon_ledger.application.access import issued_record, visible
from canon_ledger.application.packets.recipes import Request as PacketRequest
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_BUDGET, MAX_CHAPTER, MAX_ID, MAX_POSITION, MAX_STORY_ID
from canon_ledger.domain.story import ROLES
from canon_ledger.infrastructure.http.auth import needs
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.routes.common import json_response
from canon_ledger.infrastructure.http.schemas import PACKET_RESPONSES

router = APIRouter(tags=["packets"])
Role = Literal[ROLES]  # type: ignore[valid-type]
Position = Annotated[int | None, Query(ge=0, le=MAX_POSITION)]


@router.get("/v1/stories/{story}/packet", summary="A worker's context packet",
            description="The same bytes `canon packet --format json` prints for the same request. `after`: the "
                        "position a command response gave (read your writes). `at`: the packet as it would have "
                        "been at that past position (replayed, not recorded). `draft` (role qa only): the submitted "
                        "draft under review, put in P0 as unconfirmed text; canon it mentions is recalled. ETag is "
                        "the packet hash.",
            responses=PACKET_RESPONSES)
async def get_packet(request: Request, story: Annotated[str, Path(min_length=1, max_length=MAX_STORY_ID)],
                     principal: Annotated[Principal, Depends(needs("worker"))],
                     role: Role, chapter: Annotated[int, Query(ge=1, le=MAX_CHAPTER)],
                     scene: Annotated[str | None, Query(min_length=1, max_length=MAX_ID)] = None,
                     budget: Annotated[int | None, Query(ge=0, le=MAX_BUDGET)] = None,
                     draft: Annotated[str | None, Query(min_length=1, max_length=MAX_ID)] = None,
                     after: Position = None, at: Position = None, record: bool = True,
                     if_none_match: Annotated[str | None, Header(max_length=200)] = None) -> Response:
    visible(principal, story)
    context = ctx(request)
    started = time.perf_counter()
    packet, recorded = await run_in_threadpool(context.reading, context.services.issue,
                                               PacketRequest(story, role, chapter, scene, budget, draft), after=after,
                                               at=at, record=record, may_record=context.records.gate(principal))
    context.metrics.packets.labels(role).observe(time.perf_counter() - started)
    etag = f'"{packet.hash}"'
    headers = {"ETag": etag, "X-Canon-Packet-Id": packet.packet_id, "X-Canon-Position": str(packet.position)}
    if record and at is None:  # asked to be recorded: was it? (false: a worker key past its recording budget)
        headers["X-Canon-Recorded"] = "true" if recorded else "false"
    if if_none_match is not None and etag in [t.strip() for t in if_none_match.split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(packet.to_json(), media_type="application/json", headers=headers)


@router.get("/v1/packets/{packet_id}", summary="What was issued: the packet's record in the log")
def get_packet_record(request: Request, packet_id: str, principal: Annotated[Principal, Depends(needs("worker"))]) -> Response:
    r = issued_record(ctx(request).services.ledger, principal, packet_id)
    body = {"packet_id": r.packet_id, "story_id": r.story_id, "role": r.role, "chapter": r.chapter, "scene": r.scene,
            "budget": r.budget, "position": r.position, "hash": r.hash, "tokenizer": r.tokenizer,
            "compiler": r.compiler, "items": r.items, "dropped": r.dropped, "recall": r.recall}
    return json_response(body)


@router.get("/v1/packets/{packet_id}/audit", summary="Replay history to the packet's position and compare (as canon audit)")
def audit_packet(request: Request, packet_id: str, principal: Annotated[Principal, Depends(needs("worker"))]) -> Response:
    context = ctx(request)
    issued_record(context.services.ledger, principal, packet_id)
    report = context.reading(context.services.auditor.audit, packet_id)
    return json_response(report.as_dict())
