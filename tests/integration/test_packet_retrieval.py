"""L1 in packets, on both stores: wiki pages only while lint is green, earlier chapters only,
audits that rebuild every retrieved text from the log, and packets that stand on L0 when
retrieval fails."""

from __future__ import annotations

from canon_ledger.application.knowledge.lint import lint
from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.packets.replay import RecordedRecall
from canon_ledger.domain.commands import parse_command
from canon_ledger.application.retrieval.search import HybridSearch, SearchService
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.demo import STORY
from canon_ledger.application.retrieval.packet_retrieval import StoryRetriever
from tests.helpers import stage_of

COLLECTION = f"story:{STORY}"


def _l1(packet):
    return [i for i in packet.items if i.kind in ("chunk", "wiki_page")]


def _replace_chapter_2(s):
    results = s.ledger.apply([parse_command(c) for c in (
        {"type": "submit_draft", "command_id": "ch2-new", "story_id": STORY, "chapter": 2, "draft_id": "d2-new",
         "text": "Hobb's ledger, rewritten: the flood night from the clerk's side."},
        {"type": "accept_draft", "command_id": "ch2-accept", "story_id": STORY, "draft_id": "d2-new"})])
    assert [r.status for r in results] == ["applied", "applied"]


def test_wiki_pages_enter_packets_only_while_lint_is_green(rs_demo) -> None:
    first = rs_demo.packets.packet(Request(STORY, "writer", 5))
    assert stage_of(first, "wiki").detail == "no wiki page of the story ranked"
    report = rs_demo.compiler("offline").nightly()
    assert report.compiled == 4 and report.stopped_reason == "done"

    green = rs_demo.packets.packet(Request(STORY, "writer", 5))
    pages = [i for i in green.items if i.kind == "wiki_page"]
    assert pages and all(i.status == "included" for i in pages)
    assert stage_of(green, "wiki").status == "done" and "lint green" in stage_of(green, "wiki").detail
    assert rs_demo.auditor.audit(green.packet_id).ok  # page TLDRs rebuilt from their PageCompiled events

    _replace_chapter_2(rs_demo)  # chapter 2's page now cites a chunk that changed: stale
    rs_demo.knowledge.catch_up_serving()
    with rs_demo.knowledge_reader.snapshot() as k:
        assert not lint(k, COLLECTION).green
    red = rs_demo.packets.packet(Request(STORY, "writer", 5))
    assert not [i for i in red.items if i.kind == "wiki_page"]
    assert [i for i in red.items if i.kind == "chunk"], "chunk retrieval runs underneath the pages"
    wiki = stage_of(red, "wiki")
    assert wiki.status == "skipped" and "lint not green" in wiki.detail and "stale_tldr" in wiki.detail
    assert rs_demo.auditor.audit(red.packet_id).ok


def test_retrieval_offers_only_earlier_chapters(rs_demo) -> None:
    for chapter in (2, 3, 5):
        packet = rs_demo.packets.packet(Request(STORY, "writer", chapter), record=False)
        keys = [i.key for i in _l1(packet)]
        # chapter 2: the one earlier passage (chapter 1, short) is whole in P2's chapter ending
        assert keys or (chapter == 2 and stage_of(packet, "merge").detail.endswith("1 already in L0")), chapter
        assert all(int(key.split("chapter-")[1][:5]) < chapter for key in keys), (chapter, keys)
    assert stage_of(rs_demo.packets.packet(Request(STORY, "writer", 1), record=False), "select").detail == "nothing found"


def test_replayed_hits_take_their_text_from_the_log_and_nothing_else(rs_demo) -> None:
    packet = rs_demo.packets.packet(Request(STORY, "writer", 5))
    record = rs_demo.ledger.packet_records.get(packet.packet_id)
    assert record.compiler == 7 and record.recall["hits"]  # compiler 8's, as 7 built it (``stamped``)
    with rs_demo.auditor.scratch_for(STORY, record.position) as replay:
        honest = RecordedRecall(record.recall, rs_demo.auditor.event_at, replay.events, rs_demo.packets.tokens)
        live = {i.key: i.text for i in _l1(packet)}
        rebuilt = {h.id: h.text for h in honest.recall(STORY, 5, "").hits}
        # every hit recorded, the packet's and chapter 4's (whole in P2's chapter ending: a duplicate)
        assert {k: v for k, v in rebuilt.items() if k in live} == live
        assert set(rebuilt) - set(live) == {"story:lamplight/chapter-00004#_/0"}

        # A forged record pointing a hit at a draft submission (never canon) rebuilds no text.
        draft_at = next(e.position for e in rs_demo.ledger.event_log.history(story_id=STORY) if e.type == "Draft.Submitted")
        forged = {**record.recall, "hits": [{**record.recall["hits"][0], "sources": [draft_at]}]}
        [hit] = RecordedRecall(forged, rs_demo.auditor.event_at, replay.events, rs_demo.packets.tokens).recall(STORY, 5, "").hits
        assert hit.text == ""

    # Chapter 2 replaced after the packet: the audit still rebuilds the text in force then.
    _replace_chapter_2(rs_demo)
    assert rs_demo.auditor.audit(packet.packet_id).ok


class _Broken:
    name = "broken"
    uses_quota = False

    def embed(self, texts):
        raise RuntimeError("model file missing")


def test_packets_still_build_and_say_so_when_retrieval_fails(rs_demo) -> None:
    rs_demo.catch_up_retrieval()  # the stand-in retrievers below do not catch up
    retriever = rs_demo.packets.retriever
    rs_demo.packets.retriever = StoryRetriever(
        SearchService(rs_demo.ledger.event_log.position, lambda goal: None, lambda goal: None, retriever.search.reader,
                      HybridSearch(_Broken())), rs_demo.knowledge_reader)
    packet = rs_demo.packets.packet(Request(STORY, "writer", 5), record=False)
    assert stage_of(packet, "embed").status in ("error", "skipped")
    assert stage_of(packet, "keyword").status == "done" and _l1(packet), [(s.step, s.status, s.detail) for s in packet.stages]

    def down(goal):
        raise ConnectionError("read model unavailable")

    rs_demo.packets.retriever = StoryRetriever(
        SearchService(rs_demo.ledger.event_log.position, down, down, retriever.search.reader, retriever.search.pipeline),
        rs_demo.knowledge_reader)
    packet = rs_demo.packets.packet(Request(STORY, "writer", 5), record=False)
    failed = stage_of(packet, "l1-retrieval")
    assert failed.status == "error" and "ConnectionError" in failed.detail and "L0" in failed.detail
    assert not _l1(packet) and [i for i in packet.items if i.tier == "P1"]


def test_the_indexes_filter_earlier_chapters_before_ranking(store_url) -> None:
    """Later chapters match the query better, yet the top two before chapter 3 are chapters 1
    and 2: the bound is applied in the index, not to a list it already cut."""
    s = bootstrap(store_url, embedder="hashing")
    try:
        commands = [{"type": "start_story", "command_id": "s", "story_id": "long", "title": "Long",
                     "style_guardrails": ["g"], "output_contract": "md"}]
        for n in range(1, 7):
            lamps = " ".join(["lamp lantern wick"] * n)  # later chapters say it more often
            commands += [{"type": "plan_chapter", "command_id": f"p{n}", "story_id": "long", "chapter": n,
                          "volume": 1, "goals": [f"goal {n}"]},
                         {"type": "submit_draft", "command_id": f"d{n}", "story_id": "long", "chapter": n,
                          "draft_id": f"d{n}", "text": f"Chapter {n} of the quay. {lamps}."},
                         {"type": "accept_draft", "command_id": f"a{n}", "story_id": "long", "draft_id": f"d{n}"}]
        assert all(r.ok for r in s.ledger.apply([parse_command(c) for c in commands]))
        s.catch_up_retrieval()
        with s.retrieval_reader.snapshot() as snap:
            unbounded = snap.keyword("lamp lantern wick", ["story:long"], 2).hits
            assert [h.id.split("/")[1][:13] for h in unbounded] == ["chapter-00006", "chapter-00005"]
            below = "story:long/chapter-00003"
            keyword = snap.keyword("lamp lantern wick", ["story:long"], 2, below=below).hits
            [vector] = s.embedder.embed(["lamp lantern wick"])
            nearest = snap.vector(vector, ["story:long"], 2, below=below)
        assert sorted(h.id.split("/")[1][:13] for h in keyword) == ["chapter-00001", "chapter-00002"]
        assert sorted(h.id.split("/")[1][:13] for h in nearest) == ["chapter-00001", "chapter-00002"]
    finally:
        s.close()
