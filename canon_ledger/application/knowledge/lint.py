"""Lint the wiki: orphan pages, broken wikilinks, compile drift, stale TLDRs. No LLM calls.
Wiki pages may enter packets only while this is green."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from canon_ledger.application.knowledge.ports import KnowledgeSnapshot


@dataclass(frozen=True)
class LintIssue:
    code: str  # orphan_page | broken_wikilink | compile_drift | stale_tldr
    collection_id: str
    topic_id: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "collection_id": self.collection_id, "topic_id": self.topic_id, "detail": self.detail}


@dataclass(frozen=True)
class LintReport:
    issues: list[LintIssue]
    pages: int
    uncompiled_topics: int

    @property
    def green(self) -> bool:
        return not self.issues

    def as_dict(self) -> dict[str, Any]:
        return {"green": self.green, "pages": self.pages, "uncompiled_topics": self.uncompiled_topics,
                "issues": [i.as_dict() for i in self.issues]}


def lint(snap: KnowledgeSnapshot, collection: str | None = None,
         sees: Callable[[str], bool] | None = None) -> LintReport:
    """``sees``: the collections the reader may know of (a key limited to stories: its stories'
    and the shared ones); the others are left out of the issues and the counts, as if absent.
    None: every collection."""
    issues: list[LintIssue] = []
    pages = [p for p in snap.pages(collection) if sees is None or sees(p.collection_id)]
    collections = [collection] if collection else sorted({p.collection_id for p in pages} | set(snap.collections()))
    collections = [c for c in collections if sees is None or sees(c)]
    topics = {c: {t.topic_id for t in snap.topics(c)} for c in collections}
    for page in pages:
        known = topics.get(page.collection_id, set())
        if page.topic_id not in known:
            issues.append(LintIssue("orphan_page", page.collection_id, page.topic_id,
                                    "its topic is gone from the collection's overview"))
            continue
        for link in page.wikilinks:
            if link not in known:
                issues.append(LintIssue("broken_wikilink", page.collection_id, page.topic_id, f"links to {link!r}"))
        if page.set_changed:
            issues.append(LintIssue("compile_drift", page.collection_id, page.topic_id,
                                    f"{page.set_changed} chunk(s) of its topic are not among its sources"))
        if page.edited:
            issues.append(LintIssue("stale_tldr", page.collection_id, page.topic_id,
                                    f"{page.edited} cited chunk(s) changed or went since it was compiled"))
    compiled = {(p.collection_id, p.topic_id) for p in pages}
    uncompiled = sum(1 for c, ts in topics.items() for t in ts if (c, t) not in compiled)
    return LintReport(sorted(issues, key=lambda i: (i.collection_id, i.topic_id, i.code)), len(pages), uncompiled)
