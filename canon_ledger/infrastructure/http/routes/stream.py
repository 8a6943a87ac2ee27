"""``GET /v1/events/stream``: the global log as server-sent events, live, resumable.

One message per entry the key may see (the same entries and JSON as ``GET /v1/events``):
``id`` is the entry's position, so a client that reconnects with ``Last-Event-ID`` (as every
``EventSource`` does) gets exactly the entries after the last one it received. Once caught up
the stream waits for the log to grow (``LogWakeup``: a notification on PostgreSQL, a cheap
poll on SQLite) and sends a comment every ``KEEP_ALIVE`` seconds of silence.

The stream's key is checked again every ``RECHECK`` seconds: once it is revoked (or unknown)
the stream ends, so a revocation reaches an open stream within ``RECHECK`` + ``CHECK_TTL``
seconds (3 s; at once in the process that revoked it), a new request within ``CHECK_TTL``.

Nothing here holds the event loop: the log is read a page at a time in the request threadpool
(through the ``reading`` gate for that page only, never for the whole stream), and waiting
is done on threads of a limiter of its own, so open streams never take the threads that the
other routes run on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from canon_ledger.application.access import visible
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_POSITION, MAX_STORY_ID
from canon_ledger.infrastructure.http.auth import key_principal, needs
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.http.routes.commands import log_item
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.store_faults import is_store_fault, scrubbed

log = logging.getLogger("canon.http")
router = APIRouter(tags=["commands"])

PAGE = 500  # log positions read in one thread hop
WAIT = 1.0  # seconds one wait for the log to grow lasts: how soon a disconnect is noticed
KEEP_ALIVE = 15.0  # seconds of silence before a comment line, so that proxies keep the connection
RETRY_MS = 1000  # the reconnection delay suggested to the client
WAITERS = 64  # threads that may wait for the log at once (more streams queue for one)
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
RECHECK = 1.0  # seconds between checks that the stream's key still works: a revoked key's stream ends

_waiters: anyio.CapacityLimiter | None = None


def _waiting() -> anyio.CapacityLimiter:
    """The limiter of the waiting threads: apart from the request threadpool's, so that 40
    open streams cannot starve every other route."""
    global _waiters
    if _waiters is None:
        _waiters = anyio.CapacityLimiter(WAITERS)
    return _waiters


def resume_from(last_event_id: str | None) -> int | None:
    """The position in a ``Last-Event-ID`` header, None without one (or an empty one: the
    SSE spec's client sends none then); 422 for anything but a position."""
    if last_event_id is None or not last_event_id.strip():
        return None
    text = last_event_id.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= MAX_POSITION):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise Problem(422, "invalid_last_event_id",
                      f"Last-Event-ID must be a log position, an integer 0..{MAX_POSITION}; got {shown!r}",
                      "Last-Event-ID")
    return int(text)


def message(item: dict[str, Any]) -> str:
    # Strict JSON never holds a raw line break, so ``data`` is a single line.
    return f"id: {item['position']}\nevent: {item['type']}\ndata: {dumps(item)}\n\n"


async def _messages(request: Request, principal: Principal, story: str | None, start: int) -> AsyncIterator[str]:
    context = ctx(request)
    ledger, wakeup = context.services.ledger, context.wakeup

    def page(after: int, end: int) -> tuple[list[str], int]:
        """The messages of positions ``after`` + 1 .. at most ``PAGE`` further (never past
        ``end``, which is known committed), and the last position read."""
        stop = min(end, after + PAGE)
        return [message(item) for logged in ledger.event_log.history(story_id=story, start=after + 1, stop=stop)
                if (item := log_item(logged, principal)) is not None], stop

    def key_still_works() -> bool:
        try:
            key_principal(request)  # the key check the request passed, again (a cached answer for CHECK_TTL)
        except Problem:
            return False
        return True

    yield f"retry: {RETRY_MS}\n\n"
    last = end = start  # the last position read; the log's end as last seen
    sent = checked = time.monotonic()
    try:
        while not await request.is_disconnected():
            if time.monotonic() - checked >= RECHECK:
                if not await run_in_threadpool(key_still_works):
                    yield ": the key was revoked\n\n"
                    return
                checked = time.monotonic()
            if time.monotonic() - sent >= KEEP_ALIVE:  # waiting, or passing over entries this key may not see
                yield ": keep-alive\n\n"
                sent = time.monotonic()
            if end > last:
                messages, last = await run_in_threadpool(context.reading, page, last, end)
                if messages:
                    yield "".join(messages)
                    sent = time.monotonic()
                continue
            began = time.monotonic()
            end = await anyio.to_thread.run_sync(wakeup.wait_beyond, last, WAIT, limiter=_waiting())
            if end <= last and time.monotonic() - began < WAIT / 2:
                return  # a wait returns early with nothing new only once closed: the server is stopping
    except Exception as e:
        if not is_store_fault(e):
            raise
        # The headers are sent: end the stream, and the client comes back after ``retry``.
        log.warning("event stream ended, the store is unavailable: %s",
                    scrubbed(e, getattr(request.app.state, "store_url", None)))


@router.get("/v1/events/stream", summary="The global log as server-sent events, live; resumable",
            description="One message per entry after `after` (or after the `Last-Event-ID` header, which a "
                        "reconnecting client sends and which wins over `after`): `id` is the position, `event` "
                        "the type, `data` the entry as `GET /v1/events` gives it. Then new entries as they are "
                        "appended; a `: keep-alive` comment every 15 s of silence. The same entries as "
                        "`GET /v1/events` for the same key.",
            responses={200: {"description": "an endless stream of server-sent events",
                             "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
async def stream_events(request: Request, principal: Annotated[Principal, Depends(needs("author"))],
                        story: Annotated[str | None, Query(max_length=MAX_STORY_ID)] = None,
                        after: Annotated[int, Query(ge=0, le=MAX_POSITION)] = 0,
                        last_event_id: Annotated[str | None, Header(
                            description="resume after this position (sent by a reconnecting client)")] = None,
                        ) -> Response:
    if story is not None:
        visible(principal, story)
    resumed = resume_from(last_event_id)
    start = after if resumed is None else resumed
    field = "after" if resumed is None else "Last-Event-ID"
    # a position beyond the log is refused (422 position_beyond_log) before anything is streamed
    await run_in_threadpool(ctx(request).services.packets.within_log, start, field)
    return StreamingResponse(_messages(request, principal, story, start), media_type="text/event-stream",
                             headers=HEADERS)
