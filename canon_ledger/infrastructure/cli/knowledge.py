"""Knowledge collections and their wiki: ``ingest`` documents into a collection, ``search``
it (hybrid keyword and semantic, with its stages), ``compile`` stale wiki pages within the LLM
quota, ``lint`` the wiki, and the ``quota`` itself."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from canon_ledger.application.command_reader import read_value
from canon_ledger.application.retrieval.feedback import MODES as FEEDBACK_MODES
from canon_ledger.domain.document import title_of
from canon_ledger.infrastructure.cli.errors import OK, REJECTED, USAGE, Failure, unavailable_provider_as_usage
from canon_ledger.infrastructure.cli.output import catch_up_watch, emit
from canon_ledger.infrastructure.cli.parsing import add_verb, bounded

INGESTIBLE = (".md", ".markdown", ".txt", ".text")


def _documents(paths: list[str]) -> list[tuple[str, Path]]:
    """(document id, file) for files and folders. A folder's files are named by their path
    relative to the folder, a named file by its path relative to the working directory (its
    absolute path outside it): stable across runs, unique within a call. Two inputs that would
    share an id are refused before anything is written."""
    found: list[tuple[str, Path]] = []
    cwd = Path.cwd().resolve()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in INGESTIBLE)
            found += [(p.relative_to(path).as_posix(), p) for p in files]
        elif path.is_file():
            resolved = path.resolve()
            found.append((resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd)
                          else resolved.as_posix(), path))
        else:
            raise Failure(USAGE, f"cannot read {raw}: no such file or folder", "unreadable_input")
    seen: dict[str, Path] = {}
    for doc_id, path in found:
        other = seen.setdefault(doc_id, path)
        if other != path and other.resolve() != path.resolve():
            raise Failure(USAGE, f"{other} and {path} would both be document {doc_id!r} of the collection; "
                                 "ingest them in separate calls or from folders that keep them apart",
                          "document_id_collision")
    unique = {doc_id: path for doc_id, path in found}  # one file named twice is ingested once
    return list(unique.items())


def cmd_ingest(args: argparse.Namespace) -> int:
    import uuid

    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    documents = _documents(args.paths)
    with bootstrap(args.db) as services:
        counts: dict[str, int] = {}
        failed: list[dict[str, Any]] = []
        silent = quiet(args.format)
        shown = bar(f"ingest {args.collection}", "doc", disable=silent, total=len(documents))
        for doc_id, path in documents:
            shown.update(1)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                failed.append({"document_id": doc_id, "status": "rejected",
                               "error": {"code": "unreadable_file", "message": str(e), "field": "path"}})
                if args.format == "json":
                    emit(failed[-1])
                continue
            command = read_value({"type": "ingest_document", "command_id": f"ingest-{uuid.uuid4().hex}",
                                  "collection_id": args.collection, "document_id": doc_id,
                                  "title": title_of(doc_id, text), "text": text})
            [result] = services.ledger.apply([command])
            counts[result.status] = counts.get(result.status, 0) + 1
            body = {"document_id": doc_id, **result.as_dict()}
            body.pop("index", None)
            if not result.ok:
                failed.append(body)
            if args.format == "json":
                emit(body)
        shown.close()
        # Index and embed now, so the first search does not pay for the backlog.
        with bar("embed", "text", disable=silent) as shown:
            services.catch_up_retrieval(progress=lambda done, total: bar_to(shown, done, total))
    if args.format != "json":
        print(f"{len(documents)} document(s) into {args.collection}: "
              + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing"))
        for f in failed:
            print(f"  {f['document_id']}: {f['error']['code']}: {f['error']['message']}")
    if failed:
        raise Failure(REJECTED, f"{len(failed)} of {len(documents)} documents not ingested", "not_ingested",
                      reported=True)
    return OK


def cmd_search(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    if not args.query.strip():
        raise Failure(USAGE, "the query is empty", "empty_query")
    if args.top < 1:
        raise Failure(USAGE, f"--top must be at least 1, not {args.top}", "invalid_field")

    with bootstrap(args.db) as services:
        with unavailable_provider_as_usage():
            service = services.search_service(args.provider)
        known = services.collections()
        unknown = [c for c in args.collection if c not in known]
        if unknown:
            raise Failure(USAGE, f"no documents in collection {', '.join(unknown)} "
                                 f"(known: {', '.join(sorted(known)) or 'none'})", "unknown_collection")
        services.watch = catch_up_watch(args)
        result = service.search(args.collection, args.query, args.top, feedback=args.feedback)
    note = services.watch.note("first") if services.watch is not None else None
    if note:  # a search's stages are not hashed: the catch-up it paid for is one of them
        from canon_ledger.application.packets.packet import Stage

        result.stages.insert(0, Stage("catch-up", "done", note))
    if args.format == "json":
        emit(result.as_dict())
        return OK
    print(f"search {args.query!r} in {', '.join(result.collections)} at position {result.position}: "
          f"{len(result.hits)} hit(s)")
    for n, hit in enumerate(result.hits, start=1):
        score = "" if hit.score is None else f"  score {hit.score:.3f}"
        flag = "  STALE (last good TLDR)" if hit.stale else ""
        print(f"{n:>3}. [{hit.kind}] {hit.id}{score}{flag}  sources {hit.sources[:5]}")
        body = " | ".join(line for line in hit.text.splitlines() if line.strip())
        print(f"     {body[:300]}{' ...' if len(body) > 300 else ''}")
    print("stages:")
    for stage in result.stages:
        print(f"  {stage.step:<10} {stage.status:<8} {stage.detail}")
    return OK


def cmd_compile(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap
    from canon_ledger.infrastructure.progress import bar, bar_to, quiet

    with bootstrap(args.db) as services:
        with unavailable_provider_as_usage():
            compiler = services.compiler(args.provider)
        with bar("compile", "page", disable=quiet(args.format)) as shown:
            report = compiler.nightly(args.budget, args.collection, lambda done, total: bar_to(shown, done, total))
    if args.format == "json":
        emit(report.as_dict())
    else:
        d = report.as_dict()
        print(f"compiled {d['compiled']} page(s), skipped {d['skipped']}, failed {d['failed']}; "
              f"{d['remaining_stale']} still stale; stopped: {d['stopped_reason']}"
              + (f" ({d['detail']})" if d["detail"] else ""))
    return OK


def cmd_lint(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        report = services.lint(args.collection)
    if args.format == "json":
        emit(report.as_dict())
    else:
        state = "green" if report.green else f"{len(report.issues)} issue(s)"
        print(f"lint: {state} ({report.pages} page(s), {report.uncompiled_topics} topic(s) not compiled yet)")
        for issue in report.issues:
            print(f"  {issue.code}: {issue.topic_id}: {issue.detail}")
    if not report.green:
        raise Failure(REJECTED, f"lint is not green: {len(report.issues)} issue(s)", "lint_not_green")
    return OK


def cmd_quota(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with bootstrap(args.db) as services:
        status = services.quota.status(args.provider)
    if args.format == "json":
        emit(status)
    else:
        g, e = status["generate"], status["embed"]
        print(f"{status['provider']} on {status['day']} (resets {status['resets_at']}):")
        print(f"  generate: {g['spent']} spent, {g['left']} left of {g['cap']} (compile: {g['compile_spent']} of {g['compile_cap']})")
        print(f"  embed:    {e['spent']} spent, {e['left']} left of {e['cap']}")
        print(f"  refused:  {status['refused']}" + (f"; exhausted: {status['exhausted']}" if status["exhausted"] else ""))
    return OK


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "ingest", common, "ingest markdown/text files or folders into a knowledge collection")
    p.add_argument("--collection", required=True, help="the collection to ingest into (created on first use)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files (.md, .markdown, .txt, .text) or folders of them")
    p.set_defaults(run=cmd_ingest)

    p = add_verb(verbs, "search", common,
                 "hybrid keyword + semantic search of a knowledge collection, with its stages")
    p.add_argument("--collection", required=True, action="append", metavar="C",
                   help="a collection to search (repeat for several); a story's chapters are story:<id>")
    p.add_argument("query", metavar="QUERY", help="the words to search for")
    p.add_argument("--top", type=bounded(1, 1000), default=8, metavar="K", help="chunks to return, 1..1,000 (default 8)")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "offline"), choices=("offline", "gemini"),
                   help="gemini lets a broad query step back (one generate call, cached); default "
                        "$CANON_LLM_PROVIDER or offline")
    p.add_argument("--feedback", choices=FEEDBACK_MODES, default=None,
                   help="pseudo-relevance feedback: hybrid (the default: the fused first pass feeds RM3 and "
                        "Rocchio, then a second pass; RM3 alone when keyword search answers alone), alone (RM3 "
                        "only when keyword search answers alone), always (RM3 on the keyword list), off")
    p.set_defaults(run=cmd_search)

    p = add_verb(verbs, "compile", common, "compile stale wiki pages, oldest drift first, within the LLM quota")
    p.add_argument("--budget", type=bounded(0, 100_000),
                   help="pages at most (default: the compile quota for an LLM provider, else all)")
    p.add_argument("--collection", help="only this collection's pages (default: every collection)")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "offline"), choices=("offline", "gemini"),
                   help="offline (extractive, no network; the default unless $CANON_LLM_PROVIDER says) or gemini "
                        "($GEMINI_API_KEY)")
    p.set_defaults(run=cmd_compile)

    p = add_verb(verbs, "lint", common, "check the wiki (no LLM calls); exits 1 unless green")
    p.add_argument("--collection", help="only this collection (default: every collection)")
    p.set_defaults(run=cmd_lint)

    p = add_verb(verbs, "quota", common, "LLM calls spent and left today, and when the day resets")
    p.add_argument("--provider", default=os.environ.get("CANON_LLM_PROVIDER", "gemini"),
                   help="the provider whose quota to show (default $CANON_LLM_PROVIDER or gemini)")
    p.set_defaults(run=cmd_quota)
