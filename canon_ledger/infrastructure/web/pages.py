"""The context viewer and the review queue: server-rendered pages of ``canon serve``.

Every page reads through the same services as the JSON API (``ServerContext``), so what a page
shows is what the API answers: the packet page renders the packet's own JSON. A key pasted once
opens a login session kept in a cookie (``infrastructure.web.session``); the review queue posts
ordinary commands (``confirm_canon``, ``reject_canon``, ``accept_draft``, ``reject_draft``,
``dismiss_finding``) through ``access.apply_for``, as the API does, each with a command id minted
when the page was rendered, so a double click applies once. Query and form values are checked against the API's bounds before
anything is read; a refusal renders an error page carrying the API's code.

Each submitted draft on the queue shows its continuity findings (``ContinuityCheck``, one check
per draft, as ``GET /v1/stories/{s}/drafts/{d}/check`` answers it): the spans marked in the
draft's text, the canon evidence linked to its event. Accepting a draft whose check has error
findings needs an ``override_reason`` (recorded as ``Draft.FindingsOverridden``): the server
checks again and refuses an accept without one, applying nothing.
"""

from __future__ import annotations

import json
import uuid
from itertools import groupby
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from canon_ledger.application import canon_reads, who_knows
from canon_ledger.application.access import SCAN_LIMIT, apply_for, issued_record, require, visible
from canon_ledger.application.command_reader import read_value
from canon_ledger.application.packet_view import STATUSES, budget_bar, by_tier, diff_packets, previous_change
from canon_ledger.application.review_view import cards, highlighted
from canon_ledger.application.packets.recipes import Request as PacketRequest
from canon_ledger.domain.canon import in_force
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_BUDGET, MAX_CHAPTER, MAX_ID, MAX_POSITION, MAX_STORY_ID
from canon_ledger.domain.bounds import MAX_NODE_KIND as MAX_KIND
from canon_ledger.domain.errors import CanonError, unknown_story
from canon_ledger.domain.story import ROLES
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.door import bounded_body
from canon_ledger.infrastructure.http.problems import _TITLES, Problem
from canon_ledger.infrastructure.web import session
from canon_ledger.infrastructure.web.session import check_csrf, page_csrf, viewer

router = APIRouter(include_in_schema=False)
HERE = Path(__file__).parent
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _Templates(Environment):
    """Jinja, with ``x.name`` of a dict (the pages render JSON) read as its key first: Jinja
    tries the attribute first, which a dict has only for its methods, raising and catching an
    AttributeError per lookup (thousands a packet page). The same answer as Jinja's: a dict
    method's name still finds the method."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


templates = _Templates(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]),
                       trim_blocks=True, lstrip_blocks=True)
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin",
           "Content-Security-Policy": "default-src 'self'; script-src 'none'; object-src 'none'; "
                                      "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"}
EVENTS_SHOWN = 300  # events listed between two compared positions
ACTIONS = {"confirm_canon": "proposal_id", "reject_canon": "proposal_id",
           "accept_draft": "draft_id", "reject_draft": "draft_id",
           "dismiss_finding": "draft_id"}  # what the review queue may post, and the field its form's id fills
REASONED = ("reject_canon", "reject_draft", "dismiss_finding")  # the actions whose form sends a reason
OVERRIDE_NEEDED = "override_reason_required"  # the code of an accept refused for want of a reason
PAGE_PREFIXES = ("/stories/", "/packets/", "/login", "/logout")
EVENTS_SCOPE = "author"  # the log's events (drafts, proposals, hidden canon), as GET /v1/events needs


def is_page(path: str) -> bool:
    """Is this a path of the viewer (errors render as HTML) rather than of the API?"""
    return path == "/" or path.startswith(PAGE_PREFIXES)


def render(request: Request, name: str, http_status: int = 200, **values: Any) -> HTMLResponse:
    principal = values.get("principal")
    values.setdefault("can_review", principal is not None and principal.has("author"))
    values.setdefault("sees_events", principal is not None and principal.has(EVENTS_SCOPE))  # else no event links
    values.setdefault("csrf", page_csrf(request))
    values.setdefault("story", None)
    values["story_q"] = quote(values["story"], safe="") if values["story"] else ""  # once, not per link
    body = templates.get_template(name).render(**values)
    return HTMLResponse(body, status_code=http_status, headers=HEADERS)


def error_page(request: Request, status: int, code: str, detail: str, field: str | None = None) -> Response:
    """An error of a page, as HTML with the API's code and status (the API answers problem+json)."""
    if status == 401:
        return RedirectResponse(session.login_url(request), 303)
    return render(request, "error.html", status, status=status, code=code, detail=detail, field=field,
                  title=_TITLES.get(status, "Error"))


# -- reading the query: the API's bounds, and "" as "not given" (what an empty form field sends) --

def _text(request: Request, name: str, limit: int, default: str | None = None) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if len(value) > limit:
        raise Problem(422, "invalid_field", f"{name}: at most {limit} characters", name)
    return value


def _number(request: Request, name: str, low: int, high: int, default: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value.strip() == "":
        return default
    value = value.strip()
    digits = value[1:] if value.startswith("-") else value
    if not digits.isascii() or not digits.isdigit():
        raise Problem(422, "invalid_field", f"{name}: a whole number is expected, got {value[:40]!r}", name)
    if len(digits) > 20 or not low <= int(value) <= high:  # the length first: never int() of 10^6 digits
        shown = value if len(value) <= 24 else f"{value[:12]}... ({len(digits)} digits)"
        raise Problem(422, "invalid_field", f"{name}: must be between {low:,} and {high:,}, got {shown}", name)
    return int(value)


def _story(request: Request, principal: Principal, story: str, *, counts: bool = False) -> dict[str, Any]:
    """The story once it exists and this key may see it, else 404: its head (``story_head``:
    id, title, position, last chapter), or with ``counts`` the whole ``story`` view."""
    if len(story) > MAX_STORY_ID:
        raise unknown_story(story[:MAX_STORY_ID])
    visible(principal, story)
    context = ctx(request)
    found = context.reading(lambda: (context.services.views().story if counts else
                                     context.services.views().story_head)(story))
    if found is None:
        raise unknown_story(story)
    return found


def _packet_form(request: Request, principal: Principal, story: str) -> tuple[dict[str, Any], int]:
    """The packet request a page's query asks for (default: the writer at the last planned
    chapter), once the story is visible, and the log's end."""
    last = _story(request, principal, story)["last_chapter"]
    role = _text(request, "role", 20, "writer")
    if role not in ROLES:
        raise Problem(422, "invalid_field", f"role: one of {', '.join(ROLES)}, got {role!r}", "role")
    form = {"role": role, "chapter": _number(request, "chapter", 1, MAX_CHAPTER, last or 1),
            "scene": _text(request, "scene", MAX_ID), "budget": _number(request, "budget", 0, MAX_BUDGET)}
    return form, ctx(request).services.ledger.event_log.position()


def _packet(request: Request, form: dict[str, Any], story: str, at: int | None,
            principal: Principal | None = None) -> tuple[dict[str, Any], bool]:
    """The packet's JSON, as ``GET /v1/stories/{story}/packet`` answers it (``as_dict``: what
    that JSON serialises, not parsed back), and whether it is recorded: with ``principal``,
    recorded as the API records that key's packets (a key below author scope within its
    recording budget), else not."""
    context = ctx(request)
    wanted = PacketRequest(story, form["role"], form["chapter"], form["scene"], form["budget"])
    packet, recorded = context.reading(context.services.issue, wanted, at=at, record=principal is not None,
                                       may_record=None if principal is None else context.records.gate(principal))
    return packet.as_dict(), recorded


def _summary(data: dict[str, Any]) -> str:
    """One line of an event's data for a list: its most telling fields."""
    parts = []
    for name in ("chapter", "kind", "key", "name", "proposal_id", "draft_id", "scene_id", "valid_from", "reason"):
        if data.get(name) not in (None, ""):
            parts.append(f"{name}={data[name]}")
    return ", ".join(parts)[:300]


def _events(request: Request, story: str, after: int, until: int) -> tuple[list[dict[str, Any]], bool]:
    ledger = ctx(request).services.ledger
    events: list[dict[str, Any]] = []
    if until <= after:
        return events, False
    # As GET /v1/events: a story's entries among at most SCAN_LIMIT of the log, never the whole range.
    for scanned, logged in enumerate(ledger.event_log.history(start=after + 1, stop=until)):
        if len(events) >= EVENTS_SHOWN or scanned >= SCAN_LIMIT:
            return events, True
        if logged.story_id != story:
            continue
        events.append({"position": logged.position, "type": logged.type, "summary": _summary(logged.data)})
    return events, False


# -- pages ----------------------------------------------------------------------------------------

@router.get("/login")
def login_page(request: Request) -> Response:
    return render(request, "login.html", next=session.safe_next(request.query_params.get("next")), error=None)


@router.post("/login")
async def login(request: Request) -> Response:
    if not session.same_origin(request):  # another site's form: it would log this browser into its key
        raise Problem(403, "cross_site_login", "a login is posted from this server's own login page, "
                                               "not from another site")
    form = await _form(request)
    target = session.safe_next(form.get("next"))
    token = (form.get("key") or "").strip()
    keys = ctx(request).keys
    opened = None
    if token and len(token) <= session.MAX_TOKEN:
        opened = await run_in_threadpool(keys.open_session, token, session.MAX_AGE)
    if opened is None:
        return render(request, "login.html", 401, next=target, error="That key is unknown or revoked.")
    previous = session.cookie_session(request)
    if previous is not None:  # logging in again, perhaps as another key: the former session ends
        await run_in_threadpool(keys.end_session, previous)
    response = RedirectResponse(target, 303)
    response.set_cookie(session.COOKIE, opened[0], max_age=session.MAX_AGE, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    _clear_old_cookie(request, response)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Ends the session (an event: the cookie, replayed, logs nobody in) and clears the
    cookie. With no session cookie there is nothing to end: a second logout just lands on
    the login page."""
    form = await _form(request)
    session_id = session.cookie_session(request)
    if session_id is not None:
        check_csrf(request, form.get("csrf"))
        await run_in_threadpool(ctx(request).keys.end_session, session_id)
    response = RedirectResponse("/login", 303)
    response.delete_cookie(session.COOKIE, path="/", httponly=True, samesite="strict")
    _clear_old_cookie(request, response)
    return response


def _clear_old_cookie(request: Request, response: Response) -> None:
    """The cookie logins set before sessions held the key's token itself: never leave it."""
    if session.OLD_COOKIE in request.cookies:
        response.delete_cookie(session.OLD_COOKIE, path="/", httponly=True, samesite="strict")


@router.get("/")
def overview(request: Request, principal: Principal = Depends(viewer)) -> Response:
    context = ctx(request)
    services = context.services

    def read() -> tuple[list[dict[str, Any]], Any, int]:
        return services.views().stories(principal.stories), services.status(), services.ledger.event_log.position()

    stories, status, end = context.reading(read)
    return render(request, "overview.html", principal=principal, stories=stories, models=list(status.items()), end=end)


@router.get("/stories/{story}/packet")
def packet_page(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    form, end = _packet_form(request, principal, story)
    form["at"] = _number(request, "at", 0, MAX_POSITION)
    form["status"] = _text(request, "status", 20)
    if form["status"] is not None and form["status"] not in STATUSES:
        raise Problem(422, "invalid_field", f"status: one of {', '.join(STATUSES)}, got {form['status']!r}", "status")
    packet, recorded = _packet(request, form, story, form["at"], principal)
    everything = {k: v for k, v in request.query_params.items() if k != "status"}
    return render(request, "packet.html", principal=principal, story=story, page="packet", p=packet, form=form,
                  end=end, roles=ROLES, statuses=STATUSES, bar=budget_bar(packet), groups=by_tier(packet, form["status"]),
                  recorded=recorded, all_url=f"/stories/{quote(story, safe='')}/packet?{urlencode(everything)}")


@router.get("/stories/{story}/compare")
def compare_page(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    form, end = _packet_form(request, principal, story)
    form["from_"] = _number(request, "from", 0, MAX_POSITION)
    form["to"] = _number(request, "to", 0, MAX_POSITION)
    values: dict[str, Any] = {"principal": principal, "story": story, "page": "compare", "form": form, "end": end,
                              "roles": ROLES, "statuses": STATUSES, "before": None}
    if form["from_"] is None:  # no starting position: offer the packet's previous change
        try:
            values |= _previous_change(request, form, story, _packet(request, form, story, form["to"])[0])
        except CanonError as e:  # the form still opens; the packet's own refusal says why there is no default
            values["no_default"] = e.message
        return render(request, "compare.html", **values)
    before, _ = _packet(request, form, story, form["from_"])
    after, _ = _packet(request, form, story, form["to"])
    values |= _previous_change(request, form, story, after)
    events: list[dict[str, Any]] = []
    more = False
    if principal.has(EVENTS_SCOPE):  # the events between: what GET /v1/events shows this key, no more
        events, more = _events(request, story, form["from_"], form["to"] if form["to"] is not None else end)
    values |= {"before": before, "after": after, "changes": diff_packets(before, after), "events": events,
               "events_more": more, "shown": EVENTS_SHOWN, "scanned": SCAN_LIMIT}
    return render(request, "compare.html", **values)


def _previous_change(request: Request, form: dict[str, Any], story: str, packet: dict[str, Any]) -> dict[str, Any]:
    """The compare page's default "from" for ``packet`` (``packet_view.previous_change``), the
    event it stands before and a link comparing from it; or, with no earlier packet, when the
    chapter was planned."""
    context = ctx(request)
    chapter = context.reading(lambda: context.services.views().chapter(story, form["chapter"]))
    planned = chapter["goals_source"] if chapter else None
    default = previous_change(packet, planned)
    query = {"role": form["role"], "chapter": form["chapter"], "scene": form["scene"], "budget": form["budget"],
             "to": form["to"], "from": default}
    link = f"/stories/{quote(story, safe='')}/compare?" + urlencode({k: v for k, v in query.items() if v is not None})
    return {"default_from": default, "default_link": link, "planned_at": planned,
            "changed_at": None if default is None else default + 1}


@router.get("/stories/{story}/canon")
def canon_page(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    found = _story(request, principal, story, counts=True)
    chapters = [c["chapter"] for c in found["chapters"]]
    as_of = _number(request, "as_of", 1, MAX_CHAPTER, chapters[-1] if chapters else 1)
    assert as_of is not None  # a default was given
    kind = _text(request, "kind", MAX_KIND)
    context = ctx(request)
    entries = context.reading(lambda: canon_reads.canon_as_of(principal, context.services.views(), story, as_of, kind))
    grouped = [(k, list(group)) for k, group in groupby(entries, key=lambda e: e["kind"])]
    return render(request, "canon.html", principal=principal, story=story, page="canon", as_of=as_of, kind=kind,
                  kinds=sorted(found["entries_by_kind"]), grouped=grouped)


@router.get("/stories/{story}/secrets")
def secrets_page(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    """Who knows what as of a chapter: characters by secrets, each cell the chapter the
    character learned it (``who_knows.secrets``, as ``GET /v1/stories/{story}/secrets`` answers)."""
    head = _story(request, principal, story)
    as_of = _number(request, "as_of", 1, MAX_CHAPTER, head["last_chapter"] or 1)
    assert as_of is not None  # a default was given
    context = ctx(request)
    view = context.reading(lambda: who_knows.secrets(principal, context.services.views(), story, as_of))
    return render(request, "secrets.html", principal=principal, story=story, page="secrets", as_of=as_of, view=view,
                  grid=who_knows.grid(view))


@router.get("/stories/{story}/canon/{kind}/{key}")
def entry_page(request: Request, story: str, kind: str, key: str, principal: Principal = Depends(viewer)) -> Response:
    head = _story(request, principal, story)
    context = ctx(request)
    entry = None
    if len(kind) <= MAX_KIND and len(key) <= MAX_ID:
        as_of = _number(request, "as_of", 1, MAX_CHAPTER)
        entry = context.reading(lambda: canon_reads.entry(principal, context.services.views(), story, kind, key, as_of))
    if entry is None:
        raise Problem(404, "unknown_canon_entry", f"no confirmed {kind[:MAX_KIND]} {key[:MAX_ID]!r} in story {story!r}", "key")
    spans = in_force([(v["valid_from"], v["retired"]) for v in entry["versions"]])
    latest = head["last_chapter"]
    for version, span in zip(entry["versions"], spans, strict=True):  # which chapters each step holds at
        version["in_force"] = span.label
        version["now"] = latest is not None and span.holds_at(latest)
    return render(request, "entry.html", principal=principal, story=story, page="canon", entry=entry, latest=latest)


@router.get("/stories/{story}/events/{position}")
def event_page(request: Request, story: str, position: str, principal: Principal = Depends(viewer)) -> Response:
    """One event of the log: what ``GET /v1/events`` shows, to the keys it shows it to (author
    scope and above: an event may hold a draft, a proposal or canon hidden until a later
    chapter). Pages a worker key sees list source positions without links here."""
    require(principal, EVENTS_SCOPE)  # before the story, as the API: the same 403 for every story
    _story(request, principal, story)
    if not position.isdigit() or len(position) > 12 or not 1 <= int(position) <= MAX_POSITION:
        raise Problem(422, "invalid_field", f"position: a log position is a whole number from 1, got {position[:40]!r}",
                      "position")
    at = int(position)
    services = ctx(request).services
    logged = next(iter(services.ledger.event_log.history(start=at, stop=at)), None) if at <= services.ledger.event_log.position() else None
    if logged is None or logged.position != at or logged.story_id != story:
        raise Problem(404, "unknown_event", f"story {story!r} has no event at position {at}", "position")
    lineage = ctx(request).reading(services.auditor.lineage, story, [at])[at]
    data = json.dumps(logged.data, indent=2, ensure_ascii=False, default=str, sort_keys=True)
    return render(request, "event.html", principal=principal, story=story, event=logged, lineage=lineage, data=data)


@router.get("/packets/{packet_id}/audit")
def audit_page(request: Request, packet_id: str, principal: Principal = Depends(viewer)) -> Response:
    context = ctx(request)
    record = issued_record(context.services.ledger, principal, packet_id)
    report = context.reading(context.services.auditor.audit, packet_id).as_dict()
    return render(request, "audit.html", principal=principal, story=record.story_id, page="packet", report=report)


# -- the review queue ------------------------------------------------------------------------------

def _author(principal: Principal) -> None:
    if not principal.has("author"):
        raise Problem(403, "forbidden", f"the review queue needs a key of scope author or above; this key is "
                                        f"{principal.scope}")


@router.get("/stories/{story}/review")
def review_page(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    _author(principal)
    _story(request, principal, story)
    context = ctx(request)

    def read() -> tuple[list[Any], list[dict[str, Any]], dict[str, dict[str, Any]]]:
        views = context.services.views()
        # Each pending proposal beside the confirmed version in force at its valid_from (review_view).
        proposals, drafts = cards(*views.review(story)), views.drafts(story, status="submitted")
        checker = context.services.continuity()
        return proposals, drafts, {d["draft_id"]: _checked(checker, story, d) for d in drafts}

    proposals, drafts, checks = context.reading(read)
    result: dict[str, Any] | None = None
    if "status" in request.query_params:
        q = request.query_params
        result = {"what": (q.get("what") or "")[:40], "status": (q.get("status") or "")[:20],
                  "code": (q.get("code") or "")[:80], "message": (q.get("message") or "")[:300]}
        result["ok"] = result["status"] in ("applied", "duplicate", "unchanged")
    return render(request, "review.html", principal=principal, story=story, page="review", proposals=proposals,
                  drafts=drafts, checks=checks, result=result, fresh=lambda: f"web-{uuid.uuid4().hex}")


def _checked(checker: Any, story: str, draft: dict[str, Any]) -> dict[str, Any]:
    """What the queue shows of a draft's continuity check: the report (``Report.as_dict``) and
    the draft's text cut into segments at the findings' spans; or why there is none."""
    try:
        report = checker.check(story, draft["draft_id"]).as_dict()
    except CanonError as e:  # the queue still opens: the draft says why it has no findings
        return {"problem": f"{e.code}: {e.message}"}
    return {"report": report, "segments": highlighted(draft["text"], report["findings"])}


async def _form(request: Request) -> dict[str, str]:
    body = await bounded_body(request)  # the door's limit for a form: DEFAULT_BODY
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as e:
        raise Problem(422, "invalid_request", f"the form could not be read: {str(e)[:100]}") from None
    return {name: values[0] for name, values in fields.items()}


@router.post("/stories/{story}/review")
async def review_post(request: Request, story: str, principal: Principal = Depends(viewer)) -> Response:
    form = await _form(request)
    check_csrf(request, form.get("csrf"))
    _author(principal)
    visible(principal, story[:MAX_STORY_ID])
    action = form.get("action", "")
    if action not in ACTIONS:
        raise Problem(422, "invalid_field", f"action: one of {', '.join(ACTIONS)}", "action")
    raw: dict[str, Any] = {"type": action, "command_id": form.get("command_id", ""), "story_id": story,
                           ACTIONS[action]: form.get("id", "")}
    if action in REASONED:
        raw["reason"] = form.get("reason", "")
    if action == "dismiss_finding":
        raw["finding_id"] = form.get("finding_id", "")
    override = form.get("override_reason") or ""
    if action == "accept_draft" and override.strip():
        raw["override_reason"] = override
    command = read_value(raw)
    if isinstance(command, CanonError):
        return _back(story, action, "rejected", command)
    if action == "accept_draft" and "override_reason" not in raw:
        errors = await run_in_threadpool(_errors, request, story, raw["draft_id"])
        if errors:
            return _back(story, action, "refused", CanonError(OVERRIDE_NEEDED, (
                f"draft {raw['draft_id']} has {errors} error finding(s) in its continuity check: accepting it "
                "needs a reason (override_reason), recorded with the accept; nothing was applied"), "override_reason"))
    ledger = ctx(request).services.ledger
    result = (await run_in_threadpool(apply_for, ledger, [command], principal, atomic=True))[0]
    return _back(story, action, result.status, result.error)


def _errors(request: Request, story: str, draft_id: str) -> int:
    """The error findings of a submitted draft's check now (0: none, or not a submitted draft,
    or no such draft: the command itself answers then)."""
    context = ctx(request)
    try:
        report = context.reading(context.services.continuity().check, story, draft_id)
    except CanonError:
        return 0
    return report.errors if report.status == "submitted" else 0


def _back(story: str, action: str, status: str, error: CanonError | None) -> Response:
    """Post, redirect, get: the queue again, saying what became of the command."""
    query = {"what": action, "status": status}
    if error is not None:
        query |= {"code": error.code, "message": error.message[:300]}
    return RedirectResponse(f"/stories/{quote(story, safe='')}/review?{urlencode(query)}", 303)
