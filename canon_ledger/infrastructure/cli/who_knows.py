"""``canon secrets`` and ``canon knowledge``: who knows what, as of a chapter, read
through ``application.who_knows`` as the HTTP API, MCP and the viewer read it. The store's own
operator reads everything, hidden entries labelled (as ``canon canon`` does)."""

from __future__ import annotations

import argparse
from typing import Any

from canon_ledger.domain.bounds import MAX_CHAPTER, MAX_ID
from canon_ledger.infrastructure.cli.errors import OK
from canon_ledger.infrastructure.cli.parsing import add_verb, an_id, bounded
from canon_ledger.infrastructure.jsonout import dumps

HOW = 48  # characters of a record's `how` shown in the text output


def _read(args: argparse.Namespace, read: Any) -> dict[str, Any]:
    from canon_ledger.domain.api_key import Principal
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        result: dict[str, Any] = read(Principal("local-cli", "admin"), services.views())
        return result


def _cut(text: str, most: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[:most - 3] + "..."


def _label(e: dict[str, Any], hidden: bool = True) -> str:
    said = f" [{e['reason']}]" if hidden and e.get("hidden") else ""
    return f"{e['kind']} {e['key']}" + (f" ({e['name']})" if e["name"] and e["name"] != e["key"] else "") + said


def secrets_lines(d: dict[str, Any]) -> list[str]:
    """A readable table: each secret, then who knows it (since which chapter, how)."""
    out = [f"secrets of {d['story_id']} as of chapter {d['as_of']}: {len(d['secrets'])}"]
    for s in d["secrets"]:
        out.append(f"  {_label(s)}, secret from ch. {s['valid_from']} (v{s['step']}, position {s['source']})")
        if not s["known_by"]:
            out.append("      known by nobody yet")
        for k in s["known_by"]:
            who = k["character"] + (f" ({k['name']})" if k["name"] != k["character"] else "")
            out.append(f"      {who:<28} since ch. {k['chapter']:<6} {_cut(k['how'], HOW)}  [position {k['source']}]")
    return out


def knowledge_lines(d: dict[str, Any]) -> list[str]:
    """A readable table: since which chapter, the entry, whether it is a secret, how."""
    who = d["character"] + (f" ({d['name']})" if d["name"] != d["character"] else "")
    out = [f"what {who} knows in {d['story_id']} as of chapter {d['as_of']}: {len(d['knows'])} entr"
           f"{'y' if len(d['knows']) == 1 else 'ies'}"]
    if d["knows"]:
        out.append(f"  {'since':<10} {'entry':<40} {'secret':<7} how")
    for k in d["knows"]:
        flag = "yes" if k["secret"] else ("retired" if k["retired"] else "no")
        hidden = f" [{k['reason']}]" if k["hidden"] else ""
        out.append(f"  ch. {k['chapter']:<6} {_cut(_label(k, hidden=False), 40):<40} {flag:<7} {_cut(k['how'], HOW)}  "
                   f"[position {k['source']}]{hidden}")
    return out


def _show(args: argparse.Namespace, body: dict[str, Any], lines: Any) -> int:
    if args.format == "json":
        print(dumps(body))
    else:
        for line in lines(body):
            print(line)
    return OK


def cmd_secrets(args: argparse.Namespace) -> int:
    from canon_ledger.application import who_knows

    body = _read(args, lambda principal, views: who_knows.secrets(principal, views, args.story, args.as_of))
    return _show(args, body, secrets_lines)


def cmd_knowledge(args: argparse.Namespace) -> int:
    from canon_ledger.application import who_knows

    body = _read(args, lambda principal, views: who_knows.character_knowledge(principal, views, args.story,
                                                                              args.character, args.as_of))
    return _show(args, body, knowledge_lines)


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    def as_of(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as-of", type=bounded(1, MAX_CHAPTER), metavar="K",
                       help=f"the chapter, 1..{MAX_CHAPTER:,} (default: the story's latest planned chapter)")

    p = add_verb(verbs, "secrets", common, "who knows what: the secrets in force as of a chapter and who knows each",
                 "The entries whose version in force as of chapter K is a secret (fields.secret), each with\n"
                 "the characters who know it then (record_knowledge of a chapter up to K: since which\n"
                 "chapter, how, the record's log position).")
    p.add_argument("--story", required=True, help="the story id")
    as_of(p)
    p.set_defaults(run=cmd_secrets)

    p = add_verb(verbs, "knowledge", common, "what one character knows as of a chapter (secrets marked)",
                 "Every knowledge record of a character from a chapter up to K (record_knowledge), with the\n"
                 "known entry's name and whether its version in force at K is a secret.")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--character", required=True, type=an_id(MAX_ID), metavar="KEY", help="the character's key")
    as_of(p)
    p.set_defaults(run=cmd_knowledge)
