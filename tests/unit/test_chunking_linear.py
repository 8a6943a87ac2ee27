"""Chunking is linear in the text's size, and its chunks are the chunks of the quadratic
chunker it replaced (issue 16, item 4): stored audits replay chunking, and packet hashes
depend on chunk ids, texts and hashes.

``old_chunk_document`` below is a frozen copy of ``domain.chunking.chunk_document`` as of
git 0b7d44f (heading regex, ``_sections``, ``_paragraphs``, ``_pack``, ``_fit``). It is the
reference, not product code: do not "fix" it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import re
import time
from pathlib import Path

import pytest
import tiktoken

from canon_ledger.domain.chunking import _CUT_POINT, _heading, chunk_chapter, chunk_document
from canon_ledger.infrastructure.demo import SAMPLE
from canon_ledger.infrastructure.tokenizer import DEFAULT_ENCODING, token_counter

# ../shared/data/novels/war_and_peace.txt (public domain, 3.2 MB), committed so the
# test runs on any clone and can never skip.
WAR_AND_PEACE = Path(__file__).resolve().parents[1] / "fixtures" / "war_and_peace.txt"
TOKENS = token_counter()

# --- the chunker before issue 16 (frozen) -------------------------------------------------

_OLD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_OLD_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _old_slug(text):
    s = re.sub(r"[^\w]+", "-", text.casefold(), flags=re.UNICODE).strip("-")
    return s[:60] or "section"


def old_chunk_document(doc_key, title, text, tokens, max_tokens=256):
    sections, chunks, seen = [], [], {}
    for breadcrumb, body in _old_sections(title, text):
        path = "/".join(_old_slug(b) for b in breadcrumb[1:]) or "_"
        seen[path] = seen.get(path, 0) + 1
        if seen[path] > 1:
            path = f"{path}~{seen[path]}"
        section_id = f"{doc_key}#{path}"
        sections.append((section_id, breadcrumb))
        prefix = " > ".join(breadcrumb)
        budget = max(16, max_tokens - tokens.count(prefix) - 2)
        for n, piece in enumerate(_old_pack(_old_paragraphs(body), budget, tokens)):
            full = f"{prefix}\n\n{piece}"
            chunks.append((f"{section_id}/{n}", section_id, n, full, hashlib.sha256(full.encode()).hexdigest()))
    return sections, chunks


def _old_sections(title, text):
    out, trail, lines, current, in_fence = [], [], [], (title,), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else _OLD_HEADING.match(line)
        if m is None:
            lines.append(line)
            continue
        out.append((current, "\n".join(lines)))
        level, heading = len(m.group(1)), m.group(2)
        trail = [(lv, h) for lv, h in trail if lv < level] + [(level, heading)]
        current = (title, *(h for _, h in trail))
        lines = []
    out.append((current, "\n".join(lines)))
    return [(crumb, body) for crumb, body in out if body.strip()]


def _old_paragraphs(body):
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]


def _old_pack(paragraphs, budget, tokens):
    pieces, current, size = [], [], 0
    for para in paragraphs:
        for part, n in _old_fit(para, budget, tokens):
            if current and size + n > budget:
                pieces.append("\n\n".join(current))
                current, size = [], 0
            current.append(part)
            size += n
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _old_fit(paragraph, budget, tokens):
    whole = tokens.count(paragraph)
    if whole <= budget:
        return [(paragraph, whole)]
    out, current, current_n = [], "", 0
    for sentence in _OLD_SENTENCE.split(paragraph):
        n = tokens.count(sentence)
        while n > budget:  # one enormous sentence: cut on tokens
            head = tokens.truncate(sentence, budget)
            if not head:
                break
            out.append((head, tokens.count(head)))
            sentence = sentence[len(head):].lstrip()
            n = tokens.count(sentence)
        candidate = f"{current} {sentence}".strip()
        candidate_n = tokens.count(candidate) if current else n if candidate == sentence else tokens.count(candidate)
        if current and candidate_n > budget:
            out.append((current, current_n))
            current, current_n = sentence, n
        else:
            current, current_n = candidate, candidate_n
    if current:
        out.append((current, current_n))
    return out


# --- helpers ------------------------------------------------------------------------------


def _new(doc_key, title, text, max_tokens=256):
    sections, chunks = chunk_document(doc_key, title, text, TOKENS, max_tokens)
    return ([(s.section_id, s.breadcrumb) for s in sections],
            [(c.chunk_id, c.section_id, c.ordinal, c.text, c.hash) for c in chunks])


def _assert_same(text, max_tokens=256, doc_key="kb/doc.md", title="Doc"):
    old = old_chunk_document(doc_key, title, text, TOKENS, max_tokens)
    new = _new(doc_key, title, text, max_tokens)
    assert new[0] == old[0]
    assert len(new[1]) == len(old[1])
    for a, b in zip(new[1], old[1], strict=True):
        assert a == b, f"first different chunk: {a[0]}"
    return len(old[1])


def _war_and_peace() -> str:
    return WAR_AND_PEACE.read_text(encoding="utf-8")


def _unpunctuated(text: str) -> str:
    return " ".join(re.sub(r"[.!?]", "", w) for w in text.split())


def _random(alphabet: str, n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


# --- same chunks --------------------------------------------------------------------------


def test_war_and_peace_chunks_as_before():
    text = _war_and_peace()
    assert _assert_same(text) > 3000  # the whole novel as one document (3.2 MB), 256 tokens
    # Small limits send many of Tolstoy's sentences through the cut on tokens.
    part = text[:400_000]
    for max_tokens in (64, 24):
        long_sentences = sum(TOKENS.count(s) > max_tokens - 8 for s in _OLD_SENTENCE.split(" ".join(part.split())))
        assert long_sentences > 100
        _assert_same(part, max_tokens)


def test_war_and_peace_chapters_chunk_as_before():
    """Chapter by chapter, through ``chunk_chapter``, as the projections and the audit do."""
    text = _war_and_peace()
    chapters = re.split(r"(?m)^CHAPTER [IVXLC]+$", text)[1:120]
    assert len(chapters) == 119
    for n, body in enumerate(chapters, start=1):
        new = chunk_chapter("war-and-peace", n, body, TOKENS)
        old = old_chunk_document(f"story:war-and-peace/chapter-{n:05d}", f"Chapter {n}", body, TOKENS)
        assert [(s.section_id, s.breadcrumb) for s in new.sections] == old[0]
        assert [(c.chunk_id, c.section_id, c.ordinal, c.text, c.hash) for c in new.chunks] == old[1]


def test_the_demo_s_accepted_chapters_chunk_as_before():
    commands = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    accepted = {c["draft_id"] for c in commands if c["type"] == "accept_draft"}
    drafts = [c for c in commands if c["type"] == "submit_draft" and c["draft_id"] in accepted]
    assert len(drafts) == 4
    for d in drafts:
        story, n = d["story_id"], d["chapter"]
        for max_tokens in (256, 24):
            _assert_same(d["text"], max_tokens, f"story:{story}/chapter-{n:05d}", f"Chapter {n}")
        new = chunk_chapter(story, n, d["text"], TOKENS)
        old = old_chunk_document(f"story:{story}/chapter-{n:05d}", f"Chapter {n}", d["text"], TOKENS)
        assert [(c.chunk_id, c.text, c.hash) for c in new.chunks] == [(c[0], c[3], c[4]) for c in old[1]]


@pytest.mark.parametrize("name", ["unpunctuated words", "hex", "one letter", "cjk", "dashes", "markdown"])
def test_long_sentences_chunk_as_before(name):
    """The pathological inputs too: one enormous sentence with spaces, with no space at all (one
    pre-tokenizer piece), ideographs, words joined by dashes, and headings with long runs of
    spaces (the old heading regex is cubic there, so they stay short)."""
    texts = {
        "unpunctuated words": lambda: _unpunctuated(_war_and_peace()[:80_000]),
        "hex": lambda: _random("0123456789abcdef", 16_000, 1),
        "one letter": lambda: "a" * 40_000,
        "cjk": lambda: "Before. " + _random("雪山河海天地人一二三", 8_000, 2) + " after",
        "dashes": lambda: "-".join(_random("abcdefghij", 1 + i % 9, i) for i in range(3_000)),
        "markdown": lambda: "\n".join(f"{'#' * (1 + i % 7)} a{' ' * (i * 7 % 300)}{'#' * (i % 3)}b{' ' * (i % 4)}#\n"
                                      f"{_random('ab .!?', 400, i)}" for i in range(60)),
    }
    text = texts[name]()
    assert _assert_same(text) > 0
    assert _assert_same(text[:len(text) // 3], 40) > 0


def test_random_text_chunks_as_before():
    """Seeded mixtures of words, spaces, newlines, punctuation, apostrophes, marks, digits,
    ideographs, emoji, U+FFFD and headings, with small limits: every cut rule meets them."""
    atoms = ["a", "b", "Z", "é", "雪", "山", "0", "7", " ", " ", " ", "  ", "\n", "\n\n", ".", "!", "?", ",", "-",
             "'", "’", "—", "…", "(", ")", "\u0301", "\u00a0", "\t", "#", "# ", "## ", "\ufffd", "🙂", "ab", "the ",
             "word", "Ilse", "'s", "'ll", "١", "½", "_", "/", "\\", "$", "+", "、", "。", "，", "“", "”"]
    rng = random.Random(16)
    for _ in range(400):
        weights = [rng.random() for _ in atoms]
        text = "".join(rng.choices(atoms, weights, k=rng.choice([20, 300, 1500])))
        _assert_same(text, rng.choice([16, 20, 30, 64]))


def test_cut_points_end_a_prefix_of_the_text_s_tokens():
    """The ``TokenCounter`` property the chunker relies on, for the default encoding: at every
    cut point, the tokens of the text before it are the first tokens of the text."""
    encode = tiktoken.get_encoding(DEFAULT_ENCODING).encode_ordinary
    rng = random.Random(4)
    alphabet = "abcXYZé雪0719 .,;:-–—()[]\"“”'’/\\_!?…、。，\u0301🙂\ufffd½"
    checked = 0
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 200)))
        ids = encode(text)
        for m in _CUT_POINT.finditer(text):
            prefix = encode(text[:m.start()])
            assert ids[:len(prefix)] == prefix, (text, m.start())
            checked += 1
    assert checked > 5000


def test_heading_lines_parse_as_the_old_regex_did():
    rng = random.Random(6)
    alphabet = ["#", "#", " ", " ", "\t", "a", "x", "\u00a0", "\u3000", "\x1f", "é"]
    for _ in range(50_000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        m = _OLD_HEADING.match(line)
        assert _heading(line) == (None if m is None else (len(m.group(1)), m.group(2))), repr(line)


# --- linear time --------------------------------------------------------------------------


def _seconds(*texts: str, repeats: int = 5) -> list[float]:
    """The best of ``repeats`` runs of each text, the texts alternated run by run, so that a
    neighbour's load falls on both sizes alike."""
    best = [float("inf")] * len(texts)
    for _ in range(repeats):
        for i, text in enumerate(texts):
            gc.collect()
            t0 = time.perf_counter()
            chunk_document("kb/doc.md", "Doc", text, TOKENS)
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("name", ["unpunctuated words", "no cut point (hex)", "markdown headings"])
def test_doubling_the_input_at_most_triples_the_time(name):
    """Before issue 16 each doubling of unpunctuated text took ~4x (100 / 200 / 400 KB: 0.28 /
    1.13 / 4.32 s); min of five runs against noise, the two sizes alternated. Two doublings are
    timed at once (x4 the input, at most 9x the time: 3x a doubling), so one noisy doubling
    cannot fail it while a quadratic one (16x) still does (a single doubling failed beside the
    suite's other workers at 3.2-3.3x: 0.081 s then 0.259 s, 0.176 s then 0.581 s)."""
    make = {
        "unpunctuated words": lambda n: _unpunctuated(" ".join(["lamp oil wick quay fog Ilse counted"] * (n // 35 + 1)))[:n],
        "no cut point (hex)": lambda n: random.Random(3).randbytes(n // 2).hex(),
        "markdown headings": lambda n: ("## Heading" + " " * 40 + "b\n" + "Words and words. " * 20 + "\n") * (n // 392),
    }[name]
    size = 100_000 if "hex" in name else 150_000  # hex: ~0.5 us a character, words ~0.1 us
    t_small, t_large = _seconds(make(size), make(4 * size))
    assert t_large <= 9 * t_small, f"{name}: {size:,} chars {t_small:.3f} s, {4 * size:,} chars {t_large:.3f} s"
