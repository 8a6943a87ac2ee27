"""``POST /v1/commands`` (the whole command vocabulary, one or a batch) and ``GET /v1/events``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from canon_ledger.application.access import SCAN_LIMIT, apply_for, visible
from canon_ledger.application.command_reader import read_batch
from canon_ledger.application.results import CommandResult
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_POSITION
from canon_ledger.domain.errors import InvalidCommand
from canon_ledger.infrastructure.hints import TagHints
from canon_ledger.infrastructure.http.auth import needs
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.door import bounded_body
from canon_ledger.infrastructure.http.problems import problem_response
from canon_ledger.infrastructure.http.routes.common import json_response

if TYPE_CHECKING:
    from canon_ledger.application.ledger import LoggedEvent

router = APIRouter(tags=["commands"])
MAX_BATCH = 10_000  # commands in one request


def answer(results: list[CommandResult], position: int, extra: list[dict[str, Any]] | None = None) -> Response:
    """200 with every result when nothing was refused; else problem+json carrying them all:
    422 unreadable (nothing applied), 403 a shared collection for a story key, 409 a rule's
    refusal or a lost race."""
    body: dict[str, Any] = {"results": [{**(extra[i] if extra else {}), **r.as_dict()} for i, r in enumerate(results)],
            "position": position}
    if all(r.ok for r in results):
        return json_response(body)
    errors = [r.error for r in results if r.error is not None]
    status = 422 if any(isinstance(e, InvalidCommand) for e in errors) else \
        403 if any(e.code == "forbidden" for e in errors) else 409
    first = next((r for r in results if r.error is not None), None)
    detail = f"{sum(not r.ok for r in results)} of {len(results)} not applied"
    if first is None or first.error is None:
        return problem_response(status, "not_applied", detail, **body)
    return problem_response(status, first.error.code, f"{detail}; item {first.index}: {first.error.message}",
                            first.error.field, **body)


@router.post("/v1/commands", summary="Apply one command or a list of them",
             description="Answers per command exactly like `canon apply`. 200 when nothing was refused. A request "
                         "with a command that cannot be read applies nothing (422). 409 when a rule refused a "
                         "command or a race was lost: without `atomic=true` the others are applied, and the body "
                         "says, per command, what was. `atomic=true`: all or nothing, in one transaction.")
async def post_commands(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
                        atomic: bool = False) -> Response:
    items = read_batch(await bounded_body(request), MAX_BATCH)  # the door's limit for this route
    services = ctx(request).services
    ledger = services.ledger

    def apply() -> tuple[list[CommandResult], int]:  # one thread hop for both
        hints = TagHints(lambda: services)  # a tag that is an entry's name or alias is told its key
        results = [hints(r, items[r.index - 1]) for r in apply_for(ledger, items, principal, atomic=atomic)]
        return results, ledger.event_log.position()

    return answer(*await run_in_threadpool(apply))


def log_item(logged: LoggedEvent, principal: Principal) -> dict[str, Any] | None:
    """One log entry as ``GET /v1/events`` and ``GET /v1/events/stream`` give it, or None
    when this key may not see it: keys are the admin's business, and a key limited to
    stories sees only their entries."""
    if logged.type.startswith(("ApiKey", "ViewerSession")) and not principal.has("admin"):
        return None
    if not principal.sees(logged.story_id):
        return None
    return {"position": logged.position, "type": logged.type, "story_id": logged.story_id,
            "originator_id": str(logged.originator_id), "version": logged.version,
            "timestamp": logged.timestamp.isoformat(), "data": logged.data}


@router.get("/v1/events", summary="A page of the global log, with positions",
            description="Entries after `after`, oldest first. `next_after` is where the next page starts: a page "
                        "may hold fewer than `limit` entries (a story's page skips other stories' entries) and is "
                        "the last one when `next_after` equals `end`.")
def get_events(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
               story: Annotated[str | None, Query(max_length=64)] = None,
               after: Annotated[int, Query(ge=0, le=MAX_POSITION)] = 0,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Response:
    if story is not None:
        visible(principal, story)  # another story's log is as unknown as one never started (404)
    services = ctx(request).services
    ledger = services.ledger
    services.packets.within_log(after)  # a position beyond the log is refused, never read past
    end = ledger.event_log.position()
    events: list[dict[str, Any]] = []
    last = after
    for scanned, logged in enumerate(ledger.event_log.history(story_id=story, start=after + 1, stop=end)):
        if len(events) >= limit or scanned >= SCAN_LIMIT:
            break
        last = logged.position
        if (item := log_item(logged, principal)) is not None:
            events.append(item)
    else:
        last = end
    return json_response({"events": events, "after": after, "next_after": last, "end": end})
