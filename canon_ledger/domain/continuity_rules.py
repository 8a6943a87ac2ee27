"""The continuity check's rules (pure): a draft of chapter K against the timelines of the canon
entries it mentions, and what contradicts the canon in force at K.

Input: the draft's text, its chapter, and every step (``continuity.Step``) of the entries the
draft mentions (the recall matcher found them; ``application.continuity`` reads them). Output:
``Finding`` objects, deterministic for the same draft and canon (same order, same ids).

The types, each with the canon step that proves it as evidence:

- ``not_yet_in_canon`` (error): the draft names an entry whose first version takes effect after K.
- ``retired`` (warning): the draft names an entry retired before K (``retire_canon``): a
  warning, because a retired entry may still be spoken of.
- ``spoiler`` (error): a sentence that names an entry (with the sentence after it) holds at
  least ``spoiler_needs(n)`` of the n distinctive terms of a version hidden until a later
  chapter (``hidden_until`` > K): the words of its text that are not stopwords, not the entry's
  own names and not in any of its versions shown at K (Han text: two-character terms).
- ``field_conflict`` (error): a sentence names the entry and, next to a word of one of its facts
  (``eyes``, ``hair``, ``age``/``year-old``, ``home``/``lives in``, or the field's own name), a
  value other than the one in force at K: a value the story's canon gives that field elsewhere
  (another version, another mentioned entry), a colour for a colour field, a number for a
  number field, or the name of a mentioned location for a place field. ``state``/``status``
  facts are read from "<name> was|is <value>".
- ``unavailable_character`` (error): a character whose ``state``/``status`` in force at K (since
  before K) is in the unavailable vocabulary (``UNAVAILABLE``, and a story's own words, see
  ``Vocabulary``) is named as the subject of an action: "<name> [adverb] <verb>" with a verb of
  ``ACTIONS`` or a regular past tense, or a speech tag "said <name>".

A name counts where recall's matcher would find it (``domain.recall``: whole words, any case)
and, for a key written with a capital letter, only where the draft writes it with one: "Will"
the character is not "will" the verb.

Precision comes first (a check that cries wolf is switched off). The field and availability
rules, and the not-yet and retired rules, read no sentence that holds one of these cues, and
no text inside quotation marks (straight or curly double quotes, guillemets, 「」『』, and
‘single quotes’ that open after a space):

- quoted speech (a character may be wrong, lie, or speak of the past);
- memory and the past: ``remembered``, ``recalled``, ``memory``, ``dreamed``, ``once``,
  ``used to``, ``ago``, ``the late``, ``grave``, ``funeral``, ``ghost``, ``mourned``, a past
  perfect (``had`` + participle), ...;
- negation: ``not``, ``n't``, ``never``, ``no``, ``nor``, ``without``, ``nobody``, ...;
- the hypothetical and hearsay: ``if``, ``would``, ``might``, ``as if``, ``wished``,
  ``imagined``, ``rumour``, ``legend``, ``believed``, ...

Spoilers are read in quotes too: a character who says the secret reveals it.

The field and availability rules read English; in other languages the check finds what the
not-yet, retired and spoiler rules find.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.continuity import ERROR, WARNING, Evidence, Finding, Step
from canon_ledger.domain.recall import bounded, spaceless_key
from canon_ledger.domain.summary import STOPWORDS, sentence_starts

NOT_YET, RETIRED, SPOILER, FIELD_CONFLICT, UNAVAILABLE_CHARACTER = (
    "not_yet_in_canon", "retired", "spoiler", "field_conflict", "unavailable_character")
TYPES = (NOT_YET, RETIRED, SPOILER, FIELD_CONFLICT, UNAVAILABLE_CHARACTER)
SEVERITY = {NOT_YET: ERROR, RETIRED: WARNING, SPOILER: ERROR, FIELD_CONFLICT: ERROR, UNAVAILABLE_CHARACTER: ERROR}

# A character whose state in force is one of these cannot act (a story adds its own words:
# ``Vocabulary``).
UNAVAILABLE = frozenset(
    "dead deceased killed slain murdered executed drowned missing vanished disappeared imprisoned jailed captive "
    "captured incarcerated exiled banished petrified".split())
VOCABULARY_ENTRY = ("world_rule", "continuity")  # its fields.unavailable: more words, comma-separated

_MEMORY = ("remember remembered remembering remembers recall recalled recalling recollected recollection memory "
           "memories reminisced reminiscing dream dreamed dreamt dreaming dreams nightmare once ago formerly "
           "grave graves tomb funeral buried burial ghost ghosts spirit mourned mourning mourn grieved grieving "
           "grief missed portrait statue memorial legacy whenever")
_NEGATION = "not never no nor without nobody none neither nothing nowhere cannot can't won't don't didn't"
_HYPOTHETICAL = ("if unless would might may could should wished wish wishing imagined imagine imagining "
                 "suppose supposed pretend pretended rumour rumours rumor rumors rumoured rumored legend legends "
                 "tale tales believed believe feared fearing hoped hoping perhaps maybe whether story stories "
                 "thought wondered claimed")
CUES = frozenset(f"{_MEMORY} {_NEGATION} {_HYPOTHETICAL}".split())
_CUE_PHRASES = re.compile(r"\bas (?:if|though)\b|\bused to\b|\bthe late\b|\bhad (?:been|\w+ed)\b|n['’]t\b", re.I)

ACTIONS = frozenset(
    "said says asked asks replied replies answered answers whispered shouted called cried laughed laughs smiled "
    "smiles grinned nodded nods shrugged sighed frowned winked walked walks ran runs rode rides came comes went goes "
    "entered enters left leaves stood stands sat sits rose rises stepped steps turned turns looked looks took takes "
    "gave gives drew draws grabbed seized lifted raised opened opens closed closes pushed pulled struck strikes "
    "fought fights swung swings threw throws caught catches climbed jumped leapt leaped knelt kneels bowed waved "
    "pointed reached held holds carried carries wrote writes read reads spoke speaks argued insisted ordered "
    "commanded demanded told tells met meets greeted hugged kissed killed kills attacked attacks watched watches "
    "waited waits moved moves crossed hurried strode marched slipped glanced stared paced poured drank ate "
    "handed signed arrived arrives returned returns joined joins led leads followed follows crept sprinted".split())
_NOT_VERBS = frozenset("red bed shed wed sled need seed feed breed weed steed creed hundred sacred naked wicked "
                       "ragged rugged beloved blessed cursed learned aged".split())

COLOURS = frozenset(
    "black blue brown green grey gray hazel amber violet golden gold silver red white yellow auburn blond blonde "
    "ginger chestnut copper pink purple orange dark pale".split())
_SAME = {"gray": "grey", "blonde": "blond", "colour": "color"}
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_NUMBER_WORDS.update({w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety"
                                                            .split())})
# The words that name a fact in prose, for fact names a draft rarely writes as such.
FIELD_WORDS: dict[str, tuple[str, ...]] = {
    "eyes": ("eyes", "eye", "eyed"), "eye": ("eyes", "eye", "eyed"), "eye_color": ("eyes", "eye", "eyed"),
    "eye_colour": ("eyes", "eye", "eyed"), "hair": ("hair", "haired"), "hair_color": ("hair", "haired"),
    "hair_colour": ("hair", "haired"), "age": ("age", "aged", "year-old", "years old", "years of age"),
    "home": ("home", "lives in", "lived in", "living in", "hometown"), "hometown": ("home", "hometown"),
    "residence": ("home", "lives in", "lived in", "living in"),
}
_COLOUR_FIELDS = frozenset({"eyes", "eye", "eye_color", "eye_colour", "hair", "hair_color", "hair_colour", "skin",
                            "color", "colour"})
_STATE_FIELDS = ("status", "state")
_STATE_VERBS = ("was", "is", "lay", "remained", "remains", "had been", "has been", "now")

_WORD = re.compile(r"[^\W_]+(?:[-'’][^\W_]+)*")
_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_CLAUSE_BREAK = re.compile(r"[;:—–()\[\]]|\s-\s")
_OPEN_CLOSE = {"“": "”", "«": "»", "「": "」", "『": "』", "„": "“"}


@dataclass(frozen=True)
class Vocabulary:
    """The words that make a character unavailable: ``UNAVAILABLE`` and a story's own."""

    unavailable: frozenset[str] = UNAVAILABLE

    @classmethod
    def of(cls, steps: Sequence[Step], chapter: int) -> Vocabulary:
        """With the words of the story's ``world_rule continuity`` entry in force at ``chapter``
        (its ``fields.unavailable``, comma-separated), if it has one."""
        extra: set[str] = set()
        for s in steps:
            if (s.kind, s.key) == VOCABULARY_ENTRY and s.holds_at(chapter) and not s.retired:
                words = s.facts.get("unavailable")
                if isinstance(words, str):
                    extra.update(w.strip().casefold() for w in words.split(",") if w.strip())
        return cls(UNAVAILABLE | frozenset(extra))


@dataclass(frozen=True)
class _Entry:
    kind: str
    key: str
    name: str
    steps: tuple[Step, ...]


class _Draft:
    """The draft's text, its sentences, the ranges inside quotation marks, and where each
    entry's names occur."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0, *(s for s in sentence_starts(text) if 0 < s < len(text))]
        self.sentences = [(a, b) for a, b in zip(starts, [*starts[1:], len(text)]) if text[a:b].strip()]
        self._sentence_starts = [a for a, _ in self.sentences]
        self.quoted = _quoted(text)

    def sentence_of(self, at: int) -> int:
        lo, hi = 0, len(self._sentence_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._sentence_starts[mid] <= at:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def in_quotes(self, start: int) -> bool:
        return any(a <= start < b for a, b in self.quoted)

    def unquoted(self, a: int, b: int) -> str:
        """``text[a:b]`` with the quoted parts blanked (same length)."""
        chars = list(self.text[a:b])
        for qa, qb in self.quoted:
            for i in range(max(qa, a), min(qb, b)):
                chars[i - a] = " "
        return "".join(chars)

    def cued(self, sentence: int) -> bool:
        """Does the sentence, outside its quotes, hold a memory, negation or hypothetical cue?"""
        a, b = self.sentences[sentence]
        plain = self.unquoted(a, b)
        if _CUE_PHRASES.search(plain):
            return True
        return any(w.casefold() in CUES for w in _WORD.findall(plain))


def _quoted(text: str) -> list[tuple[int, int]]:
    """The ranges of ``text`` inside quotation marks (the marks included)."""
    out: list[tuple[int, int]] = []
    straight: int | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n" and i + 1 < n and text[i + 1] == "\n":
            straight = None  # a paragraph break closes an unclosed straight quote
        elif ch == '"':
            if straight is None:
                straight = i
            else:
                out.append((straight, i + 1))
                straight = None
        elif ch in _OPEN_CLOSE or (ch == "‘" and (i == 0 or not text[i - 1].isalnum())):
            close = _OPEN_CLOSE.get(ch, "’")
            end = _closing(text, i + 1, close)
            if end is not None:
                out.append((i, end + 1))
                i = end
        i += 1
    if straight is not None:
        end = text.find("\n\n", straight)
        out.append((straight, n if end < 0 else end))
    return sorted(out)


def _closing(text: str, start: int, close: str) -> int | None:
    limit = text.find("\n\n", start)
    limit = len(text) if limit < 0 else limit
    for j in range(start, limit):
        if text[j] == close and (close != "’" or j + 1 >= len(text) or not text[j + 1].isalnum()):
            return j
    return None


def _occurrences(draft: _Draft, keys: Iterable[str]) -> list[tuple[int, int]]:
    """Where the keys occur in the draft as recall counts them (whole words, any case; a key
    with no ASCII letter or digit anywhere), and a capitalised key only capitalised; the
    longest at each start, in text order, none overlapping."""
    found: dict[int, int] = {}
    text = draft.text
    for key in keys:
        key = key.strip()
        if not key:
            continue
        capital = key[0].isupper()
        for m in re.finditer(re.escape(key), text, re.IGNORECASE):
            start, end = m.span()
            if capital and not text[start].isupper():
                continue
            if not spaceless_key(key) and not bounded(text, start, end, spaceless=True):
                continue
            if end > found.get(start, -1):
                found[start] = end
    out: list[tuple[int, int]] = []
    for start in sorted(found):
        if out and start < out[-1][1]:
            continue
        out.append((start, found[start]))
    return out


def check(draft_id: str, text: str, chapter: int, steps: Sequence[Step],
          vocabulary: Vocabulary = Vocabulary()) -> list[Finding]:
    """Every finding of the draft of ``chapter``, given every step of the entries it mentions
    (any order); sorted by (span start, type, kind, key)."""
    entries = _entries(steps)
    draft = _Draft(text)
    places = {(e.kind, e.key): _occurrences(draft, _keys(e)) for e in entries}
    named = {k: v for k, v in places.items() if v}
    out: list[Finding] = []
    for e in entries:
        spans = named.get((e.kind, e.key))
        if not spans:
            continue
        out.extend(_timeline(draft_id, draft, chapter, e, spans))
        out.extend(_spoilers(draft_id, draft, chapter, e, spans))
        out.extend(_fields(draft_id, draft, chapter, e, spans, entries, named))
        if e.kind == "character":
            out.extend(_unavailable(draft_id, draft, chapter, e, spans, vocabulary))
    return sorted(out, key=lambda f: (f.start, TYPES.index(f.type), f.kind, f.key, f.id))


def _entries(steps: Sequence[Step]) -> list[_Entry]:
    by: dict[tuple[str, str], list[Step]] = {}
    for s in sorted(steps, key=lambda s: (s.kind, s.key, s.step)):
        by.setdefault((s.kind, s.key), []).append(s)
    out = []
    for (kind, key), timeline in by.items():
        versions = [s for s in timeline if not s.retired]
        if versions and (kind, key) != VOCABULARY_ENTRY:
            out.append(_Entry(kind, key, versions[-1].name, tuple(timeline)))
    return out


def _keys(e: _Entry) -> list[str]:
    return list(dict.fromkeys(k for s in e.steps if not s.retired for k in s.keys))


def _in_force(e: _Entry, chapter: int) -> Step | None:
    return next((s for s in e.steps if s.holds_at(chapter)), None)


def finding_id(draft_id: str, type_: str, kind: str, key: str, detail: str, start: int, end: int,
               sources: Sequence[int]) -> str:
    raw = json.dumps([draft_id, type_, kind, key, detail, start, end, list(sources)], ensure_ascii=False)
    return "fnd_" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def _finding(draft_id: str, draft: _Draft, type_: str, e: _Entry, span: tuple[int, int], evidence: Sequence[Step],
             message: str, detail: str = "") -> Finding:
    start, end = span
    proof = tuple(Evidence(s.text, s.valid_from, s.source) for s in evidence)
    return Finding(finding_id(draft_id, type_, e.kind, e.key, detail, start, end, [p.source for p in proof]),
                   type_, SEVERITY[type_], e.kind, e.key, e.name, start, end, draft.text[start:end], proof, message)


def _plain(draft: _Draft, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans outside quotes, in sentences without a cue."""
    return [s for s in spans if not draft.in_quotes(s[0]) and not draft.cued(draft.sentence_of(s[0]))]


def _more(n: int) -> str:
    return f" (and {n} more place{'s' if n > 1 else ''})" if n else ""


def _timeline(draft_id: str, draft: _Draft, chapter: int, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    effective = [s for s in e.steps if s.valid_to is None or s.valid_to > s.valid_from]
    if not effective:
        return []
    plain = _plain(draft, spans)
    if not plain:
        return []
    first = min(effective, key=lambda s: (s.valid_from, s.step))
    if first.valid_from > chapter:
        return [_finding(draft_id, draft, NOT_YET, e, plain[0], [first],
                         f"{e.name} ({e.kind} {e.key}) is not in canon until chapter {first.valid_from}; "
                         f"this draft is chapter {chapter}" + _more(len(plain) - 1))]
    now = _in_force(e, chapter)
    if now is not None and now.retired:
        return [_finding(draft_id, draft, RETIRED, e, plain[0], [now],
                         f"{e.name} ({e.kind} {e.key}) was retired from canon at chapter {now.valid_from}: "
                         f"{now.text}" + _more(len(plain) - 1))]
    return []


# -- spoilers -----------------------------------------------------------------------------------

def terms(text: str) -> set[str]:
    """The content terms of ``text``: words of 3+ letters that are not stopwords, lowercased and
    crudely stemmed (a plural or possessive ``s``, ``ed``, ``ing``), and the two-character runs
    of Han, kana and Hangul text."""
    out: set[str] = set()
    for run in _HAN.findall(text):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    for w in _WORD.findall(_HAN.sub(" ", text)):
        w = w.casefold().replace("’", "'")
        if w.endswith("'s"):
            w = w[:-2]
        if len(w) < 3 or w in STOPWORDS or w in CUES or w.isdigit():
            continue
        out.add(_stem(w))
    return out


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def spoiler_needs(distinctive: int) -> int:
    """How many of a hidden version's ``distinctive`` terms one passage must hold to reveal it:
    half of them, at least 2 and at most 4 (measured: docs/benchmarks.md, continuity)."""
    return max(2, min(4, math.ceil(distinctive / 2)))


def _body(step: Step) -> str:
    """A step's rendered text without its head line (name, kind, key, chapter)."""
    return step.text.split("\n", 1)[1] if "\n" in step.text else ""


def _spoilers(draft_id: str, draft: _Draft, chapter: int, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    hidden = [s for s in e.steps if not s.retired and s.hidden_until is not None and s.hidden_until > chapter]
    if not hidden:
        return []
    shown = set()
    for s in e.steps:
        if not s.retired and s.valid_from <= chapter and not (s.hidden_until is not None and s.hidden_until > chapter):
            shown |= terms(_body(s))
    names = terms(" ".join(k for s in e.steps for k in (s.name, *s.aliases, *s.keys)))
    out = []
    for s in hidden:
        distinctive = terms(_body(s)) - shown - names
        if len(distinctive) < 2:
            continue
        need = spoiler_needs(len(distinctive))
        for start, end in spans:
            i = draft.sentence_of(start)
            a = draft.sentences[i][0]
            b = draft.sentences[min(i + 1, len(draft.sentences) - 1)][1]
            held = terms(draft.text[a:b]) & distinctive
            if len(held) >= need:
                sa, sb = draft.sentences[i]
                out.append(_finding(
                    draft_id, draft, SPOILER, e, (sa, sb), [s],
                    f"this passage reveals what canon hides until chapter {s.hidden_until} about {e.name} "
                    f"({e.kind} {e.key}): {', '.join(sorted(held))}", detail=str(s.step)))
                break
    return out


# -- field conflicts ----------------------------------------------------------------------------

def _norm(value: str) -> str:
    v = " ".join(value.casefold().split())
    return _SAME.get(v, v)


def _number(word: str) -> int | None:
    w = word.casefold()
    if w.isdigit():
        return int(w)
    if w in _NUMBER_WORDS:
        return _NUMBER_WORDS[w]
    parts = re.split(r"[-\s]", w)
    if len(parts) == 2 and parts[0] in _NUMBER_WORDS and parts[1] in _NUMBER_WORDS:
        return _NUMBER_WORDS[parts[0]] + _NUMBER_WORDS[parts[1]]
    return None


def _words(text: str, a: int, b: int) -> list[tuple[int, int, str]]:
    """The words of ``text[a:b]`` with their offsets in ``text``; hyphenated words split, so
    "nineteen-year-old" gives "nineteen" and "year-old"."""
    out = []
    for m in _WORD.finditer(text, a, b):
        w, start = m.group(), m.start()
        pieces = re.split(r"(-)", w)
        if len(pieces) > 1 and pieces[0].casefold() in _NUMBER_WORDS or pieces[0].isdigit():
            out.append((start, start + len(pieces[0]), pieces[0]))
            rest = w[len(pieces[0]) + 1:]
            if rest:
                out.append((start + len(pieces[0]) + 1, m.end(), rest))
        else:
            out.append((start, m.end(), w))
    return out


def _field_words(field: str) -> tuple[str, ...]:
    name = field.casefold()
    if name in FIELD_WORDS:
        return FIELD_WORDS[name]
    spoken = name.replace("_", " ")
    return tuple(dict.fromkeys((spoken, spoken + "s", spoken.rstrip("s"))))


def _fields(draft_id: str, draft: _Draft, chapter: int, e: _Entry, spans: list[tuple[int, int]],
            entries: list[_Entry], named: dict[tuple[str, str], list[tuple[int, int]]]) -> list[Finding]:
    now = _in_force(e, chapter)
    if now is None or now.retired or not now.facts:
        return []
    before = _in_force(e, chapter - 1) if now.valid_from == chapter else None
    allowed_by_field = {f: {_value_key(v)} | ({_value_key(before.facts[f])} if before and f in before.facts else set())
                        for f, v in now.facts.items()}
    others = _other_values(entries)
    places = {_norm(k) for x in entries if x.kind == "location" for s in x.steps for k in (s.name, *s.aliases)}
    owners = sorted((span, kk) for kk, sp in named.items() for span in sp)
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for span in _plain(draft, spans):
        i = draft.sentence_of(span[0])
        a, b = draft.sentences[i]
        words = _words(draft.unquoted(a, b), 0, b - a)
        words = [(x + a, y + a, w) for x, y, w in words]
        for field, value in sorted(now.facts.items()):
            if field in _STATE_FIELDS or field.casefold() in ("name", "kind", "key"):
                said = _stated_state(words, span, value) if field in _STATE_FIELDS else None
            else:
                said = _stated(words, span, field, value, others.get(field, set()), places, owners, (e.kind, e.key))
            if said is None:
                continue
            start, end, stated = said
            if _value_key(stated) in allowed_by_field[field] or (field, _norm(stated)) in seen:
                continue
            seen.add((field, _norm(stated)))
            proof = [s for s in (now, before) if s is not None and field in s.facts]
            out.append(_finding(
                draft_id, draft, FIELD_CONFLICT, e, (start, end), proof,
                f"the draft gives {e.name}'s {field.replace('_', ' ')} as {stated!r}; canon in force at chapter "
                f"{chapter} says {value!r} (from chapter {now.valid_from})", detail=f"{field}={_norm(stated)}"))
    return out


def _value_key(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).casefold()
    if isinstance(value, (int, float)):
        return str(int(value)) if float(value).is_integer() else str(value)
    n = _number(str(value))
    return str(n) if n is not None else _norm(str(value))


def _other_values(entries: list[_Entry]) -> dict[str, set[str]]:
    """Each fact name's values anywhere in the entries read (every version of every entry)."""
    out: dict[str, set[str]] = {}
    for x in entries:
        for s in x.steps:
            for f, v in s.facts.items():
                if isinstance(v, str):
                    out.setdefault(f, set()).add(_norm(v))
    return out


_WINDOW = 4  # words either side of a fact's word where its value may be written
_OBJECT_PRONOUNS = frozenset("him them he she they it its one another other someone".split())


def _stated(words: list[tuple[int, int, str]], span: tuple[int, int], field: str, value: Any, others: set[str],
            places: set[str], owners: list[tuple[tuple[int, int], tuple[str, str]]],
            who: tuple[str, str]) -> tuple[int, int, str] | None:
    """A value the sentence (``words``) states for ``field`` of the entry named at ``span``, or None.
    The fact's word must be nearer to this name than to any other entry's name in the sentence,
    with no pronoun or other possessor between them."""
    folded = [w.casefold() for _, _, w in words]
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    colour = field.casefold() in _COLOUR_FIELDS
    place = isinstance(value, str) and _norm(value) in places or field.casefold() in ("home", "hometown", "residence")
    candidates = others | (COLOURS if colour else set()) | (places if place else set())
    for fw in _field_words(field):
        parts = fw.split()
        for i in range(len(folded) - len(parts) + 1):
            if folded[i:i + len(parts)] != parts:
                continue
            at = words[i][0]
            if _owner(at, owners) != who or not _clear(words, span, i):
                continue
            lo, hi = max(0, i - _WINDOW), min(len(words), i + len(parts) + _WINDOW)
            window = list(range(lo, i)) + list(range(i + len(parts), hi))
            if any(_value_key(" ".join(folded[j:j + len(_norm(str(value)).split())])) == _value_key(value)
                   for j in window):
                return None  # the value in force is written here too
            for j in window:
                n = _number(folded[j]) if numeric else None
                if numeric and n is not None:
                    return words[j][0], words[j][1], words[j][2]
                for size in (3, 2, 1):
                    phrase = " ".join(folded[j:j + size])
                    if j + size <= hi and _norm(phrase) in candidates and not numeric:
                        return words[j][0], words[j + size - 1][1], " ".join(w for _, _, w in words[j:j + size])
    return None


def _owner(at: int, owners: list[tuple[tuple[int, int], tuple[str, str]]]) -> tuple[str, str] | None:
    """The entry whose name is nearest to offset ``at``."""
    best: tuple[int, tuple[str, str]] | None = None
    for (start, end), who in owners:
        d = at - end if end <= at else start - at
        if d >= 0 and (best is None or d < best[0]):
            best = (d, who)
    return None if best is None else best[1]


def _clear(words: list[tuple[int, int, str]], span: tuple[int, int], i: int) -> bool:
    """Between the name at ``span`` and word ``i`` is no pronoun that could be another person,
    no clause break, and no other possessor ("the stranger's")."""
    lo, hi = (span[1], words[i][0]) if span[1] <= words[i][0] else (words[i][1], span[0])
    between = [w for s, e, w in words if s >= lo and e <= hi]
    if any(w.casefold() in _OBJECT_PRONOUNS for w in between):
        return False
    if any(w.casefold().endswith(("'s", "’s")) for w in between):
        return False
    if len(between) > 2 * _WINDOW:
        return False
    return True


def _stated_state(words: list[tuple[int, int, str]], span: tuple[int, int], value: Any) -> tuple[int, int, str] | None:
    """A state "<name> was|is|lay <state word>" gives, when the state word is one of the
    availability or life words and differs from ``value``."""
    if not isinstance(value, str):
        return None
    after = [(s, e, w) for s, e, w in words if s >= span[1]][:4]
    folded = [w.casefold() for _, _, w in after]
    states = UNAVAILABLE | {"alive", "free", "living", "present", "safe", "well"}
    for verb in _STATE_VERBS:
        parts = verb.split()
        if folded[:len(parts)] == parts and len(folded) > len(parts):
            j = len(parts)
            if folded[j] == "still" and len(folded) > j + 1:
                j += 1
            if folded[j] in states:
                return after[j][0], after[j][1], after[j][2]
    return None


# -- availability -------------------------------------------------------------------------------

def _unavailable(draft_id: str, draft: _Draft, chapter: int, e: _Entry, spans: list[tuple[int, int]],
                 vocabulary: Vocabulary) -> list[Finding]:
    now = _in_force(e, chapter)
    if now is None or now.retired or now.valid_from >= chapter:
        return []
    state = next((str(now.facts[f]) for f in _STATE_FIELDS if f in now.facts), now.state)
    if not state or not {w.casefold() for w in _WORD.findall(state)} & vocabulary.unavailable:
        return []
    acting = [s for s in _plain(draft, spans) if _acts(draft, s)]
    if not acting:
        return []
    return [_finding(draft_id, draft, UNAVAILABLE_CHARACTER, e, acting[0], [now],
                     f"{e.name} is {state} in canon from chapter {now.valid_from}, but acts in this draft of "
                     f"chapter {chapter}" + _more(len(acting) - 1))]


def _acts(draft: _Draft, span: tuple[int, int]) -> bool:
    """Is the name at ``span`` the subject of an action ("<name> [adverb] <verb>"), or named by a
    speech tag ("said <name>")?"""
    text = draft.text
    if text[span[1]:span[1] + 2] in ("'s", "’s"):
        return False
    after = _WORD.findall(text[span[1]:span[1] + 60])
    if after and after[0].casefold().endswith("ly") and len(after) > 1:
        after = after[1:]
    if after:
        verb = after[0]
        gap = text[span[1]:span[1] + 60]
        if not re.match(r"[ \t]+(?:\w+ly[ \t]+)?" + re.escape(verb), gap):
            verb = ""
        v = verb.casefold()
        if v in ACTIONS or (v.endswith("ed") and len(v) > 4 and v not in _NOT_VERBS and verb.islower()):
            return True
    before = _WORD.findall(text[max(0, span[0] - 30):span[0]])
    return bool(before) and before[-1].casefold() in ("said", "asked", "replied", "whispered", "shouted", "cried",
                                                      "called", "answered")
