"""Packets and the read models they are compiled from: ``packet`` compiles a worker's packet,
``audit`` replays history to reproduce an issued one, ``rebuild`` builds the read models anew
(into new tables while the current ones serve)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from canon_ledger.domain.bounds import MAX_BUDGET, MAX_CHAPTER, MAX_ID, MAX_POSITION
from canon_ledger.domain.story import DEFAULT_BUDGETS, ROLES
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, Failure
from canon_ledger.infrastructure.cli.output import catch_up_watch, emit
from canon_ledger.infrastructure.cli.parsing import add_verb, an_id, bounded

BUDGETS_HELP = ", ".join(f"{role} {budget:,}" for role, budget in DEFAULT_BUDGETS.items())


def cmd_packet(args: argparse.Namespace) -> int:
    from canon_ledger.application.packets.render import render_text
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        services.watch = catch_up_watch(args)  # L1's own catch-up of a backlog: a bar, then a line on stderr
        request = Request(args.story, args.role, args.chapter, args.scene, args.budget, args.draft)
        packet = services.packet(request, after=args.after, at=args.at, record=not args.no_record)
    print(packet.to_json() if args.format == "json" else render_text(packet))
    # Not in the packet: its bytes are hashed, the same whichever request caught the indexes up.
    note = services.watch.note("before this packet's L1 retrieval (not part of the packet)")
    if note:
        print(note, file=sys.stderr)
    return OK


def cmd_audit(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        report = services.auditor.audit(args.packet_id)
    if args.format == "json":
        emit(report.as_dict())
    else:
        verdict = "OK" if report.ok else "MISMATCH"
        print(f"audit {report.packet_id}: {verdict}")
        print(f"  replayed {report.replayed_events} events of story {report.story_id} up to position {report.position}")
        print(f"  recorded hash {report.recorded_hash}")
        print(f"  replayed hash {report.replayed_hash}")
        print(f"  live read model: {report.live}")
        for line in report.differences:
            print(f"  differs: {line}")
        print("  lineage:")
        for item, lineage in report.items:
            print(f"    {item.tier} {item.kind} {item.key} [{item.status}]")
            for src in lineage:
                who = f"{src.command_type} {src.command_id}" if src.command_id else "command unknown"
                print(f"      <- {src.position} {src.type} ({who})")
    if not report.ok:
        raise Failure(REJECTED, f"packet {report.packet_id} does not reproduce: " + (
            report.live if report.recorded_hash == report.replayed_hash else "the replayed hash differs"),
            "audit_mismatch")
    return OK


def cmd_rebuild(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    with bootstrap(args.db, page_size=args.page_size) as services:
        names = services.named_models(args.projection)
        reports = []
        for name in names:
            models = services.read_models[name]
            with bar(f"rebuild {name}", "pos", disable=quiet(args.format),
                     total=max(services.ledger.event_log.position(), 1)) as shown:
                reports.append(models.rebuild(lambda reached, goal: bar_to(shown, reached, goal),
                                              pause=args.pause / 1000, recount=args.recount))
    for report in reports:
        if args.format == "json":
            emit(report.as_dict())
        else:
            d = report.as_dict()
            print(f"rebuilt {d['projection']}: {d['old']} -> {d['new']}{' (resumed)' if d['resumed'] else ''}, "
                  f"{d['events']} positions in {d['seconds']} s ({d['events_per_second']} /s), now at {d['position']}")
    return OK


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "packet", common, "compile a worker's token-budgeted context packet from confirmed canon",
                 "Compile a worker's context packet from confirmed canon only (drafts and unconfirmed\n"
                 "proposals never reach one), filled by tier P0..P4 within the token budget.\n"
                 f"Default budgets in tokens: {BUDGETS_HELP}\n"
                 "(a story's start_story may set its own).\n"
                 "The qa packet is the canon a draft is checked against. With --draft D it also holds that\n"
                 "submitted draft in P0, labelled unconfirmed (draft_under_review), and recalls the canon\n"
                 "the draft mentions; no other packet ever holds a draft.")
    p.add_argument("--story", required=True, help="the story id")
    p.add_argument("--role", required=True, choices=ROLES,
                   help="the worker the packet is for: " + ", ".join(ROLES) + " (planner, writer and qa also get "
                        "L1 retrieval from earlier chapters)")
    p.add_argument("--chapter", required=True, type=bounded(1, MAX_CHAPTER), help=f"chapter number, 1..{MAX_CHAPTER:,}")
    p.add_argument("--scene", help="only this scene card's keys (default: every scene of the chapter)")
    p.add_argument("--budget", type=bounded(0, MAX_BUDGET),
                   help=f"token budget, 0..{MAX_BUDGET:,} (default: the story's budget for the role)")
    p.add_argument("--after", type=bounded(0, MAX_POSITION), metavar="POSITION",
                   help="reflect at least this log position (one a write returned); it does not wait for later "
                        "writes, and a position beyond the log is refused (default: everything applied)")
    p.add_argument("--draft", type=an_id(MAX_ID), metavar="DRAFT_ID",
                   help="qa only: the submitted draft under review, put in P0 as unconfirmed text (an accepted or "
                        "rejected draft is refused)")
    p.add_argument("--no-record", action="store_true", help="do not record PacketIssued in the log")
    p.add_argument("--at", type=bounded(0, MAX_POSITION), metavar="POSITION",
                   help="the packet as it would have been at this past log position (replayed; not recorded)")
    p.set_defaults(run=cmd_packet)

    p = add_verb(verbs, "audit", common, "replay history to reproduce an issued packet, and show each item's lineage")
    p.add_argument("packet_id", metavar="PACKET_ID", help="a packet's id (pkt_...), from its packet_id field")
    p.set_defaults(run=cmd_audit)

    p = add_verb(verbs, "rebuild", common,
                 "rebuild read models into new tables while the current ones serve, then switch")
    p.add_argument("--projection", choices=("canon", "authoring", "knowledge", "retrieval", "vectors", "all"),
                   default="all", help="the read model to rebuild (default: all)")
    p.add_argument("--pause", type=bounded(0, 60_000), default=0, metavar="MS",
                   help="sleep between pages, to leave room for live traffic")
    p.add_argument("--page-size", type=bounded(1, 100_000), metavar="N",
                   help="events per transaction, 1..100,000 (default: each read model's own size)")
    p.add_argument("--recount", action="store_true",
                   help="a repair: count every token afresh (empty the token-count memo) and start a new build "
                        "even if one was left unfinished")
    p.set_defaults(run=cmd_rebuild)
