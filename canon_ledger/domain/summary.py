"""Extractive summaries: a text's own sentences, chosen and kept in their order. Pure: no I/O,
no model, the same summary for the same text.

``canon summarize`` records these as chapter summaries when no LLM is asked for (``METHOD``), and
a volume's summary from its chapters' summaries. The method, in full:

1. Paragraphs: the text split on blank lines (CRLF, CR and LF alike); a paragraph's lines joined
   with a space (none where CJK meets CJK, a closing quote after CJK counting as CJK), each run
   of whitespace made one space.
2. Sentences: a paragraph is split after ``.``, ``!``, ``?`` or ``…`` (and any closing quotes or
   brackets) followed by a space, unless a lowercase letter follows (``"Stop!" he cried.`` is one
   sentence) or the period ends a known abbreviation (``Mr.``, ``Mrs.``, ``Dr.``, ``St.``:
   ``ABBREVIATIONS``) or an initial (one capital letter); and after ``。``, ``！``, ``？`` (and any
   closing quotes), whether or not a space follows: CJK text has none. A paragraph with no
   sentence end is one sentence.
3. Terms: words of letters, casefolded, of 3 letters or more and not an English stop word
   (``STOPWORDS``); in CJK text (Han, kana), which has no spaces, each pair of adjacent
   characters (a bigram). In a text of ``COMMON_AFTER`` sentences or more, a term found in more
   than half of them is dropped as well (the stop words of any language). A word written with a
   capital where it does not open its sentence, twice or more in the text, is a name: its weight
   counts ``NAME_WEIGHT`` times.
4. Score: a term weighs its count in the text over the most frequent term's count (0..1); a
   sentence scores the sum of its distinct terms' weights over the square root of its length,
   times ``OPENING`` for the text's first sentence and ``SECOND`` for its second (the opening sets
   the scene), ``CLOSING`` for its last (where the text leaves things), ``SHORT`` for a sentence of
   fewer than 3 words.
5. Choose: the best-scoring sentence (the earlier one on a tie) that fits in what is left of the
   length budget, then the next, and so on while one fits and scores at least ``FLOOR`` of the
   first one chosen; after each choice the weights of its terms are multiplied by ``SEEN``, so
   the next one says something else (SumBasic). When not even one sentence fits, the best is cut
   to the budget (at a word, or a CJK character) and ends with ``…``.
6. The sentences chosen, in text order, joined as lines are in step 1.

Length is counted in words (runs of non-space characters), a CJK character or punctuation mark
counting as half a word (a Chinese word is about two characters): ``CHAPTER_WORDS`` for a
chapter, ``VOLUME_WORDS`` for a volume; at most ``CHARS_PER_WORD`` characters per word of the
budget whatever the words (a text without spaces that is not CJK is cut at that length).

Invariants: the summary is empty only for a text that is empty or only whitespace; it never is
longer than the budget; it holds only the text's own sentences (or the cut of one), in order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

METHOD = "extractive-v1"  # changes with any change to what this module writes for a text
CHAPTER_WORDS = 120
VOLUME_WORDS = 250
CHARS_PER_WORD = 20
NAME_WEIGHT = 1.5
OPENING, SECOND, CLOSING, SHORT = 1.5, 1.2, 1.25, 0.3
SEEN = 0.3
FLOOR = 0.05
COMMON_AFTER = 8

# CJK letters: Han (with extension A and the compatibility ideographs) and both kanas.
_HAN = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# What counts as half a word and joins without a space: CJK letters, CJK punctuation, full-width forms.
_WIDE = _HAN + "\u3000-\u303f\uff00-\uffef"
_WIDE_CHAR = re.compile(f"[{_WIDE}]")
_CLOSING = "\"'”’»)]」』）"
_TERM = re.compile(rf"[{_HAN}]+|[^\W\d_{_HAN}]+")
_PARAGRAPHS = re.compile(r"\n[ \t\u3000]*\n\s*")
# A sentence end: Western marks with their closing quotes and a space after, or CJK marks with
# theirs and any space after.
_END = re.compile(r"[.!?…]+[\"'”’»)\]]*\s+|[。！？]+[」』”’\"）)\]]*\s*")
_LAST_WORD = re.compile(r"([^\W\d_]+)\.$")
_CUT_UNITS = re.compile(f"[{_WIDE}]|[^\\s{_WIDE}]+")

ABBREVIATIONS = frozenset(
    "mr mrs ms messrs mme mlle dr st mt ft jr sr capt col gen lt sgt maj rev prof hon gov esq etc vs viz cf "
    "no vol ch fig jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
STOPWORDS = frozenset(
    "the and but for nor yet not are was were been being its this that these those she they them his her hers "
    "their theirs our ours you your yours him himself herself itself themselves myself ourselves what which who "
    "whom whose when where why how all any some such into over under about after before again also only very can "
    "could would should will shall may might must does did done have has had having one two said say says upon "
    "out down more most other own same too just than then there here with from had off onto once ever even much "
    "many each every both few while until unless though although because since whether either neither nothing "
    "something anything everything nobody somebody anybody everybody none let like well now still yet back away "
    "get got went come came made make see saw seen know knew known think thought take took tell told give gave "
    "don didn doesn isn wasn aren weren haven hasn hadn couldn wouldn shouldn won shan mustn ain let quite rather "
    "indeed perhaps however thus therefore through though without within among against towards toward".split()
)


def paragraphs(text: str) -> list[str]:
    """The text's paragraphs (step 1), each on one line, none empty."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out = []
    for block in _PARAGRAPHS.split(text):
        joined = ""
        for line in block.split("\n"):
            line = " ".join(line.split())
            if not line:
                continue
            joined = _joined(joined, line)
        if joined:
            out.append(joined)
    return out


def sentences(text: str) -> list[str]:
    """The text's sentences (steps 1 and 2), in order, none empty."""
    out: list[str] = []
    for paragraph in paragraphs(text):
        start = 0
        for end in _sentence_ends(paragraph):
            piece = paragraph[start:end].strip()
            if piece:
                out.append(piece)
            start = end
        rest = paragraph[start:].strip()
        if rest:
            out.append(rest)
    return out


def sentence_starts(text: str) -> list[int]:
    """Where a sentence (step 2) or a paragraph (step 1: after a blank line) of ``text`` starts, as
    offsets into ``text`` as it is (its line breaks kept), in order. A single line break is no
    start: a wrapped line goes on (Project Gutenberg's books wrap at 70 characters)."""
    return sorted({m.end() for m in _PARAGRAPHS.finditer(text)} | set(_sentence_ends(text)))


def _sentence_ends(text: str) -> Iterator[int]:
    """Where each sentence of ``text`` ends (step 2), after its closing marks and the space after them."""
    for end in _END.finditer(text):
        if end.group()[0] not in ".!?…" or _ends_sentence(text, end):
            yield end.end()


def _ends_sentence(paragraph: str, end: re.Match[str]) -> bool:
    after = paragraph[end.end():end.end() + 1]
    if after and after.islower():
        return False
    if end.group().rstrip()[-1:] != "." or end.group().startswith(".."):
        return True
    word = _LAST_WORD.search(paragraph, max(0, end.start() - 12), end.start() + 1)
    if word is None:
        return True
    shown = word.group(1)
    return not (shown.casefold() in ABBREVIATIONS or (len(shown) == 1 and shown.isupper()))


def length(text: str) -> float:
    """``text``'s length in words: runs of non-space characters, a CJK character counting half."""
    wide = len(_WIDE_CHAR.findall(text))
    return len(_WIDE_CHAR.sub(" ", text).split()) + wide / 2 if wide else len(text.split())


@dataclass
class _Sentence:
    index: int
    text: str
    units: float
    terms: frozenset[str]  # its content terms
    counted: list[str]  # every content term, with repeats
    capitalised: list[str]  # terms written with a capital, not opening the sentence
    factor: float  # what its score is multiplied by, for its length and its place in the text


def _read(index: int, text: str) -> _Sentence:
    terms: list[str] = []
    capitalised: list[str] = []
    for n, match in enumerate(_TERM.finditer(text)):
        word = match.group()
        if _WIDE_CHAR.match(word):
            terms += [word[i:i + 2] for i in range(len(word) - 1)] if len(word) > 1 else [word]
            continue
        folded = word.casefold()
        if len(folded) < 3 or folded in STOPWORDS:
            continue
        terms.append(folded)
        if n and word[0].isupper():
            capitalised.append(folded)
    units = length(text)
    return _Sentence(index, text, units, frozenset(terms), terms, capitalised,
                     (SHORT if units < 3 else 1.0) / math.sqrt(max(units, 1.0)))


def summarise(text: str, budget: float = CHAPTER_WORDS) -> str:
    """An extractive summary of ``text`` of at most ``budget`` words (the module's method)."""
    found = [_read(i, s) for i, s in enumerate(sentences(text))]
    if not found:
        return ""
    weights = _weights(found)
    found[0].factor *= OPENING
    if len(found) > 2:
        found[1].factor *= SECOND
    if len(found) > 1:
        found[-1].factor *= CLOSING

    def score(s: _Sentence) -> float:
        return sum(weights.get(t, 0.0) for t in s.terms) * s.factor

    def best(among: list[_Sentence]) -> tuple[float, _Sentence]:
        return max(((score(s), s) for s in among), key=lambda pair: (pair[0], -pair[1].index))

    chosen: list[_Sentence] = []
    left = float(budget)
    candidates = [s for s in found if s.units <= left]
    if not candidates:
        return _cut(best(found)[1].text, budget)
    first = 0.0
    while candidates:
        value, pick = best(candidates)
        if chosen and value < FLOOR * first:
            break
        first = first or value
        chosen.append(pick)
        left -= pick.units
        for term in pick.terms:
            weights[term] = weights.get(term, 0.0) * SEEN
        candidates = [s for s in candidates if s is not pick and s.units <= left]
    summary = ""
    for s in sorted(chosen, key=lambda s: s.index):
        summary = _joined(summary, s.text)
    return _capped(summary, budget)


def summarise_volume(summaries: Sequence[str], budget: float = VOLUME_WORDS) -> str:
    """A volume's summary from its chapters' summaries, in chapter order: ``summarise`` over them,
    each summary a paragraph."""
    return summarise("\n\n".join(s for s in summaries if s.strip()), budget)


def _weights(found: list[_Sentence]) -> dict[str, float]:
    counts = Counter(t for s in found for t in s.counted)
    if len(found) >= COMMON_AFTER:
        spread = Counter(t for s in found for t in s.terms)
        for term, n in spread.items():
            if n * 2 > len(found):
                del counts[term]
    if not counts:
        return {}
    top = max(counts.values())
    names = {t for t, n in Counter(t for s in found for t in s.capitalised).items() if n >= 2}
    return {t: n / top * (NAME_WEIGHT if t in names else 1.0) for t, n in counts.items()}


def _joined(head: str, tail: str) -> str:
    """``head`` then ``tail``, a space between them unless both are CJK where they meet (a closing
    quote after a CJK character is CJK too)."""
    if not head:
        return tail
    end = head.rstrip(_CLOSING) or head
    return head + tail if _WIDE_CHAR.match(end[-1]) and _WIDE_CHAR.match(tail[0]) else f"{head} {tail}"


def _cut(sentence: str, budget: float) -> str:
    """The head of ``sentence`` that fits in ``budget`` words (at least one word), then ``…``."""
    used, end = 0.0, 0
    for match in _CUT_UNITS.finditer(sentence):
        step = 0.5 if _WIDE_CHAR.match(match.group()) else 1.0
        if end and used + step > budget:
            break
        used, end = used + step, match.end()
    return _capped(sentence[:end].rstrip() + "…", budget)


def _capped(summary: str, budget: float) -> str:
    most = max(1, int(budget * CHARS_PER_WORD))
    return summary if len(summary) <= most else summary[:most - 1].rstrip() + "…"


class ExtractiveSummariser:
    """This module's method as ``canon summarize``'s writer (``application.ports.SummaryWriter``):
    no network, no quota; the title and numbers are not used."""

    name = METHOD
    uses_quota = False

    def summarise_chapter(self, title: str, number: int, text: str) -> str:
        return summarise(text, CHAPTER_WORDS)

    def summarise_volume(self, title: str, number: int, summaries: list[tuple[int, str]]) -> str:
        return summarise_volume([summary for _, summary in summaries], VOLUME_WORDS)
