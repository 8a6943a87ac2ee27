"""The CLI verbs of the service: ``serve``, ``key``, and the read views for people
(``stories``, ``canon``, ``chapter``, ``proposals``, ``drafts``). The same views answer the
HTTP API (``projections.story_views``)."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Callable
from typing import Any

from canon_ledger.domain.api_key import SCOPES
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.cli.parsing import add_verb, bounded


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from canon_ledger.application.keys import Keys
    from canon_ledger.infrastructure.bootstrap import open_store
    from canon_ledger.infrastructure.cli.errors import USAGE, Failure
    from canon_ledger.infrastructure.http.app import create_app
    from canon_ledger.infrastructure.http.protocol import uvicorn_settings

    if args.open and not _loopback(args.host):
        raise Failure(USAGE, f"--open serves without keys and is refused on {args.host}: only on loopback "
                             "(127.0.0.1, ::1)", "open_refused")
    if not args.open:
        store = open_store(args.db)
        try:
            has_keys = Keys(store.ledger).any()
        finally:
            store.close()
        if not has_keys:
            raise Failure(USAGE, "no API key exists: create one (canon key create --scope admin) or, on loopback "
                                 "only, serve with --open", "no_keys")
    app = create_app(args.db, open_access=args.open, worker=args.worker)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # Open event streams end now (their clients reconnect elsewhere with Last-Event-ID):
            # otherwise the graceful shutdown waits its whole timeout for them.
            context = getattr(app.state, "ctx", None)
            if context is not None:
                context.wakeup.close()
            super().handle_exit(sig, frame)

    print(f"canon serve: http://{args.host}:{args.port} (docs at /docs)", file=sys.stderr, flush=True)
    Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log,
                          timeout_graceful_shutdown=10, **uvicorn_settings())).run()
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    from canon_ledger.application.keys import Keys
    from canon_ledger.infrastructure.bootstrap import open_store

    store = open_store(args.db)
    try:
        keys = Keys(store.ledger)
        if args.key_verb == "create":
            token, info = keys.create(args.scope, args.story or [], args.name)
            if args.format == "json":
                print(dumps({"token": token, **info.as_dict()}))
            else:
                print(token)
                print(f"key {info.name}: scope {info.scope}, stories {', '.join(info.stories) or 'all'} "
                      "(the token above is shown once; only its hash is kept)", file=sys.stderr)
        elif args.key_verb == "list":
            listed = keys.list()
            if args.format == "json":
                for k in listed:
                    print(dumps(k.as_dict()))
            for k in listed if args.format != "json" else ():
                print(f"{k.name:<32} {k.scope:<7} {'revoked' if k.revoked else 'live':<8} "
                      f"stories: {', '.join(k.stories) or 'all'}")
        else:
            changed = keys.revoke(args.name)
            if args.format == "json":
                print(dumps({"name": args.name, "revoked": True, "changed": changed}))
            else:
                print(f"key {args.name} {'revoked' if changed else 'was already revoked'}")
    finally:
        store.close()
    return 0


def _with_views(args: argparse.Namespace, read: Callable[[Any], Any]) -> Any:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        return read(services.views())


def _of_story(args: argparse.Namespace, read: Callable[[Any], Any]) -> Any:
    """``read(views)`` for ``args.story``, refused as unknown if it was never started."""
    def checked(views: Any) -> Any:
        if views.story(args.story) is None:
            from canon_ledger.domain.errors import unknown_story

            raise unknown_story(args.story)
        return read(views)

    return _with_views(args, checked)


def _found(value: Any, code: str, message: str, field: str) -> Any:
    from canon_ledger.domain.errors import NotFound

    if value is None:
        raise NotFound(code, message, field)
    return value


def _show(args: argparse.Namespace, body: Any, text: Callable[[Any], None]) -> int:
    if args.format == "json":
        print(dumps(body))
    else:
        text(body)
    return 0


def _in_series(series: dict[str, Any] | None) -> str:
    if series is None:
        return ""
    if series["role"] == "bible":
        return f", bible of series {series['series_id']}"
    return f", book {series['ordinal']} of series {series['series_id']}"


def cmd_stories(args: argparse.Namespace) -> int:
    rows = _with_views(args, lambda v: v.stories())

    def text(rows: list[dict[str, Any]]) -> None:
        if not rows:
            print("no stories")
        for r in rows:
            print(f"{r['story_id']:<20} {r['title'][:40]:<40} chapters {r['chapters']} ({r['chapters_with_text']} "
                  f"with text), volumes {r['volumes']}, entries {r['entries']}, proposals proposed "
                  f"{r['proposals_proposed']}, position {r['position']}{_in_series(r['series'])}")

    return _show(args, {"stories": rows}, lambda body: text(body["stories"]))


def cmd_canon(args: argparse.Namespace) -> int:
    from canon_ledger.application import canon_reads
    from canon_ledger.domain.api_key import Principal

    # The store's own operator reads everything, hidden versions labelled, as GET .../canon
    # answers an admin key (``canon_reads``).
    local = Principal("local-cli", "admin")
    entries = _of_story(args, lambda v: canon_reads.canon_as_of(local, v, args.story, args.as_of, args.kind))

    def text(body: dict[str, Any]) -> None:
        print(f"canon of {args.story} in force as of chapter {args.as_of}: {len(entries)} entries")
        for e in entries:
            flags = f" [{e['state']}]" if e["state"] else ""
            flags += f" hidden until {e['hidden_until']}" if e["hidden_until"] else ""
            home = e.get("inherited_from")
            flags += f" (from {home['story_id']}{'' if home['role'] == 'bible' else ', at its end'})" if home else ""
            print(f"  {e['kind']:<12} {e['key']:<24} v{e['step']} from ch. {e['valid_from']}{flags}  {e['name']}")

    return _show(args, {"story_id": args.story, "as_of": args.as_of, "kind": args.kind, "entries": entries}, text)


def cmd_chapter(args: argparse.Namespace) -> int:
    chapter = _with_views(args, lambda v: _found(v.chapter(args.story, args.number), "unknown_chapter",
                                                 f"chapter {args.number} of story {args.story!r} is not planned",
                                                 "chapter"))

    def text(c: dict[str, Any]) -> None:
        print(f"{args.story} chapter {c['chapter']} (volume {c['volume']}); text "
              f"{'accepted' if c['text_accepted'] else 'not accepted yet'}")
        print(c["goals_text"])
        for s in c["scenes"]:
            print(f"  scene {s['scene_id']}: {s['text'].splitlines()[0]}")
        if c["summary_text"]:
            print("summary: " + c["summary_text"])

    return _show(args, chapter, text)


def cmd_proposals(args: argparse.Namespace) -> int:
    from canon_ledger.domain.canon import PROPOSAL_STATE_ALIASES

    state = PROPOSAL_STATE_ALIASES.get(args.status, args.status) if args.status else None
    rows = _of_story(args, lambda v: v.proposals(args.story, state))

    def text(body: dict[str, Any]) -> None:
        if not rows:
            print("no proposals")
        for p in rows:
            reason = f" ({p['reason']})" if p["reason"] else ""
            print(f"{p['proposal_id']:<24} {p['status']:<9} {p['kind']} {p['key']} from ch. {p['valid_from']}{reason}")

    return _show(args, {"story_id": args.story, "proposals": rows}, text)


def cmd_drafts(args: argparse.Namespace) -> int:
    rows = _of_story(args, lambda v: v.drafts(args.story, args.chapter, args.status))

    def text(body: dict[str, Any]) -> None:
        if not rows:
            print("no drafts")
        for d in rows:
            reason = f" ({d['reason']})" if d["reason"] else ""
            dismissed = f"; {len(d['dismissed'])} finding(s) dismissed" if d.get("dismissed") else ""
            override = f"; accepted over findings: {d['override_reason']}" if d.get("override_reason") else ""
            print(f"chapter {d['chapter']:<5} {d['draft_id']:<24} {d['status']:<9} {len(d['text'].split()):>7} "
                  f"words{reason}{dismissed}{override}")

    return _show(args, {"story_id": args.story, "drafts": rows}, text)


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "serve", common, "serve the HTTP API, the viewer and /mcp (keys required; docs at /docs)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1, loopback only)")
    p.add_argument("--port", type=bounded(0, 65535), default=8750, help="the port (default 8750; 0: any free port)")
    p.add_argument("--open", action="store_true", help="no keys (every caller is admin): refused except on loopback")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="the server's log level (default info)")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True,
                   help="log each request line (never its headers, so never a token)")
    p.add_argument("--worker", action=argparse.BooleanOptionalAction, default=True,
                   help="run a projection worker in the server (default); --no-worker leaves the knowledge, "
                        "keyword and vector models to separate `canon worker` processes")
    p.set_defaults(run=cmd_serve)

    p = add_verb(verbs, "key", common, "create, list or revoke API keys (only a token's SHA-256 is stored)")
    keys = p.add_subparsers(dest="key_verb", required=True, metavar="create|list|revoke")
    k = add_verb(keys, "create", common, "a new key; prints its token once")
    k.add_argument("--scope", required=True, choices=SCOPES,
                   help="worker: packets, canon views, search, audit; author: also commands, ingest, drafts and "
                        "proposals; admin: also rebuild, compile, keys, quota")
    k.add_argument("--story", action="append", metavar="S", help="limit the key to this story (repeat for several)")
    k.add_argument("--name", help="a unique name (default: scope and a hash prefix)")
    k = add_verb(keys, "list", common, "every key, revoked ones included (never a token)")
    k = add_verb(keys, "revoke", common, "revoke a key by name")
    k.add_argument("name", metavar="NAME", help="the key's name (see `canon key list`)")
    p.set_defaults(run=cmd_key)

    p = add_verb(verbs, "stories", common, "every story with its counts")
    p.set_defaults(run=cmd_stories)

    p = add_verb(verbs, "canon", common, "confirmed canon in force as of a chapter (nothing hidden until later)")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--as-of", type=bounded(1, MAX_CHAPTER), default=MAX_CHAPTER, metavar="K",
                   help="chapter (default: the latest)")
    p.add_argument("--kind", help="only this kind (character, location, item, world_rule, thread, ...)")
    p.set_defaults(run=cmd_canon)

    p = add_verb(verbs, "chapter", common, "one chapter: goals, scene cards, summary, text status")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("number", type=bounded(1, MAX_CHAPTER), metavar="N", help=f"chapter number, 1..{MAX_CHAPTER:,}")
    p.set_defaults(run=cmd_chapter)

    p = add_verb(verbs, "proposals", common, "canon proposals and their status")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--status", choices=("proposed", "confirmed", "rejected", "pending"),
                   help="only proposals in this state: proposed (awaiting an author's decision), confirmed or "
                        "rejected (pending: the same as proposed)")
    p.set_defaults(run=cmd_proposals)

    p = add_verb(verbs, "drafts", common, "chapter drafts and their status")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--chapter", type=bounded(1, MAX_CHAPTER), help="only this chapter's drafts")
    p.add_argument("--status", choices=("submitted", "accepted", "rejected"), help="only drafts in this status")
    p.set_defaults(run=cmd_drafts)
