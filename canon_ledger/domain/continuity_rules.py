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

Precision comes first (a check that cries wolf is switched off). No rule but the spoiler rule
reads text inside quotation marks (straight or curly double quotes, guillemets, 「」『』, and
‘single quotes’ that open after a space), and each reads no statement that one of these cues
qualifies:

- quoted speech (a character may be wrong, lie, or speak of the past);
- memory and the past: ``remembered``, ``recalled``, ``memory``, ``dreamed``, ``once``,
  ``used to``, ``ago``, ``the late``, ``grave``, ``funeral``, ``ghost``, ``mourned``, a past
  perfect (``had`` + participle), ...;
- negation: ``not``, ``n't``, ``never``, ``no``, ``nor``, ``without``, ``nobody``, ...;
- the hypothetical and hearsay: ``if``, ``would``, ``might``, ``as if``, ``wished``,
  ``imagined``, ``rumour``, ``legend``, ``believed``, ...

Where a cue counts, by rule (a cue outside its reach qualifies something else):

- field conflict: a memory word anywhere in the sentence; a negation, a past perfect or the
  hypothetical in the clause (between commas, semicolons, colons, dashes) that states the value
  ("Charlotte, who was thirty-two years old, had never been handsome" states an age);
- unavailable character: a memory word anywhere in the sentence; a negation, a past perfect or
  the hypothetical before the action ("Harl strode in as if nothing had happened" acts);
- retired: a memory word, a past perfect or a negation anywhere in the sentence (a retired
  entry may be remembered or denied);
- not yet in canon: only foreshadowing (``rumour``, ``legend``, ``tale``, ``prophecy``, ``if``,
  ``unless``): what is to come may be foretold, not remembered.

Spoilers are read in quotes too: a character who says the secret reveals it.

The field and availability rules read English; in other languages the check finds what the
not-yet, retired and spoiler rules find.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.continuity import ERROR, WARNING, Evidence, Finding, Step
from canon_ledger.domain.recall import bounded, spaceless_key
from canon_ledger.domain.summary import STOPWORDS, sentence_starts

NOT_YET, RETIRED, SPOILER, FIELD_CONFLICT, UNAVAILABLE_CHARACTER, KNOWLEDGE_LEAK = (
    "not_yet_in_canon", "retired", "spoiler", "field_conflict", "unavailable_character", "knowledge_leak")
TYPES = (NOT_YET, RETIRED, SPOILER, FIELD_CONFLICT, UNAVAILABLE_CHARACTER, KNOWLEDGE_LEAK)
SEVERITY = {NOT_YET: ERROR, RETIRED: WARNING, SPOILER: ERROR, FIELD_CONFLICT: ERROR, UNAVAILABLE_CHARACTER: ERROR,
            KNOWLEDGE_LEAK: ERROR}

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
                 "thought wondered claimed prophecy prophesied foretold")
MEMORY, NEGATION, HYPOTHETICAL = frozenset(_MEMORY.split()), frozenset(_NEGATION.split()), frozenset(
    _HYPOTHETICAL.split())
CUES = MEMORY | NEGATION | HYPOTHETICAL
# What keeps a not-yet mention from being one: hearsay of what is to come (foreshadowing).
FORESHADOWING = frozenset("rumour rumours rumor rumors rumoured rumored legend legends tale tales prophecy "
                          "prophesied foretold if unless".split())
_IRREGULAR = frozenset(
    "been worn grown known seen gone done taken given written spoken broken chosen fallen forgotten hidden ridden "
    "risen driven eaten beaten born borne sworn torn thrown shown flown drawn sung begun swum run come become kept "
    "left felt held told sold found bought brought thought fought caught taught sought made said paid laid led fed "
    "met sat stood lost meant sent spent built lent bent dealt dreamt slept wept crept swept knelt heard hung "
    "struck stuck won spun shot got gotten put set let cut hit hurt shut read understood wore grew knew saw".split())
_NEGATION_PHRASE = re.compile(r"n['’]t\b", re.I)
_MEMORY_PHRASES = re.compile(r"\bused to\b|\bthe late\b|\bhad\s+(?:once\s+|always\s+|never\s+)?([^\W\d_]+)", re.I)
_HYPOTHETICAL_PHRASES = re.compile(r"\bas (?:if|though)\b", re.I)

ACTIONS = frozenset(
    "said says asked asks replied replies answered answers whispered shouted called cried laughed laughs smiled "
    "smiles grinned nodded nods shrugged sighed frowned winked walked walks ran runs rode rides came comes went goes "
    "entered enters left leaves stood stands sat sits rose rises stepped steps turned turns looked looks took takes "
    "gave gives drew draws grabbed seized lifted raised opened opens closed closes pushed pulled struck strikes "
    "fought fights swung swings threw throws caught catches climbed jumped leapt leaped knelt kneels bowed waved "
    "pointed reached held holds carried carries wrote writes read reads spoke speaks argued insisted ordered "
    "commanded demanded told tells met meets greeted hugged kissed killed kills attacked attacks watched watches "
    "waited waits moved moves crossed hurried strode marched slipped glanced stared paced poured drank ate "
    "handed signed arrived arrives returned returns joined joins led leads followed follows crept sprinted kept "
    "keeps brought brings sent sends found finds began begins tried tries stopped stops thanked sang sings shook "
    "fed wore woke slept bent knocked lit tore set put cut hid hides dragged dropped pressed leaned leant counted "
    "rowed sailed rushed fled appeared appears emerged limped staggered knelt listened heard sees saw".split())
# Verbs after which a name is the subject in an inversion ("Beside the well stood Greta").
_INVERTED = frozenset("said asked replied whispered shouted cried called answered stood sat came rode walked "
                      "waited appeared".split())
_NOT_VERBS = frozenset("red bed shed wed sled need seed feed breed weed steed creed hundred sacred naked wicked "
                       "ragged rugged beloved blessed cursed learned aged".split())

COLOURS = frozenset(
    "black blue brown green grey gray hazel amber violet golden gold silver red white yellow auburn blond blonde "
    "ginger chestnut copper pink purple orange dark pale".split())
_SAME = {"gray": "grey", "blonde": "blond", "colour": "color"}
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_NUMBER_WORDS.update(_TENS)
# The words that name a fact in prose, for fact names a draft rarely writes as such (hyphens
# split: "year-old" is the words "year" "old").
FIELD_WORDS: dict[str, tuple[str, ...]] = {
    "eyes": ("eyes", "eye", "eyed"), "eye": ("eyes", "eye", "eyed"), "eye_color": ("eyes", "eye", "eyed"),
    "eye_colour": ("eyes", "eye", "eyed"), "hair": ("hair", "haired"), "hair_color": ("hair", "haired"),
    "hair_colour": ("hair", "haired"), "age": ("age", "aged", "year old", "years old", "years of age"),
    "home": ("home", "lives in", "lived in", "living in", "hometown"), "hometown": ("home", "hometown"),
    "residence": ("home", "lives in", "lived in", "living in"),
}
_COLOUR_FIELDS = frozenset({"eyes", "eye", "eye_color", "eye_colour", "hair", "hair_color", "hair_colour", "skin",
                            "color", "colour"})
_PLACE_FIELDS = frozenset({"home", "hometown", "residence", "birthplace", "location"})
_AGE_FIELDS = frozenset({"age"})
_STATE_FIELDS = ("status", "state")
_STATE_VERBS = ("was", "is", "lay", "remained", "remains", "had been", "has been", "now")
_AGE_VERBS = ("was", "is", "turned", "had turned", "was now", "is now")
_ARTICLES = frozenset({"the", "a", "an"})
# Words that may stand between a possessive name and its fact word ("Mira's long grey hair").
_DESCRIBING = frozenset("long short dark light pale bright cold clear deep wild thick thin fine straight curly "
                        "wavy sharp soft hard narrow wide round".split())

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_OPEN_CLOSE = {"“": "”", "«": "»", "「": "」", "『": "』", "„": "“"}
_CLAUSE_MARK = re.compile(r"[,;:()\[\]—–]|\s-\s")


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
class Knowledge:
    """Who may know a secret at the draft's chapter: the chapter's point-of-view characters
    (``add_scene_card.pov``), and what each character knows as of the chapter
    (``record_knowledge``), as (character, kind, key)."""

    povs: frozenset[str] = frozenset()
    known: frozenset[tuple[str, str, str]] = frozenset()


@dataclass(frozen=True)
class _Entry:
    kind: str
    key: str
    steps: tuple[Step, ...]


class _Draft:
    """The draft's text, its sentences, the ranges inside quotation marks, and the cues of each
    sentence (read once)."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0, *(s for s in sentence_starts(text) if 0 < s < len(text))]
        self.sentences = [(a, b) for a, b in zip(starts, [*starts[1:], len(text)]) if text[a:b].strip()] or [(0, 0)]
        self._sentence_starts = [a for a, _ in self.sentences]
        self.quoted = _quoted(text)
        self._quote_starts = [a for a, _ in self.quoted]
        self._cues: dict[int, frozenset[str]] = {}

    def sentence_of(self, at: int) -> int:
        return max(0, bisect_right(self._sentence_starts, at) - 1)

    def in_quotes(self, start: int) -> bool:
        i = bisect_right(self._quote_starts, start) - 1
        return i >= 0 and start < self.quoted[i][1]

    def unquoted(self, a: int, b: int) -> str:
        """``text[a:b]`` with the quoted parts blanked (same length)."""
        chars = list(self.text[a:b])
        for qa, qb in self.quoted:
            if qb <= a or qa >= b:
                continue
            for i in range(max(qa, a), min(qb, b)):
                chars[i - a] = " "
        return "".join(chars)

    def cues(self, sentence: int) -> frozenset[str]:
        """The cue classes (MEMORY, NEGATION, HYPOTHETICAL, FORESHADOWING) the sentence holds
        outside its quotes."""
        if sentence not in self._cues:
            a, b = self.sentences[sentence]
            self._cues[sentence] = _cues_of(self.unquoted(a, b))
        return self._cues[sentence]

    def cues_between(self, a: int, b: int) -> frozenset[str]:
        """The cue classes of ``text[a:b]`` outside quotes."""
        return _cues_of(self.unquoted(a, max(a, b)))

    def clause(self, at: int) -> tuple[int, int]:
        """The clause of the sentence that holds offset ``at``: between the clause marks
        (``,;:`` dashes, brackets) around it."""
        a, b = self.sentences[self.sentence_of(at)]
        text = self.text
        start = max((m.end() for m in _CLAUSE_MARK.finditer(text, a, at)), default=a)
        after = _CLAUSE_MARK.search(text, at, b)
        return start, after.start() if after is not None else b


def _cues_of(plain: str) -> frozenset[str]:
    words = {w.casefold() for w in _WORD.findall(plain)}
    out = set()
    if words & MEMORY:
        out.add("memory")
    if _past_perfect(plain):
        out.add("perfect")
    if words & NEGATION or _NEGATION_PHRASE.search(plain):
        out.add("negation")
    if words & HYPOTHETICAL or _HYPOTHETICAL_PHRASES.search(plain):
        out.add("hypothetical")
    if words & FORESHADOWING:
        out.add("foreshadowing")
    return frozenset(out)


def _past_perfect(plain: str) -> bool:
    """"used to", "the late", or "had" with a participle ("had walked", "had worn", "had been")."""
    for m in _MEMORY_PHRASES.finditer(plain):
        word = m.group(1)
        if word is None:
            return True
        w = word.casefold()
        if w in _IRREGULAR or (w.endswith("ed") and w not in _NOT_VERBS and w not in COLOURS):
            return True
    return False


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


def _capital_at(key: str) -> int | None:
    """Where, in ``key``, the letter is that must be a capital in the draft too: the first
    letter of its first word that is not an article ("The Bone Flute": the B), when that letter
    is a capital; None when the key asks for no capital."""
    offset = 0
    for word in key.split(" "):
        if word.casefold() not in _ARTICLES:
            return offset if word[:1].isupper() else None
        offset += len(word) + 1
    return None


def _occurrences(draft: _Draft, keys: Iterable[str]) -> list[tuple[int, int]]:
    """Where the keys occur in the draft as recall counts them (whole words, any case; a key
    with no ASCII letter or digit anywhere), a capitalised name only capitalised (``_capital_at``);
    the longest at each start, in text order, none overlapping."""
    found: dict[int, int] = {}
    text = draft.text
    for key in keys:
        key = key.strip()
        if not key:
            continue
        capital = _capital_at(key)
        for m in re.finditer(re.escape(key), text, re.IGNORECASE):
            start, end = m.span()
            if capital is not None and not text[start + capital].isupper():
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


@dataclass
class _Check:
    """One check's shared reads: the draft, the chapter, the entries and where each is named."""

    draft_id: str
    draft: _Draft
    chapter: int
    entries: list[_Entry]
    named: dict[tuple[str, str], list[tuple[int, int]]]
    vocabulary: Vocabulary
    knowledge: Knowledge = Knowledge()

    def __post_init__(self) -> None:
        self.values: dict[str, set[str]] = {}  # each fact's values anywhere in the entries read
        for x in self.entries:
            for st in x.steps:
                for f, v in st.facts.items():
                    if isinstance(v, str):
                        self.values.setdefault(f, set()).add(_norm(v))
        self.places = {_norm(k) for x in self.entries if x.kind == "location" for st in x.steps
                       for k in (st.name, *st.aliases) if not st.retired}
        self.kinds = {(x.kind, x.key): x.kind for x in self.entries}
        self.by_sentence: dict[int, list[tuple[tuple[int, int], tuple[str, str]]]] = {}
        for who, spans in self.named.items():
            for span in spans:
                self.by_sentence.setdefault(self.draft.sentence_of(span[0]), []).append((span, who))

    def finding(self, type_: str, e: _Entry, span: tuple[int, int], evidence: Sequence[Step], message: str,
                detail: str = "") -> Finding:
        start, end = span
        proof = tuple(Evidence(s.text, s.valid_from, s.source, s.hidden_until) for s in evidence)
        name = _name_at(e, self.chapter) or self.draft.text[start:end]
        return Finding(finding_id(self.draft_id, type_, e.kind, e.key, detail, start, end, [p.source for p in proof]),
                       type_, SEVERITY[type_], e.kind, e.key, name, start, end, self.draft.text[start:end], proof,
                       message)

    def plain(self, spans: list[tuple[int, int]], ignore: frozenset[str] = frozenset()) -> list[tuple[int, int]]:
        """The spans outside quotes, in sentences without a cue (but those of ``ignore``)."""
        return [s for s in spans if not self.draft.in_quotes(s[0])
                and not (self.draft.cues(self.draft.sentence_of(s[0])) - ignore)]


def check(draft_id: str, text: str, chapter: int, steps: Sequence[Step],
          vocabulary: Vocabulary = Vocabulary(), knowledge: Knowledge = Knowledge()) -> list[Finding]:
    """Every finding of the draft of ``chapter``, given every step of the entries it mentions
    (any order); sorted by (span start, type, kind, key)."""
    entries = _entries(steps)
    draft = _Draft(text)
    named = {(e.kind, e.key): found for e in entries if (found := _occurrences(draft, _keys(e)))}
    c = _Check(draft_id, draft, chapter, entries, named, vocabulary, knowledge)
    out: list[Finding] = []
    for e in entries:
        out.extend(_leaks(c, e))
        spans = named.get((e.kind, e.key))
        if not spans:
            continue
        out.extend(_timeline(c, e, spans))
        out.extend(_spoilers(c, e, spans))
        out.extend(_fields(c, e, spans))
        if e.kind == "character":
            out.extend(_unavailable(c, e, spans))
    return sorted(out, key=lambda f: (f.start, TYPES.index(f.type), f.kind, f.key, f.id))


def _entries(steps: Sequence[Step]) -> list[_Entry]:
    by: dict[tuple[str, str], list[Step]] = {}
    for s in sorted(steps, key=lambda s: (s.kind, s.key, s.step)):
        by.setdefault((s.kind, s.key), []).append(s)
    return [_Entry(kind, key, tuple(timeline)) for (kind, key), timeline in by.items()
            if (kind, key) != VOCABULARY_ENTRY and any(not s.retired for s in timeline)]


def _keys(e: _Entry) -> list[str]:
    return list(dict.fromkeys(k for s in e.steps if not s.retired for k in s.keys))


def _hidden(s: Step, chapter: int) -> bool:
    return hidden_at(s.hidden_until, chapter)


def _in_force(e: _Entry, chapter: int) -> Step | None:
    return next((s for s in e.steps if s.holds_at(chapter)), None)


def _shown(e: _Entry, chapter: int) -> Step | None:
    """The step a reader at ``chapter`` may know: the one in force, unless it is hidden past the
    chapter, then the latest shown one before it (a version, or a retirement)."""
    shown = [s for s in e.steps if s.valid_from <= chapter and not _hidden(s, chapter)
             and (s.valid_to is None or s.valid_to > s.valid_from)]
    now = _in_force(e, chapter)
    if now is not None and not _hidden(now, chapter):
        return now
    return max(shown, key=lambda s: (s.valid_from, s.step)) if shown else None


def _name_at(e: _Entry, chapter: int) -> str | None:
    """The entry's name a reader at ``chapter`` may know (None: none is shown yet)."""
    shown = [s for s in e.steps if not s.retired and s.valid_from <= chapter and not _hidden(s, chapter)]
    return max(shown, key=lambda s: (s.valid_from, s.step)).name if shown else None


def finding_id(draft_id: str, type_: str, kind: str, key: str, detail: str, start: int, end: int,
               sources: Sequence[int]) -> str:
    raw = json.dumps([draft_id, type_, kind, key, detail, start, end, list(sources)], ensure_ascii=False)
    return "fnd_" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def _more(n: int) -> str:
    return f" (and {n} more place{'s' if n > 1 else ''})" if n else ""


def _timeline(c: _Check, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    effective = [s for s in e.steps if s.valid_to is None or s.valid_to > s.valid_from]
    if not effective:
        return []
    first = min(effective, key=lambda s: (s.valid_from, s.step))
    if first.valid_from > c.chapter:
        # Foreshadowing (a rumour, a legend, a prophecy) may name what is to come.
        plain = c.plain(spans, ignore=frozenset({"memory", "negation", "hypothetical"}))
        plain = [s for s in plain if "foreshadowing" not in c.draft.cues(c.draft.sentence_of(s[0]))]
        if not plain:
            return []
        said = c.draft.text[plain[0][0]:plain[0][1]]
        return [c.finding(NOT_YET, e, plain[0], [first],
                          f"{said!r} ({e.kind} {e.key}) is not in canon until chapter {first.valid_from}; this draft "
                          f"is chapter {c.chapter}" + _more(len(plain) - 1))]
    now = _in_force(e, c.chapter)
    if now is not None and now.retired:
        # A retired entry may be remembered or denied, and hoped for.
        plain = c.plain(spans, ignore=frozenset({"hypothetical", "foreshadowing"}))
        if not plain:
            return []
        name = _name_at(e, c.chapter) or c.draft.text[plain[0][0]:plain[0][1]]
        return [c.finding(RETIRED, e, plain[0], [now],
                          f"{name} ({e.kind} {e.key}) was retired from canon at chapter {now.valid_from}: "
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


def _spoilers(c: _Check, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    hidden = [s for s in e.steps if not s.retired and _hidden(s, c.chapter)]
    if not hidden:
        return []
    shown = set()
    for s in e.steps:
        if not s.retired and s.valid_from <= c.chapter and not _hidden(s, c.chapter):
            shown |= terms(_body(s))
    names = terms(" ".join(k for s in e.steps for k in (s.name, *s.aliases, *s.keys)))
    draft, out = c.draft, []
    for s in hidden:
        distinctive = terms(_body(s)) - shown - names
        if len(distinctive) < 2:
            continue
        need = spoiler_needs(len(distinctive))
        for start, _ in spans:
            i = draft.sentence_of(start)
            a = draft.sentences[i][0]
            b = draft.sentences[min(i + 1, len(draft.sentences) - 1)][1]
            held = terms(draft.text[a:b]) & distinctive
            if len(held) >= need:
                name = _name_at(e, c.chapter) or draft.text[start:spans[0][1]]
                out.append(c.finding(
                    SPOILER, e, draft.sentences[i], [s],
                    f"this passage reveals what canon hides until chapter {s.hidden_until} about {name} "
                    f"({e.kind} {e.key}): {', '.join(sorted(held))}", detail=str(s.step)))
                break
    return out


# -- field conflicts ----------------------------------------------------------------------------

def _norm(value: str) -> str:
    v = " ".join(value.casefold().replace("-", " ").split())
    return _SAME.get(v, v)


def _number(words: Sequence[str]) -> tuple[int, int] | None:
    """The number ``words`` start with ("17", "seventeen", "thirty seven") and how many words it
    takes, or None."""
    if not words:
        return None
    w = words[0]
    if w.isdigit():
        return int(w), 1
    if w in _TENS and len(words) > 1 and words[1] in _NUMBER_WORDS and _NUMBER_WORDS[words[1]] < 10:
        return _TENS[w] + _NUMBER_WORDS[words[1]], 2
    if w in _NUMBER_WORDS:
        return _NUMBER_WORDS[w], 1
    return None


def _words(text: str, a: int, b: int) -> list[tuple[int, int, str]]:
    """The words of ``text[a:b]`` with their offsets in ``text`` (hyphens split them: "blue-eyed"
    is "blue" "eyed")."""
    return [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text, a, b)]


def _field_words(field: str) -> tuple[tuple[str, ...], ...]:
    name = field.casefold()
    if name in FIELD_WORDS:
        spoken: tuple[str, ...] = FIELD_WORDS[name]
    else:
        plain = name.replace("_", " ")
        spoken = tuple(dict.fromkeys((plain, plain + "s", plain.rstrip("s"))))
    return tuple(tuple(w.split()) for w in spoken)


def _value_key(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).casefold()
    if isinstance(value, (int, float)):
        return str(int(value)) if float(value).is_integer() else str(value)
    text = _norm(str(value))
    n = _number(text.split())
    return str(n[0]) if n is not None and n[1] == len(text.split()) else text


def _fields(c: _Check, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    now = _shown(e, c.chapter)
    if now is None or now.retired or not now.facts or not now.holds_at(c.chapter):
        return []
    before = _shown(e, c.chapter - 1) if now.valid_from == c.chapter else None
    before = before if before is not None and not before.retired else None
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for span in c.plain(spans, ignore=frozenset({"negation", "perfect", "hypothetical", "foreshadowing"})):
        i = c.draft.sentence_of(span[0])
        a, b = c.draft.sentences[i]
        words = _words(c.draft.unquoted(a, b), 0, b - a)
        words = [(x + a, y + a, w) for x, y, w in words]
        owners = [(sp, who) for sp, who in c.by_sentence.get(i, []) if c.kinds.get(who) == e.kind]
        for field, value in sorted(now.facts.items()):
            if field.casefold() in ("name", "kind", "key"):
                continue
            if field in _STATE_FIELDS:
                said = _stated_state(words, span, value)
            else:
                said = _stated(c, words, span, field, value, owners, (e.kind, e.key))
            if said is None:
                continue
            start, end, stated = said
            allowed = {_value_key(value)} | ({_value_key(before.facts[field])} if before and field in before.facts
                                             else set())
            if _value_key(stated) in allowed or (field, _value_key(stated)) in seen:
                continue
            if c.draft.cues_between(*c.draft.clause(start)) & {"negation", "perfect", "hypothetical"}:
                continue  # "Mira's eyes were never blue", "Mira had had blue eyes", "if her eyes were blue"
            seen.add((field, _value_key(stated)))
            proof = [s for s in (now, before) if s is not None and field in s.facts]
            name = _name_at(e, c.chapter) or e.key
            out.append(c.finding(
                FIELD_CONFLICT, e, (start, end), proof,
                f"the draft gives {name}'s {field.replace('_', ' ')} as {stated!r}; canon in force at chapter "
                f"{c.chapter} says {value!r} (from chapter {now.valid_from})", detail=f"{field}={_value_key(stated)}"))
    return out


_WINDOW = 4  # words either side of a fact's word where its value may be written
_OBJECT_PRONOUNS = frozenset("him them he she they it its one another other someone".split())


def _stated(c: _Check, words: list[tuple[int, int, str]], span: tuple[int, int], field: str, value: Any,
            owners: list[tuple[tuple[int, int], tuple[str, str]]], who: tuple[str, str]) -> tuple[int, int, str] | None:
    """A value the sentence (``words``) states for ``field`` of the entry named at ``span``, or None.
    The fact's word must be nearer to this name than to any other name of the same kind in the
    sentence, with no pronoun or other possessor between them."""
    folded = [w.casefold() for _, _, w in words]
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    name = field.casefold()
    colour = name in _COLOUR_FIELDS
    place = name in _PLACE_FIELDS or (isinstance(value, str) and _norm(value) in c.places)
    candidates = c.values.get(field, set()) | (COLOURS if colour else set()) | (c.places if place else set())
    if numeric and name in _AGE_FIELDS:
        said = _stated_age(words, folded, span)
        if said is not None:
            return said
    for parts in _field_words(field):
        for i in range(len(folded) - len(parts) + 1):
            if tuple(folded[i:i + len(parts)]) != parts:
                continue
            if _owner(words[i][0], owners) != who or not _clear(words, folded, span, i, candidates):
                continue
            lo, hi = max(0, i - _WINDOW), min(len(words), i + len(parts) + _WINDOW)
            window = list(range(lo, i)) + list(range(i + len(parts), hi))
            shown = _value_key(value)
            if any(_value_key(" ".join(folded[j:j + len(shown.split())])) == shown for j in window):
                return None  # the value in force is written here too
            for j in window:
                if numeric:
                    n = _number(folded[j:hi])
                    if n is not None:
                        return words[j][0], words[j + n[1] - 1][1], " ".join(w for _, _, w in words[j:j + n[1]])
                    continue
                for size in (3, 2, 1):
                    if j + size <= hi and (j + size <= i or j >= i + len(parts)) and _norm(
                            " ".join(folded[j:j + size])) in candidates:
                        return words[j][0], words[j + size - 1][1], " ".join(w for _, _, w in words[j:j + size])
    return None


def _stated_age(words: list[tuple[int, int, str]], folded: list[str],
                span: tuple[int, int]) -> tuple[int, int, str] | None:
    """An age "<name> was|turned <number>" or "<name>, <number>," gives."""
    after = [k for k, (s, _, _) in enumerate(words) if s >= span[1]]
    if not after:
        return None
    k = after[0]
    for verb in _AGE_VERBS:
        parts = verb.split()
        if tuple(folded[k:k + len(parts)]) == tuple(parts):
            n = _number(folded[k + len(parts):])
            if n is not None:
                j = k + len(parts)
                following = folded[j + n[1]:j + n[1] + 1]
                if not following or following[0] in ("years", "year", "that", "this", "now", "when", "and", "in"):
                    return words[j][0], words[j + n[1] - 1][1], " ".join(w for _, _, w in words[j:j + n[1]])
    return None


def _owner(at: int, owners: list[tuple[tuple[int, int], tuple[str, str]]]) -> tuple[str, str] | None:
    """The entry whose name is nearest to offset ``at`` (of the names in its sentence)."""
    best: tuple[int, tuple[str, str]] | None = None
    for (start, end), who in owners:
        d = at - end if end <= at else start - at
        if d >= 0 and (best is None or d < best[0]):
            best = (d, who)
    return None if best is None else best[1]


def _clear(words: list[tuple[int, int, str]], folded: list[str], span: tuple[int, int], i: int,
           candidates: set[str]) -> bool:
    """Between the name at ``span`` and word ``i`` is no pronoun that could be another person, no
    other possessor ("the stranger's"), and, after a possessive name, only describing words
    ("Mira's long grey hair", not "Teodor's daughter had brown eyes")."""
    before = span[1] <= words[i][0]
    lo, hi = (span[1], words[i][0]) if before else (words[i][1], span[0])
    between = [k for k, (s, e, _) in enumerate(words) if s >= lo and e <= hi]
    if len(between) > 2 * _WINDOW:
        return False
    for k in between:
        w = folded[k]
        if w in _OBJECT_PRONOUNS or w.endswith(("'s", "’s")):
            return False
    if before and _possessed(words, span):
        return all(folded[k] in candidates or folded[k] in COLOURS or folded[k] in _DESCRIBING
                   or _number([folded[k]]) is not None or folded[k] in ("and", "of") for k in between
                   if words[k][0] > span[1])
    return True


def _possessed(words: list[tuple[int, int, str]], span: tuple[int, int]) -> bool:
    """Is the name at ``span`` written as a possessive ("Mira's")?"""
    return any(s == span[0] and w.casefold().endswith(("'s", "’s")) for s, _, w in words) or any(
        s <= span[0] < e and w.casefold().endswith(("'s", "’s")) for s, e, w in words)


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

def _unavailable(c: _Check, e: _Entry, spans: list[tuple[int, int]]) -> list[Finding]:
    now = _shown(e, c.chapter)
    if now is None or now.retired or now.valid_from >= c.chapter or not now.holds_at(c.chapter):
        return []
    state = next((str(now.facts[f]) for f in _STATE_FIELDS if f in now.facts), now.state)
    if not state or not {w.casefold() for w in _WORD.findall(state)} & c.vocabulary.unavailable:
        return []
    acting = []
    for span in spans:
        if c.draft.in_quotes(span[0]):
            continue
        i = c.draft.sentence_of(span[0])
        if "memory" in c.draft.cues(i):
            continue  # remembered, dreamed, his grave ... anywhere in the sentence
        verb_end = _acts(c.draft, span, [sp for sp, _ in c.by_sentence.get(i, [])])
        # A negation, a past perfect or the hypothetical before the action undoes it ("Harl never
        # walked", "Harl had walked", "if Harl walked"); after it, it is about something else
        # ("Harl walked in as if nothing had happened").
        if verb_end is not None and not c.draft.cues_between(c.draft.sentences[i][0], verb_end) & {
                "negation", "perfect", "hypothetical"}:
            acting.append(span)
    if not acting:
        return []
    name = _name_at(e, c.chapter) or e.key
    return [c.finding(UNAVAILABLE_CHARACTER, e, acting[0], [now],
                      f"{name} is {state} in canon from chapter {now.valid_from}, but acts in this draft of "
                      f"chapter {c.chapter}" + _more(len(acting) - 1))]


_APPOSITIVE = re.compile(r",[^,.;:!?\"“”]{1,60},")
_SPEECH = ("said", "asked", "replied", "whispered", "shouted", "cried", "called", "answered", "muttered", "murmured",
           "told", "snapped", "hissed", "growled", "added", "insisted", "admitted", "confessed", "explained",
           "declared", "announced", "continued", "repeated", "warned", "breathed", "yelled", "blurted")


def _acts(draft: _Draft, span: tuple[int, int], names: list[tuple[int, int]]) -> int | None:
    """Where the verb ends of which the name at ``span`` is the subject ("<name> [adverb] <verb>",
    "<name>, <appositive>, <verb>", "<name> and <name> <verb>"), or where the name ends when a
    speech tag or an inversion names it ("said <name>", "stood <name>"); None if it does not act."""
    text = draft.text
    if text[span[1]:span[1] + 2] in ("'s", "’s"):
        return None
    at = span[1]
    m = _APPOSITIVE.match(text, at)
    if m is not None and len(_WORD.findall(m.group())) <= 6:
        at = m.end()
    else:
        partner = re.match(r"\s+and\s+", text[at:at + 8])
        if partner is not None:
            follows = next((n for n in names if n[0] == at + partner.end()), None)
            if follows is not None:
                at = follows[1]
    verb = re.match(r"[ \t]+(?:([^\W\d_]+ly)[ \t]+)?([^\W\d_]+)", text[at:at + 60])
    if verb is not None:
        v = verb.group(2)
        low = v.casefold()
        if low in ACTIONS or (low.endswith("ed") and len(low) > 4 and low not in _NOT_VERBS and v.islower()):
            return at + verb.end()
    before = _WORD.findall(text[max(0, span[0] - 30):span[0]])
    if before and before[-1].casefold() in (*_SPEECH, *_INVERTED) and not re.search(
            r"[.!?]\s*$", text[max(0, span[0] - 3):span[0]]):
        return span[1]
    return None


# -- who knows what -----------------------------------------------------------------------------

_THINKING = frozenset("knew know knows thought thinks realised realized suspected suspects guessed understood "
                      "wondered feared remembered recalled".split())


def _leaks(c: _Check, e: _Entry) -> list[Finding]:
    """``knowledge_leak``: a character who does not know a secret of ``e`` as of the chapter
    speaks it (its words inside quotes that a speech tag gives to that character) or, as the
    point-of-view character named in the narration, holds it in the sentence. A secret is the
    version in force with ``fields.secret`` (not hidden: a hidden one is the spoiler rule's); it
    is held where a passage holds ``spoiler_needs`` of its distinctive terms (as a spoiler's).
    A character knows the secrets of its own entry."""
    secret = _in_force(e, c.chapter)
    if secret is None or secret.retired or not secret.secret or _hidden(secret, c.chapter):
        return []
    shown = set()
    for s in e.steps:
        if not s.retired and not s.secret and s.valid_from <= c.chapter and not _hidden(s, c.chapter):
            shown |= terms(_body(s))
    names = terms(" ".join(k for s in e.steps for k in (s.name, *s.aliases, *s.keys)))
    distinctive = terms(_body(secret)) - shown - names
    if len(distinctive) < 2:
        return []
    need = spoiler_needs(len(distinctive))
    draft, out = c.draft, []
    for i, (a, b) in enumerate(draft.sentences):
        if len(terms(draft.text[a:b]) & distinctive) < need:
            continue
        for who, span, how in _knowers(c, i, distinctive, need):
            if who == e.key or (who, e.kind, e.key) in c.knowledge.known:
                continue
            person = _name_at(next(x for x in c.entries if (x.kind, x.key) == ("character", who)), c.chapter) or who
            name = _name_at(e, c.chapter) or e.key
            out.append(c.finding(
                KNOWLEDGE_LEAK, e, span, [secret],
                f"{person} {how} the secret of {name} ({e.kind} {e.key}) in force from chapter {secret.valid_from}, "
                f"but no record_knowledge says {person} knows it as of chapter {c.chapter}", detail=who))
            break
    return out


def _knowers(c: _Check, i: int, distinctive: set[str], need: int) -> list[tuple[str, tuple[int, int], str]]:
    """Who holds the secret in sentence ``i``: (character, span, how). A quotation holding it,
    whose speech tag ("said Mira", "Mira asked") names a character in the sentence; the narration
    (outside quotes) holding it, when it names a point-of-view character of the chapter."""
    draft = c.draft
    a, b = draft.sentences[i]
    people = [(span, who[1]) for span, who in c.by_sentence.get(i, []) if who[0] == "character"]
    out = []
    for qa, qb in draft.quoted:
        if qb <= a or qa >= b or len(terms(draft.text[qa:qb]) & distinctive) < need:
            continue
        earlier = [(span, who[1]) for span, who in c.by_sentence.get(i - 1, []) if who[0] == "character"]
        speaker = _speaker(draft, people, qa, qb) or _pronoun_speaker(draft, earlier + people, qa, qb)
        if speaker is not None:
            out.append((speaker, (qa, qb), "speaks"))
    plain = draft.unquoted(a, b)
    # The narration: not where it says the point of view does not know it ("had no idea that").
    if len(terms(plain) & distinctive) >= need and "negation" not in draft.cues(i):
        for span, who in people:
            if who in c.knowledge.povs and not draft.in_quotes(span[0]):
                out.append((who, (a, b), "(the point of view) holds"))
    return out


def _speaker(draft: _Draft, people: list[tuple[tuple[int, int], str]], qa: int, qb: int) -> str | None:
    """The character a speech tag next to the quotation ``qa:qb`` names: "<quote>," said Mira /
    Mira said / Mira asked, "<quote>"."""
    text = draft.text
    # Nearest first: in '"...," Crispin told Osric' the speaker is Crispin, not Osric.
    for span, who in sorted(people, key=lambda p: min(abs(p[0][0] - qb), abs(qa - p[0][1]))):
        if span[0] >= qb and span[0] - qb <= 25:  # after the quote: ", said Mira" or " Mira said"
            between = _WORD.findall(text[qb:span[0]])
            after = _WORD.findall(text[span[1]:span[1] + 20])
            if (between and between[-1].casefold() in _SPEECH) or (not between and after
                                                                   and after[0].casefold() in _SPEECH):
                return who
        if span[1] <= qa and qa - span[1] <= 25:  # before it: "Mira said, " or "Mira whispered: "
            between = _WORD.findall(text[span[1]:qa])
            if between and between[0].casefold() in (*_SPEECH, *_THINKING):
                return who
    return None


_PRONOUN_TAG = re.compile(r"\W{0,3}(?:(?:he|she|they)\s+(\w+)|(\w+)\s+(?:he|she|they))\b", re.I)


def _pronoun_speaker(draft: _Draft, people: list[tuple[tuple[int, int], str]], qa: int, qb: int) -> str | None:
    """The speaker of a quotation tagged with a pronoun ('"...," she said'): the character named
    last before the quotation, outside quotes, in its sentence or the one before, when only one
    character is named there."""
    m = _PRONOUN_TAG.match(draft.text, qb)
    if m is None or (m.group(1) or m.group(2) or "").casefold() not in _SPEECH:
        return None
    before = [(span, who) for span, who in people if span[1] <= qa and not draft.in_quotes(span[0])]
    if len({who for _, who in before}) != 1:
        return None
    return before[-1][1]
