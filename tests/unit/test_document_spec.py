"""Documents: ingest, re-ingest appends only what changed, edit and revert a chunk."""

from tests.unit.spec import edit, given, ingest

GUIDE = "# Lamps\nLamps keep memory.\n\n## Trimming\nTrim the wick once.\n\n## Oil\nWhale oil only.\n"


def test_ingesting_a_document_chunks_it_by_heading():
    events = given().when(ingest("guide.md", GUIDE)).then("Document.Ingested")
    chunks = events[0].chunks
    assert [c["chunk_id"] for c in chunks] == ["kb/guide.md#lamps/0", "kb/guide.md#lamps/trimming/0", "kb/guide.md#lamps/oil/0"]
    assert chunks[1]["text"].startswith("Doc > Lamps > Trimming\n\n")


def test_reingesting_an_unchanged_document_appends_nothing():
    given(ingest("guide.md", GUIDE)).when(ingest("guide.md", GUIDE)).then()


def test_a_changed_section_appends_chunk_edited_for_that_chunk_only():
    changed = GUIDE.replace("Whale oil only.", "Colza oil only.")
    given(ingest("guide.md", GUIDE)).when(ingest("guide.md", changed)).then(
        ("Document.ChunkEdited", {"chunk_id": "kb/guide.md#lamps/oil/0"}))


def test_added_and_removed_sections():
    changed = GUIDE.replace("## Oil\nWhale oil only.\n", "## Wicks\nCotton.\n")
    given(ingest("guide.md", GUIDE)).when(ingest("guide.md", changed)).then(
        "Document.Restructured", ("Document.ChunkRemoved", {"chunk_id": "kb/guide.md#lamps/oil/0"}),
        ("Document.ChunkAdded", {}))


def test_editing_a_chunk_keeps_its_breadcrumb_and_revert_restores_the_hash():
    spec = given(ingest("guide.md", GUIDE))
    [edited] = spec.when(edit("kb/guide.md#lamps/oil/0", "Colza oil only.")).then("Document.ChunkEdited")
    assert edited.text == "Doc > Lamps > Oil\n\nColza oil only."
    [reverted] = spec.when(edit("kb/guide.md#lamps/oil/0", "Whale oil only.")).then("Document.ChunkEdited")
    assert reverted.hash == edited.previous_hash


def test_editing_refuses_unknown_chunks_and_no_op_edits_append_nothing():
    given(ingest("guide.md", GUIDE)).when(edit("kb/guide.md#nope/0", "x")).then_error("unknown_chunk", "chunk_id")
    given().when(edit("kb/other.md#a/0", "x")).then_error("unknown_chunk", "chunk_id")
    given().when(edit("not-a-chunk", "x")).then_error("unknown_chunk", "chunk_id")
    given(ingest("guide.md", GUIDE)).when(edit("kb/guide.md#lamps/oil/0", "Whale oil only.")).then()


def test_long_sections_split_into_children_within_the_token_limit():
    body = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(12))
    events = given().when(ingest("long.md", f"# Long\n{body}", max_chunk_tokens=128)).then("Document.Ingested")
    from canon_ledger.infrastructure.tokenizer import token_counter

    counter = token_counter()
    assert len(events[0].chunks) > 4
    assert all(counter.count(c["text"]) <= 128 for c in events[0].chunks)
