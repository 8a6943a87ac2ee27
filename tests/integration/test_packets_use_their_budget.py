"""Issue 40: a packet on a real book uses its budget (compiler 7). Ten chapters of Pride and
Prejudice, imported as a manuscript; the writer packet of a newly planned chapter 11 at the
default budget carries chapter 10's ending in P2 and fills the room L0 left with earlier
passages, never chapter 11's or later, and audits OK. Both stores, the hashing embedder."""

from __future__ import annotations

from canon_ledger.application.manuscript_import import import_manuscript
from canon_ledger.application.packets.compiler import L1_MAX_HITS
from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.packets.render import ENDING_TOKENS
from canon_ledger.domain.chunking import document_chapter
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.manuscript import split
from canon_ledger.application.retrieval.earlier_chapters import _document
from tests.helpers import stage_of
from tests.shared_data import PRIDE_AND_PREJUDICE, read_book

STORY = "pride"


def test_a_writer_packet_on_a_real_book_uses_its_budget(rs) -> None:
    book = split(read_book(PRIDE_AND_PREJUDICE))
    book.chapters = book.chapters[:10]
    report = import_manuscript(rs.ledger, book, STORY, title="Pride and Prejudice", new_story=True)
    assert report.failed is None
    [planned] = rs.ledger.apply([parse_command({
        "type": "plan_chapter", "command_id": "plan-11", "story_id": STORY, "chapter": 11, "volume": 1,
        "goals": ["Elizabeth walks to Netherfield to nurse Jane and meets Mr. Darcy again"]})])
    assert planned.status == "applied"

    packet = rs.packets.packet(Request(STORY, "writer", 11))
    assert packet.compiler == 7 and packet.budget == 12_000  # compiler 8 builds it as 7 did (``stamped``)
    assert packet.used_tokens >= 0.8 * packet.budget, (packet.used_tokens, stage_of(packet, "truncate").detail)

    [ending] = [i for i in packet.items if i.kind == "chapter_ending"]
    tenth = book.chapters[9].text.split()
    assert (ending.tier, ending.key, ending.status) == ("P2", "10", "included") and ending.tokens <= ENDING_TOKENS
    assert ending.text.startswith("Chapter 10 ending:\n… ")
    tail = ending.text.split()[4:]  # the chapter's own last words, from a sentence's start
    assert 300 < len(tail) < len(tenth) and tenth[-len(tail):] == tail
    assert tenth[-len(tail) - 1][-1] in '.!?"\'' or tenth[-len(tail) - 1].endswith(("”", "’"))

    passages = [i for i in packet.items if i.kind == "chunk"]
    assert 8 < len(passages) <= L1_MAX_HITS and all(i.status != "dropped" for i in passages)
    assert all(document_chapter(_document(i.key)) < 11 for i in passages)
    truncate = stage_of(packet, "truncate").detail
    assert truncate.endswith("; 0 left") or any(why in truncate for why in (
        "left: L1 stops at", "left: L1 found no more passages", "left: under the 32 tokens an item needs")), truncate
    assert rs.auditor.audit(packet.packet_id).ok
