"""Mention-activated recall: the rule that brings a canon entry into a packet because its keys
are mentioned, or always, or never (pure).

An entry's ``Rule`` comes from, in order of precedence: ``fields.recall`` (the author's own
settings, checked when the entry is proposed), the activation settings a lorebook import kept
in ``fields.lorebook.entry`` (SillyTavern world info, CCv3 / character-card books, NovelAI, RisuAI),
and otherwise the entry's name and aliases, matched as whole words, case-insensitively.

Matching is SillyTavern's: a primary key must occur; then, when the rule has secondary keys,
its ``logic`` decides over how many of them occur (``and_any``: at least one, ``not_all``: not
every one, ``not_any``: none, ``and_all``: every one; SillyTavern's ``selectiveLogic`` 0-3). A
key written ``/pattern/flags`` is a regular expression. The automaton that finds the keys in a
chapter's texts lives in the read model (``projections.lore_index``); what counts as a whole
word is decided here (``found``), under one of two rules the caller chooses (``spaceless``):

- ``spaceless=False`` (the rule of packet compilers 1-6, kept so their packets replay): a
  whole-word key's match must not touch a letter, digit or ``_`` of any script on either side.
  So a Chinese or Japanese key never matches inside Chinese or Japanese text, which has no
  spaces between words.
- ``spaceless=True``: a key with no ASCII letter or digit (``spaceless_key``: Chinese,
  Japanese, Thai, Korean, Cyrillic, ...) matches as a substring, wherever it occurs; any other
  whole-word key must not touch a letter, digit or ``_`` of a script that spaces its words:
  a neighbour in a script written without spaces (Han, kana, Hangul, Thai, Lao, Khmer, Myanmar,
  ...; ``unspaced``) is a boundary, so ``GPT`` matches in ``用GPT模型`` and in Korean ``GPT가``.

  This is SillyTavern's rule (``matchKeys`` in its world-info.js): with whole words on, it
  tests ``(?:^|\\W)key(?:$|\\W)``, and JavaScript's ``\\W`` is ASCII-only, so every character
  outside ``[A-Za-z0-9_]`` is a boundary: a key without ASCII letters or digits matches
  anywhere in CJK text. Korean attaches particles to nouns (``엘리아가``, ``엘리아의``, ``검을``):
  SillyTavern matches the noun there (Hangul is ``\\W``) and so does this rule. Two departures,
  both deliberate: a spaceless key matches even beside an ASCII letter (``AI圣光``, where
  SillyTavern's ``\\W`` would refuse it), and a key with ASCII letters does not match inside
  a word of a spaced script (``cat`` is not found in ``catégorie``, where SillyTavern's ASCII
  ``\\W`` takes ``é`` as a boundary). SillyTavern also matches a key holding a space as a plain
  substring; here its two ends still need boundaries, as before.

Case is folded by Unicode rules (``str.casefold``: ``Straße`` matches ``STRASSE``) under both.

A rule may be ``gated``: the entry joins a packet only as its rule brings it in
(its keys mentioned, always-on) or when a scene card tags it, never through a read that lists
its kind wholesale (the world rules of P3, the active threads, the recent timeline). Every
imported lorebook entry is gated, as its source meant: a lorebook entry is inserted when it
is triggered. An author gates any entry with ``fields.recall.gated``. A rule's ``order`` (the
source's ``order`` / ``insertion_order`` / ``priority`` / ``insertorder``, or
``fields.recall.order``; DEFAULT_ORDER when none, SillyTavern's default) ranks the entries its
rule brings in when they share a budget, higher first; ``ignore_budget`` (SillyTavern's
"ignore budget") keeps an entry outside a story's lore cap.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.errors import RuleViolated
from canon_ledger.domain.lorebook import budget
from canon_ledger.domain.tiers import P1, RECALL_TIERS

LOGICS = ("and_any", "not_all", "not_any", "and_all")  # SillyTavern's selectiveLogic 0, 1, 2, 3
MAX_KEYS = 200  # keys (and secondary keys) per entry
MAX_KEY = 400  # characters per key
_REGEX_KEY = re.compile(r"^/(.+)/([a-z]*)$", re.S)
_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}
_SETTINGS = {"keys", "secondary_keys", "logic", "case_sensitive", "whole_words", "constant", "never", "tier", "gated",
             "order", "ignore_budget"}
DEFAULT_ORDER = 100.0  # an entry's order when its source gives none (SillyTavern's default)
MAX_ORDER = 1e9  # |order| an author may write


@dataclass(frozen=True)
class Rule:
    """When an entry joins a packet: its keys are mentioned (and its secondary keys satisfy
    ``logic``), or it is ``constant`` (always, at ``tier``), or ``never``."""

    keys: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    logic: str = "and_any"
    case_sensitive: bool = False
    whole_words: bool = True
    constant: bool = False
    never: bool = False
    tier: str = P1
    gated: bool = False
    order: float = DEFAULT_ORDER
    ignore_budget: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "secondary_keys": list(self.secondary), "logic": self.logic,
                "case_sensitive": self.case_sensitive, "whole_words": self.whole_words, "constant": self.constant,
                "never": self.never, "tier": self.tier, "gated": self.gated, "order": self.order,
                "ignore_budget": self.ignore_budget}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rule:
        """A rule as ``as_dict`` stored it; one stored by an older version has no ``gated``,
        ``order`` or ``ignore_budget`` and reads ungated (``canon rebuild`` projects it again, gated)."""
        return cls(tuple(d["keys"]), tuple(d["secondary_keys"]), d["logic"], d["case_sensitive"], d["whole_words"],
                   d["constant"], d["never"], d["tier"], d.get("gated", False), d.get("order", DEFAULT_ORDER),
                   d.get("ignore_budget", False))

    def selected(self, secondary_found: int) -> bool:
        """Do ``secondary_found`` of the secondary keys satisfy ``logic`` (a primary key matched)?"""
        total = len(self.secondary)
        if not total:
            return True
        return {"and_any": secondary_found > 0, "not_all": secondary_found < total, "not_any": secondary_found == 0,
                "and_all": secondary_found == total}[self.logic]


# Scripts written without spaces between words (and Hangul, whose particles attach to the word
# before them), as code point ranges: a neighbour in one of them is a word boundary for
# ``found(..., spaceless=True)``.
_UNSPACED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x1950, 0x19FF),  # Tai Le, New Tai Lue, Khmer symbols
    (0x1A20, 0x1AAF),  # Tai Tham
    (0x1B00, 0x1B7F),  # Balinese
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3000, 0x9FFF),  # CJK symbols, kana, Bopomofo, Hangul compatibility Jamo, CJK extension A, CJK ideographs
    (0xA000, 0xA4CF),  # Yi
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xA980, 0xA9FF),  # Javanese, Myanmar extended B
    (0xAA60, 0xAADF),  # Myanmar extended A, Tai Viet
    (0xAC00, 0xD7FF),  # Hangul syllables, Hangul Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # halfwidth katakana and Hangul
    (0x16FE0, 0x18AFF),  # ideographic symbols, Tangut
    (0x1B000, 0x1B2FF),  # kana supplements, Nushu
    (0x20000, 0x3FFFF),  # CJK extensions B onwards
)
_UNSPACED_STARTS = tuple(lo for lo, _ in _UNSPACED)


def unspaced(ch: str) -> bool:
    """Is ``ch`` of a script written without spaces between words (or Hangul)?"""
    code = ord(ch)
    i = bisect_right(_UNSPACED_STARTS, code) - 1
    return i >= 0 and code <= _UNSPACED[i][1]


def spaceless_key(key: str) -> bool:
    """Under the spaceless rule, is ``key`` matched as a substring: it has no ASCII letter or
    digit (SillyTavern's ``\\W`` boundaries never stop it in text of its own script)."""
    return not any(c.isascii() and c.isalnum() for c in key)


def word_character(ch: str, *, spaceless: bool = False) -> bool:
    """Does ``ch`` continue a word, so that a whole-word key may not touch it? A letter, a digit
    or ``_``; with ``spaceless``, not one of a script written without spaces (``unspaced``)."""
    if ch.isascii():
        return ch.isalnum() or ch == "_"
    return ch.isalnum() and not (spaceless and unspaced(ch))


def found(key: str, text: str, start: int, end: int, *, whole_words: bool = True, spaceless: bool = False) -> bool:
    """Does ``key``, found at ``text[start:end]``, count as mentioned there: anywhere when the
    rule does not ask for whole words (or, with ``spaceless``, for a ``spaceless_key``), else
    only with no ``word_character`` just before or just after it. ``text`` is the text the key
    was found in (casefolded when the key is)."""
    return anywhere(whole_words, spaceless, spaceless_key(key)) or bounded(text, start, end, spaceless=spaceless)


def anywhere(whole_words: bool, spaceless: bool, key_is_spaceless: bool) -> bool:
    """Does a key count wherever it is found, with no word boundary asked of it: its rule does
    not ask for whole words, or, under the ``spaceless`` rule, it is a ``spaceless_key``."""
    return not whole_words or (spaceless and key_is_spaceless)


def bounded(text: str, start: int, end: int, *, spaceless: bool = False) -> bool:
    """Does ``text[start:end]`` touch no ``word_character`` on either side?"""
    return (start == 0 or not word_character(text[start - 1], spaceless=spaceless)) and (
        end >= len(text) or not word_character(text[end], spaceless=spaceless))


def regex_key(key: str, case_sensitive: bool) -> re.Pattern[str] | None:
    """The regular expression a ``/pattern/flags`` key stands for (SillyTavern's form), or None
    for a plain key (or one whose pattern does not compile: it is then matched as written)."""
    m = _REGEX_KEY.match(key)
    if m is None:
        return None
    flags = 0 if case_sensitive else re.IGNORECASE
    for f in m.group(2):
        flags |= _FLAGS.get(f, 0)
    try:
        return re.compile(m.group(1), flags)
    except re.error:
        return None


def rule(name: str, aliases: list[str], fields: dict[str, Any]) -> Rule | None:
    """The entry's rule when its fields say more than "name and aliases, whole words, any case"
    (None: that default, ``default_rule``)."""
    lore = fields.get("lorebook")
    own = fields.get("recall")
    if not isinstance(own, dict) and not isinstance(lore, dict):
        return None
    base = _from_lorebook(lore) if isinstance(lore, dict) else default_rule(name, aliases)
    if not isinstance(own, dict):
        return base
    return Rule(tuple(own.get("keys", base.keys)), tuple(own.get("secondary_keys", base.secondary)),
                own.get("logic", base.logic), own.get("case_sensitive", base.case_sensitive),
                own.get("whole_words", base.whole_words), own.get("constant", base.constant),
                own.get("never", base.never), own.get("tier", base.tier), own.get("gated", base.gated),
                float(own.get("order", base.order)), own.get("ignore_budget", base.ignore_budget))


def default_rule(name: str, aliases: list[str] | tuple[str, ...]) -> Rule:
    return Rule(tuple(dict.fromkeys(k for k in (name, *aliases) if k and k.strip())))


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return ()
    return tuple(dict.fromkeys(k.strip() for k in value if isinstance(k, str) and k.strip()))[:MAX_KEYS]


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def zero_chance(settings: dict[str, Any]) -> bool:
    """SillyTavern's trigger chance of 0% (``useProbability`` on, ``probability`` <= 0): the
    entry is never inserted. ``settings``: a world-info entry, or a CCv3 entry's ``extensions``."""
    probability = settings.get("probability")
    return settings.get("useProbability") is True and isinstance(probability, (int, float)) and probability <= 0


def _from_lorebook(lore: dict[str, Any]) -> Rule:
    """The activation settings of an imported entry, as its format wrote them (lenient: a
    value of the wrong type is its default). Disabled entries are never imported."""
    entry = _object(lore.get("entry"))
    ext = _object(entry.get("extensions"))
    fmt = lore.get("format")
    if fmt == "sillytavern":
        keys, secondary = _strings(entry.get("key")), _strings(entry.get("keysecondary"))
        logic_code, constant = entry.get("selectiveLogic"), entry.get("constant")
        case, whole = entry.get("caseSensitive"), entry.get("matchWholeWords")
    elif fmt == "risu":  # comma-separated keys; a selective entry needs one secondary key too (and_any)
        keys, secondary = _strings(entry.get("key")), _strings(entry.get("secondkey"))
        logic_code, constant, case, whole = 0, entry.get("alwaysActive"), None, None  # Risu folds case always
    else:  # CCv3 books and cards keep SillyTavern's extras under extensions; NovelAI has keys only
        keys, secondary = _strings(entry.get("keys")), _strings(entry.get("secondary_keys"))
        logic_code, constant = ext.get("selectiveLogic"), entry.get("constant", entry.get("forceActivation"))
        case, whole = entry.get("case_sensitive", ext.get("case_sensitive")), ext.get("match_whole_words")
        if entry.get("use_regex") is True:
            keys = tuple(k if _REGEX_KEY.match(k) else f"/{k}/" for k in keys)
    selective = entry.get("selective") is not False if fmt == "sillytavern" else entry.get("selective") is True
    if fmt == "risu" and entry.get("useRegex") is True:  # Risu's regex keys are written /pattern/flags
        keys = tuple(k for k in keys if _REGEX_KEY.match(k))
    logic = LOGICS[logic_code] if isinstance(logic_code, int) and 0 <= logic_code < len(LOGICS) else "and_any"
    # SillyTavern: a trigger chance of 0% never inserts the entry
    never = zero_chance(entry if fmt == "sillytavern" else ext)
    settings = budget(fmt if isinstance(fmt, str) else "", entry)
    return Rule(keys, secondary if selective else (), logic, _flag(case, False), _flag(whole, True),
                _flag(constant, False), never, gated=True,
                order=_order(settings.order),
                ignore_budget=settings.ignore_budget)


def _order(value: float | None) -> float:
    """A source's order, within +-MAX_ORDER (NaN, or none: DEFAULT_ORDER)."""
    if value is None or value != value:
        return DEFAULT_ORDER
    return max(-MAX_ORDER, min(MAX_ORDER, float(value)))


def check(recall: Any) -> None:
    """``fields.recall`` as the author writes it, or ``RuleViolated`` naming what is wrong."""
    def bad(why: str) -> RuleViolated:
        return RuleViolated("recall_settings_invalid", f"fields.recall: {why}", "fields.recall")

    if not isinstance(recall, dict):
        raise bad("must be an object of " + ", ".join(sorted(_SETTINGS)))
    unknown = sorted(set(recall) - _SETTINGS)
    if unknown:
        raise bad(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(_SETTINGS))}")
    for name in ("keys", "secondary_keys"):
        value = recall.get(name, [])
        if not (isinstance(value, list) and len(value) <= MAX_KEYS
                and all(isinstance(k, str) and k.strip() and len(k) <= MAX_KEY for k in value)):
            raise bad(f"{name} must be a list of at most {MAX_KEYS} non-blank strings of at most {MAX_KEY} characters")
    if recall.get("logic", "and_any") not in LOGICS:
        raise bad(f"logic must be one of {', '.join(LOGICS)}")
    if recall.get("tier", P1) not in RECALL_TIERS:
        raise bad(f"tier must be one of {', '.join(RECALL_TIERS)}")
    for name in ("case_sensitive", "whole_words", "constant", "never", "gated", "ignore_budget"):
        if not isinstance(recall.get(name, False), bool):
            raise bad(f"{name} must be true or false")
    order = recall.get("order", DEFAULT_ORDER)
    if isinstance(order, bool) or not isinstance(order, (int, float)) or not abs(order) <= MAX_ORDER:
        raise bad(f"order must be a number from {-MAX_ORDER:,.0f} to {MAX_ORDER:,.0f}")
