"""Read views of stories, canon, chapters (any scope) and the authoring views (author scope)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from canon_ledger.application import canon_reads, who_knows
from canon_ledger.application.access import story_views, visible
from canon_ledger.domain.errors import unknown_story
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.canon import PROPOSAL_STATE_ALIASES
from canon_ledger.domain.bounds import MAX_CHAPTER, MAX_ID, MAX_POSITION, MAX_STORY_ID
from canon_ledger.domain.bounds import MAX_NODE_KIND as MAX_KIND
from canon_ledger.infrastructure.http.auth import needs
from canon_ledger.infrastructure.http.context import ctx
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.http.routes.common import json_response
from canon_ledger.infrastructure.http.schemas import CHECK_RESPONSES, KNOWLEDGE_RESPONSES, SECRETS_RESPONSES
from canon_ledger.projections.story_views import StoryViews

router = APIRouter(tags=["stories"])
Story = Annotated[str, Path(min_length=1, max_length=MAX_STORY_ID)]
After = Annotated[int | None, Query(ge=0, le=MAX_POSITION, description="read your writes: reflect this position")]
AsOf = Annotated[int | None, Query(ge=1, le=MAX_CHAPTER, description=(
    "the chapter read: below author scope nothing hidden at it, nor of a later chapter, is shown "
    "(default: the story's latest planned chapter)"))]



def _views(request: Request, after: int | None = None) -> StoryViews:
    context = ctx(request)
    return context.reading(context.services.views, after)


@router.get("/v1/stories", summary="The stories this key may see, with their counts")
def list_stories(request: Request, principal: Annotated[Principal, Depends(needs("worker"))],
                 after: After = None) -> Response:
    return json_response({"stories": _views(request, after).stories(principal.stories)})


@router.get("/v1/stories/{story}", summary="One story: title, budgets, chapters, volumes, counts, position")
def get_story(request: Request, story: Story, principal: Annotated[Principal, Depends(needs("worker"))],
              after: After = None) -> Response:
    visible(principal, story)
    found = _views(request, after).story(story)
    if found is None:
        raise unknown_story(story)
    return json_response(found)


@router.get("/v1/stories/{story}/canon", summary="Confirmed entries in force as of a chapter")
def list_canon(request: Request, story: Story, principal: Annotated[Principal, Depends(needs("worker"))],
               as_of: Annotated[int, Query(ge=1, le=MAX_CHAPTER)],
               kind: Annotated[str | None, Query(min_length=1, max_length=MAX_KIND)] = None,
               after: After = None) -> Response:
    views = story_views(ctx(request), principal, story, after)
    return json_response({"story_id": story, "as_of": as_of, "kind": kind,
                          "entries": canon_reads.canon_as_of(principal, views, story, as_of, kind)})


@router.get("/v1/stories/{story}/canon/{kind}/{key}", summary="One entry with every version")
def get_entry(request: Request, story: Story, kind: Annotated[str, Path(min_length=1, max_length=MAX_KIND)],
              key: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
              principal: Annotated[Principal, Depends(needs("worker"))], after: After = None,
              as_of: AsOf = None) -> Response:
    visible(principal, story)
    return json_response(canon_reads.entry(principal, _views(request, after), story, kind, key, as_of))


@router.get("/v1/stories/{story}/chapters/{number}", summary="A chapter: goals, scene cards, summary, text status")
def get_chapter(request: Request, story: Story, number: Annotated[int, Path(ge=1, le=MAX_CHAPTER)],
                principal: Annotated[Principal, Depends(needs("worker"))], after: After = None,
                as_of: AsOf = None) -> Response:
    visible(principal, story)
    chapter = canon_reads.chapter(principal, _views(request, after), story, number, as_of)
    if chapter is None:
        raise Problem(404, "unknown_chapter", f"chapter {number} of story {story!r} is not planned", "chapter")
    return json_response(chapter)


@router.get("/v1/stories/{story}/secrets", summary="Who knows what: the secrets in force as of a chapter",
            description="What `canon secrets --format json` prints: the entries whose version in force as of the "
                        "chapter read is a secret (`fields.secret`), each with the characters who know it then "
                        "(`record_knowledge` of a chapter up to it: since which chapter, how, the record's log "
                        "position), and the grid's rows (`characters`: those who know one, and the scenes' points of "
                        "view). Below author scope a secret hidden at the chapter is listed as the canon view lists "
                        "it, and who knows it is withheld.", responses=SECRETS_RESPONSES)
def list_secrets(request: Request, story: Story, principal: Annotated[Principal, Depends(needs("worker"))],
                 as_of: AsOf = None, after: After = None) -> Response:
    context = ctx(request)
    views = story_views(context, principal, story, after)
    return json_response(context.reading(who_knows.secrets, principal, views, story, as_of))


@router.get("/v1/stories/{story}/characters/{character}/knowledge",
            summary="What one character knows as of a chapter",
            description="What `canon knowledge --format json` prints: every knowledge record of the character from "
                        "a chapter up to the chapter read, with the known entry's name and whether its version in "
                        "force then is a secret. Below author scope a record of an entry hidden at the chapter is "
                        "left out. `404 unknown_character` when the story never confirmed that character.",
            responses=KNOWLEDGE_RESPONSES)
def character_knowledge(request: Request, story: Story,
                        character: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
                        principal: Annotated[Principal, Depends(needs("worker"))], as_of: AsOf = None,
                        after: After = None) -> Response:
    context = ctx(request)
    views = story_views(context, principal, story, after)
    return json_response(context.reading(who_knows.character_knowledge, principal, views, story, character, as_of))


@router.get("/v1/stories/{story}/proposals", summary="Canon proposals (authoring view; never on the packet path)")
def list_proposals(request: Request, story: Story, principal: Annotated[Principal, Depends(needs("author"))],
                   status: Annotated[Literal["proposed", "confirmed", "rejected", "pending"] | None, Query(
                       description="only proposals in this state: proposed (awaiting an author's decision), "
                                   "confirmed or rejected; `pending` is read as `proposed`")] = None,
                   after: After = None) -> Response:
    views = story_views(ctx(request), principal, story, after)
    state = PROPOSAL_STATE_ALIASES.get(status, status) if status else None
    return json_response({"story_id": story, "proposals": views.proposals(story, state)})


@router.get("/v1/stories/{story}/drafts", summary="Chapter drafts (authoring view; never on the packet path)",
            description="Each draft with its status, text and reason, the continuity findings dismissed on it "
                        "(`dismissed`: `finding_id`, `reason`, `source` position, by finding id) and the "
                        "`override_reason` its accept recorded (null: none).")
def list_drafts(request: Request, story: Story, principal: Annotated[Principal, Depends(needs("author"))],
                chapter: Annotated[int | None, Query(ge=1, le=MAX_CHAPTER)] = None,
                status: Literal["submitted", "accepted", "rejected"] | None = None,
                after: After = None) -> Response:
    views = story_views(ctx(request), principal, story, after)
    return json_response({"story_id": story, "drafts": views.drafts(story, chapter, status)})


@router.get("/v1/stories/{story}/drafts/{draft}/check",
            summary="Check a draft against the canon in force at its chapter",
            description="What `canon check --format json` prints: the draft's continuity findings (an entry not yet "
                        "in canon or retired, a spoiler, a field conflict, an unavailable character acting), each "
                        "with the draft's span and the log positions of the canon events that prove it; findings "
                        "dismissed on the draft are listed apart. `200` whatever it finds (`errors` counts the "
                        "error findings). No LLM call unless `provider=gemini` (one metered review; on any failure "
                        "the rules' findings stand and `stages` says so). `after`: read your writes.",
            responses=CHECK_RESPONSES)
def check_draft(request: Request, story: Story, draft: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
                principal: Annotated[Principal, Depends(needs("author"))], after: After = None,
                provider: Literal["offline", "gemini"] = "offline") -> Response:
    context = ctx(request)
    story_views(context, principal, story, after)  # 404 for a story this key may not see, or none
    report = context.reading(context.services.continuity(provider).check, story, draft, after=after, provider=provider)
    return json_response(report.as_dict())
