"""``POST /v1/commands`` (the whole command vocabulary, one or a batch) and ``GET /v1/events``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from application.parsing import decode_line, parse_command, parse_json
from application.results import CommandResult
from domain.api_key import Principal
from domain.errors import CanonError, InvalidCommand, NotFound
from infrastructure.http.auth import needs
from infrastructure.http.context import ServerContext
from infrastructure.http.problems import Problem, problem_response
from infrastructure.jsonout import dumps

router = APIRouter(tags=["commands"])
MAX_BATCH = 10_000  # commands in one request
MAX_BODY = 64 * 1024 * 1024
MAX_POSITION = 2**31 - 1


def ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def _items(body: bytes, principal: Principal) -> list[Any]:
    """Each command of the body, or the structured error reading it gave (in its place)."""
    data = parse_json(decode_line(body))
    batch = data if isinstance(data, list) else [data]
    if not batch:
        raise InvalidCommand("empty_batch", "the body is an empty list: send a command or a list of them")
    if len(batch) > MAX_BATCH:
        raise InvalidCommand("batch_too_large", f"{len(batch):,} commands; a request carries at most {MAX_BATCH:,}")
    items: list[Any] = []
    for raw in batch:
        try:
            if not isinstance(raw, dict):
                raise InvalidCommand("malformed_json", f"a command is a JSON object, got {type(raw).__name__}")
            command = parse_command(raw)
        except CanonError as e:
            items.append(e)
            continue
        items.append(_allowed(command, principal))
    return items


def _allowed(command: Any, principal: Principal) -> Any:
    """The command, or why this key may not issue it (a story it may not see is unknown)."""
    story = getattr(command, "story_id", None)
    if story is not None and not principal.sees(story):
        return NotFound("unknown_story", f"story {story!r} has not been started", "story_id")
    collection = getattr(command, "collection_id", None)
    if story is None and not principal.unrestricted and not (
            collection and collection.startswith("story:") and principal.sees(collection[len("story:"):])):
        return CanonError("forbidden", "a key limited to stories may not change shared collections", "collection_id")
    return command


@router.post("/v1/commands", summary="Apply one command or a list of them",
             description="Answers per command exactly like `canon apply`. 200 when nothing was refused, 422 when a "
                         "command could not be read, 409 when a rule refused one or a race was lost (the body still "
                         "says, per command, what was applied). `atomic=true`: all or nothing, in one transaction.")
async def post_commands(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
                        atomic: bool = False) -> Response:
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_BODY:
        raise Problem(413, "body_too_large", f"a request body is at most {MAX_BODY:,} bytes")
    body = await request.body()
    if len(body) > MAX_BODY:
        raise Problem(413, "body_too_large", f"a request body is at most {MAX_BODY:,} bytes")
    items = _items(body, principal)
    context = ctx(request)
    results: list[CommandResult] = await run_in_threadpool(context.services.ledger.apply, items, atomic=atomic)
    position = await run_in_threadpool(context.services.ledger.position)
    answer = {"results": [r.as_dict() for r in results], "position": position}
    if all(r.ok for r in results):
        return Response(dumps(answer), media_type="application/json")
    unreadable = any(r.error is not None and isinstance(r.error, InvalidCommand) for r in results)
    first = next(r for r in results if not r.ok and r.error is not None) if any(
        r.error is not None for r in results) else None
    status = 422 if unreadable else 409
    code = first.error.code if first is not None and first.error is not None else "not_applied"
    refused = sum(1 for r in results if not r.ok)
    detail = f"{refused} of {len(results)} commands not applied" + (
        f"; command {first.index}: {first.error.message}" if first is not None and first.error is not None else "")
    return problem_response(status, code, detail, first.error.field if first and first.error else None, **answer)


SCAN_LIMIT = 10_000  # log entries one page may pass over looking for visible ones


@router.get("/v1/events", summary="A page of the global log, with positions",
            description="Entries after `after`, oldest first. `next_after` is where the next page starts: a page "
                        "may hold fewer than `limit` entries (a story's page skips other stories' entries) and is "
                        "the last one when `next_after` equals `end`.")
def get_events(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
               story: Annotated[str | None, Query(max_length=64)] = None,
               after: Annotated[int, Query(ge=0, le=MAX_POSITION)] = 0,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Response:
    services = ctx(request).services
    ledger = services.ledger
    services.packets.within_log(after)  # a position beyond the log is refused, never read past
    end = ledger.position()
    events: list[dict[str, Any]] = []
    last = after
    if story is None or principal.sees(story):
        for scanned, logged in enumerate(ledger.history(story_id=story, start=after + 1, stop=end)):
            if len(events) >= limit or scanned >= SCAN_LIMIT:
                break
            last = logged.position
            if logged.type.startswith("ApiKey") and not principal.has("admin"):
                continue  # keys are the admin's business
            if not principal.sees(logged.story_id):
                continue
            events.append({"position": logged.position, "type": logged.type, "story_id": logged.story_id,
                           "originator_id": str(logged.originator_id), "version": logged.version,
                           "timestamp": logged.timestamp.isoformat(), "data": logged.data})
        else:
            last = end
    else:
        last = end
    return Response(dumps({"events": events, "after": after, "next_after": last, "end": end}),
                    media_type="application/json")
