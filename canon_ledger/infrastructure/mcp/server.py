"""The MCP server: ``AgentTools`` as MCP tools and resources, with structured errors.

One server definition serves both doors: ``canon mcp`` (stdio, the caller is the process's
own principal) and ``/mcp`` in ``canon serve`` (streamable HTTP, the caller is the bearer
key the door authenticated, handed over in the request's ASGI state).

Errors: a tool that fails answers ``isError: true`` with ``structuredContent`` ``{"error":
{code, message, field, status}}``, the codes and messages of the HTTP API's problem+json
(arguments that fail the schema are ``invalid_field``, naming the field, never echoing the
value). A resource that fails raises a JSON-RPC error whose ``data`` carries the same object.
Nothing a caller sends ends the session, and no trace, SQL or key reaches the caller.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from canon_ledger.domain import bounds as b
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.commands import (Alias, CanonText, CollectionId, Fields, Id, Key, Kind, Name, Number, Role,
                                          StoryId)
from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.http.problems import Problem, status_of
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.mcp.tools import AgentTools
from canon_ledger.infrastructure.store_faults import is_store_fault, scrubbed

log = logging.getLogger("canon.mcp")
PRINCIPAL = "canon_principal"  # the ASGI state key the HTTP door puts the caller under

INSTRUCTIONS = """\
Canon Ledger keeps a serial novel's confirmed canon (characters, locations, items, threads, world
rules, timeline) as an append-only log, and compiles token-budgeted context packets from it.
Before writing or planning chapter N, call get_packet(story, role, chapter=N): it holds only
confirmed canon, as of that chapter, within the role's token budget. Use search for passages of
the story's chapters (collection "story:<story>") or of ingested notes, list_canon / canon_entry
for what is established as of a chapter, open_threads for what is unresolved, character_knowledge
and secrets for who knows what as of a chapter (write a point-of-view character acting only on what
it knows), check_draft(story, draft) for a submitted draft's contradictions of canon (with
evidence). If you invent or
discover a fact that should become canon, call propose_canon: a person reviews and confirms it;
you cannot confirm, reject or retire canon. Errors come back as {"error": {code, message, field}}:
fix the named field and retry."""

StoryArg = Annotated[StoryId, Field(description="The story id (list_stories names them).")]
ChapterArg = Annotated[Number, Field(description=f"A chapter number, 1..{b.MAX_CHAPTER:,}.")]
AsOf = Annotated[Number, Field(description="Only canon in force as of this chapter (no later spoilers).")]
KindArg = Annotated[Kind, Field(description="The entry's kind.")]
KeyArg = Annotated[Key, Field(description="The entry's stable key within its kind (e.g. a slug of the name).")]
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
PROPOSE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def error_of(e: Exception) -> dict[str, Any]:
    """The structured error for what a tool or a resource raised: ``{code, message, field,
    status}``, the API's codes. Arguments that fail a schema (``ValidationError``) are
    ``invalid_field``, naming fields only, never the values (they may be megabytes of text,
    or secrets). A store fault is ``store_unavailable``; anything else ``internal_error``,
    logged here with its trace and a reference."""
    if isinstance(e, Problem):
        status, code, message, field = e.status, e.code, e.detail, e.field
    elif isinstance(e, CanonError):
        status, code, message, field = status_of(e), e.code, e.message, e.field
    elif isinstance(e, ValidationError):
        errors = e.errors(include_input=False, include_url=False)
        first = errors[0] if errors else {"loc": (), "msg": "invalid arguments"}
        status, code, field = 422, "invalid_field", ".".join(str(p) for p in first.get("loc", ())) or None
        message = "; ".join(f"{'.'.join(str(p) for p in err.get('loc', ())) or 'arguments'}: {err.get('msg')}"
                            for err in errors[:5])
    elif is_store_fault(e):
        log.warning("store unavailable: %s", scrubbed(e, None))
        status, code, message, field = 503, "store_unavailable", f"the store is unavailable: {scrubbed(e, None)}", None
    else:
        ref = uuid.uuid4().hex[:12]
        log.error("internal error %s in an MCP tool or resource", ref, exc_info=e)
        status, code, field = 500, "internal_error", None
        message = f"an internal error occurred (reference {ref} in the server log)"
    return {"code": code, "message": message, "field": field, "status": status}


def failure(error: dict[str, Any]) -> CallToolResult:
    """A tool's failure: ``isError``, with ``{"error": ...}`` as text and as structured content."""
    body = {"error": error}
    return CallToolResult(content=[TextContent(type="text", text=dumps(body))], structured_content=body,
                          is_error=True)


def _answered(run: Callable[[], Any], *, structured: bool = True) -> CallToolResult:
    """``run()``'s answer as a tool result: JSON text (a ``str`` is sent as is: it is JSON
    already) and, with ``structured``, the same object as structured content; or the
    structured error. A packet goes as text only: its bytes are the contract (the API's), and
    a second copy as structured content would double what every call encodes, sends and
    validates (docs/benchmarks.md)."""
    try:
        value = run()
    except Exception as e:  # noqa: BLE001 - answered, never raised into the session
        return failure(error_of(e))
    text = value if isinstance(value, str) else dumps(value)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=json.loads(text) if structured else None)


def _read(run: Callable[[], Any]) -> str:
    """``run()``'s answer as a resource's JSON text; a failure is a JSON-RPC error whose
    ``data`` is the structured error: invalid params for what the caller asked wrongly or for
    what does not exist (as the SDK does), internal for a server fault."""
    try:
        value = run()
    except Exception as e:  # noqa: BLE001 - a JSON-RPC error, never a crash of the session
        error = error_of(e)
        raise MCPError(code=INVALID_PARAMS if error["status"] < 500 else INTERNAL_ERROR,
                       message=f"{error['code']}: {error['message']}", data=error) from None
    return value if isinstance(value, str) else dumps(value)


class CanonMCP(MCPServer):
    """``MCPServer`` whose argument-validation failures are structured errors too."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # the SDK logs it and answers a generic error: nothing of it reaches the caller
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                return failure(error_of(e.__cause__))
            if self._tool_manager.get_tool(name) is None:
                return failure({"code": "unknown_tool", "message": f"no tool {name[:100]!r}; list_tools names them",
                                "field": "name", "status": 404})
            raise


def build_server(tools: Callable[[], AgentTools],
                 local: Principal | Callable[[], Principal] | None = None) -> CanonMCP:
    """The server. ``tools``: the agent tools (called per request: over HTTP they exist only
    once the app's lifespan opened the store). ``local``: the caller when a request carries
    none (stdio), or how to find it at each call (a key checked again each time, so that its
    revocation reaches an open session); None refuses such requests."""

    def caller(ctx: Context) -> Principal:
        request = ctx.request_context.request
        scope = getattr(request, "scope", None)
        if isinstance(scope, dict):
            principal = scope.get("state", {}).get(PRINCIPAL)
        else:
            principal = local() if callable(local) else local
        if principal is None:
            raise Problem(401, "unauthenticated", "send an API key: Authorization: Bearer <token> (canon key create)")
        return principal

    server = CanonMCP("canon-ledger", title="Canon Ledger", instructions=INSTRUCTIONS, version="1")

    @server.tool(annotations=READ)
    def list_stories(ctx: Context) -> CallToolResult:
        """The stories this key may see, with their titles and counts (chapters, entries, proposals
        awaiting review: proposals_proposed)."""
        return _answered(lambda: tools().stories(caller(ctx)))

    @server.tool(annotations=READ)
    def get_packet(story: StoryArg, role: Annotated[Role, Field(description=(
                       "Who the packet is for: planner (plans chapters), writer (writes a chapter), qa (checks a "
                       "draft against canon), summarizer (summarises a written chapter), chat (answers questions)."))],
                   chapter: Annotated[Number, Field(description="The chapter being planned, written or checked.")],
                   ctx: Context,
                   scene: Annotated[Id | None, Field(description=(
                       "Only this scene card's keys (default: every scene of the chapter)."))] = None,
                   budget: Annotated[int | None, Field(ge=0, le=b.MAX_BUDGET, description=(
                       "Token budget (default: the story's budget for the role)."))] = None,
                   after: Annotated[int | None, Field(ge=0, le=b.MAX_POSITION, description=(
                       "A log position an earlier answer gave: the packet reflects at least that."))] = None,
                   draft: Annotated[Id | None, Field(description=(
                       "Role qa only: the id of the submitted draft to check. It is put in P0, labelled as "
                       "unconfirmed text (not canon), and canon it mentions is recalled."))] = None,
                   ) -> CallToolResult:
        """The context packet for one worker call: confirmed canon only, as of the chapter, in tiers
        P0 (hard constraints) to P4 (supplementary), within a token budget. Every item says why it is
        there. The answer's text is the packet JSON, exactly what the HTTP API's packet endpoint
        returns; the call is recorded, so `audit_packet(packet_id)` can reproduce it later (a
        worker key's, up to a number a minute: past it the answer's _meta says recorded: false)."""
        issued: list[bool] = []

        def run() -> str:
            text, recorded = tools().issue_packet(caller(ctx), story, role, chapter, scene, budget, after, draft)
            issued.append(recorded)
            return text

        result = _answered(run, structured=False)
        if issued:
            result.meta = {"recorded": issued[0]}
        return result

    @server.tool(annotations=READ)
    def search(collection: Annotated[CollectionId, Field(description=(
                   'The collection: "story:<story>" for a story\'s accepted chapters, or an ingested '
                   "collection's id."))],
               query: Annotated[str, Field(min_length=1, max_length=10_000, description="What to look for.")],
               ctx: Context,
               top: Annotated[int, Field(ge=1, le=1000, description="How many chunks to return.")] = 8,
               as_of: Annotated[int | None, Field(ge=1, le=b.MAX_CHAPTER, description=(
                   'The chapter you are reading or writing: a "story:<story>" collection returns only chunks of '
                   "chapters up to it (default for a worker key: the story's latest planned chapter)."))] = None,
               ) -> CallToolResult:
        """Hybrid keyword + semantic search of a knowledge collection. Returns ranked chunks, each with
        its document, heading path and source, and the stages the search went through."""
        return _answered(lambda: tools().search(caller(ctx), collection, query, top, as_of))

    @server.tool(annotations=READ)
    def canon_entry(story: StoryArg, kind: KindArg, key: KeyArg, ctx: Context,
                    as_of: Annotated[int | None, Field(ge=1, le=b.MAX_CHAPTER, description=(
                        "Only what is known as of this chapter: the version in force then, no later ones."))] = None,
                    ) -> CallToolResult:
        """One confirmed canon entry: its versions (valid_from, text, aliases, state), retirement and
        the chapters whose scene cards tag it. A version hidden until a later chapter than the one
        read (as_of, default the story's latest planned chapter) says hidden: true and why; below
        author scope it is listed without its text, as a packet lists it."""
        return _answered(lambda: tools().canon_entry(caller(ctx), story, kind, key, as_of))

    @server.tool(annotations=READ)
    def list_canon(story: StoryArg, as_of: AsOf, ctx: Context,
                   kind: Annotated[Kind | None, Field(description="Only this kind.")] = None) -> CallToolResult:
        """Every confirmed entry in force as of a chapter (retired ones left out), by kind and key. One
        hidden until a later chapter says hidden: true and why; below author scope it is listed
        without its text, as a packet for that chapter lists it."""
        return _answered(lambda: tools().list_canon(caller(ctx), story, as_of, kind))

    @server.tool(annotations=READ)
    def open_threads(story: StoryArg, chapter: ChapterArg, ctx: Context) -> CallToolResult:
        """Plot threads in force as of a chapter whose state is not resolved."""
        return _answered(lambda: tools().open_threads(caller(ctx), story, chapter))

    @server.tool(annotations=READ)
    def character_knowledge(story: StoryArg, character: Annotated[Key, Field(description=(
                                "The character's key (a confirmed character of the story)."))],
                            ctx: Context,
                            as_of: Annotated[int | None, Field(ge=1, le=b.MAX_CHAPTER, description=(
                                "The chapter (default: the story's latest planned chapter)."))] = None,
                            ) -> CallToolResult:
        """What one character knows as of a chapter: every entry it was recorded as knowing from a
        chapter up to it (since which chapter, how), with the entry's name and whether it is a secret
        then. Write a character acting only on what it knows. Below author scope an entry hidden until
        a later chapter is left out. The same JSON as the HTTP API's character knowledge."""
        return _answered(lambda: tools().character_knowledge(caller(ctx), story, character, as_of))

    @server.tool(annotations=READ)
    def secrets(story: StoryArg, ctx: Context,
                as_of: Annotated[int | None, Field(ge=1, le=b.MAX_CHAPTER, description=(
                    "The chapter (default: the story's latest planned chapter)."))] = None,
                ) -> CallToolResult:
        """The secrets in force as of a chapter (entries marked secret) and, for each, who knows it then
        (since which chapter, how). Below author scope a secret hidden until a later chapter is listed
        without its name or text, and who knows it is withheld. The same JSON as the HTTP API's secrets."""
        return _answered(lambda: tools().secrets(caller(ctx), story, as_of))

    @server.tool(annotations=PROPOSE)
    def propose_canon(story: StoryArg, kind: KindArg, key: KeyArg,
                      name: Annotated[Name, Field(description="The entry's display name.")],
                      text: Annotated[CanonText, Field(description="What is true of it, as prose.")],
                      valid_from: Annotated[Number, Field(description="The first chapter it holds in.")],
                      ctx: Context,
                      aliases: Annotated[list[Alias], Field(max_length=b.MAX_LIST, description=(
                          "Other names it goes by."))] = [],  # noqa: B006 - never mutated; the schema's default
                      fields: Annotated[Fields | None, Field(description=(
                          'Structured facts, e.g. {"state": "open"} for a thread.'))] = None,
                      ) -> CallToolResult:
        """Suggest a new canon entry, or a revision of one (same kind and key), for a person to review.
        It stays proposed, and out of every packet, until an author confirms it; you cannot confirm it.
        Asking again with the same content is a duplicate and changes nothing. Returns the
        proposal_id and how a person confirms it."""
        return _answered(lambda: tools().propose_canon(caller(ctx), story, kind, key, name, text, valid_from,
                                                       aliases, fields))

    @server.tool(annotations=READ)
    def check_draft(story: StoryArg, draft: Annotated[Id, Field(description=(
                        "The id of the draft to check (a worker key: a submitted one)."))],
                    ctx: Context) -> CallToolResult:
        """Check a draft against the confirmed canon in force at its chapter, with no LLM call: an
        entry not yet in canon or retired, a spoiler of what canon hides until later, a fact stated
        otherwise than canon says, a dead, missing or imprisoned character acting. Each finding has
        its severity (error or warning), the draft's span (character offsets) and the canon evidence
        with the log position of the event that proves it; `errors` counts the error findings. The
        same JSON as the HTTP API's draft check."""
        return _answered(lambda: tools().check_draft(caller(ctx), story, draft))

    @server.tool(annotations=READ)
    def audit_packet(packet_id: Annotated[Id, Field(description=(
                         "The packet_id a get_packet answer carried."))], ctx: Context) -> CallToolResult:
        """Replay the log to the position an issued packet was compiled at and compare: ok when the
        packet is reproduced byte for byte, else what differs."""
        return _answered(lambda: tools().audit_packet(caller(ctx), packet_id))

    @server.resource("canon://{story}/packet/{role}/{chapter}{?scene,budget}", name="packet",
                     mime_type="application/json",
                     description="A role's context packet for a chapter (the get_packet tool's JSON).")
    def packet_resource(story: str, role: str, chapter: str, ctx: Context, scene: str | None = None,
                        budget: str | None = None) -> str:
        def run() -> str:
            args = _resource_args(story=story, role=role, chapter=chapter, scene=scene, budget=budget)
            assert args.role is not None and args.chapter is not None  # the URI template fills them
            return tools().get_packet(caller(ctx), args.story, args.role, args.chapter, args.scene, args.budget)

        return _read(run)

    @server.resource("canon://{story}/entry/{kind}/{key}{?as_of}", name="entry", mime_type="application/json",
                     description="One canon entry's versions; with as_of, only what is known as of that chapter.")
    def entry_resource(story: str, kind: str, key: str, ctx: Context, as_of: str | None = None) -> str:
        def run() -> Any:
            args = _resource_args(story=story, kind=kind, key=key, as_of=as_of)
            assert args.kind is not None and args.key is not None  # the URI template fills them
            return tools().canon_entry(caller(ctx), args.story, args.kind, args.key, args.as_of)

        return _read(run)

    return server


class ResourceArgs(BaseModel):
    """A resource URI's parameters (text), checked and converted with the tools' own types."""

    model_config = ConfigDict(extra="forbid")
    story: StoryId
    role: Role | None = None
    chapter: Annotated[int, Field(ge=1, le=b.MAX_CHAPTER)] | None = None
    scene: Id | None = None
    budget: Annotated[int, Field(ge=0, le=b.MAX_BUDGET)] | None = None
    kind: Kind | None = None
    key: Key | None = None
    as_of: Annotated[int, Field(ge=1, le=b.MAX_CHAPTER)] | None = None


def _resource_args(**values: str | None) -> ResourceArgs:
    return ResourceArgs.model_validate({k: v for k, v in values.items() if v is not None})
