"""Mention-activated recall: the rule that brings a canon entry into a packet because its keys
are mentioned, or always, or never (pure).

An entry's ``Rule`` comes from, in order of precedence: ``fields.recall`` (the author's own
settings, checked when the entry is proposed), the activation settings a lorebook import kept
in ``fields.lorebook.entry`` (SillyTavern world info, CCv3 / character-card books, NovelAI),
and otherwise the entry's name and aliases, matched as whole words, case-insensitively.

Matching is SillyTavern's: a primary key must occur; then, when the rule has secondary keys,
its ``logic`` decides over how many of them occur (``and_any``: at least one, ``not_all``: not
every one, ``not_any``: none, ``and_all``: every one; SillyTavern's ``selectiveLogic`` 0-3). A
key written ``/pattern/flags`` is a regular expression. The automaton that finds the keys in a
chapter's texts lives in the read model (``projections.lore_index``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.errors import RuleViolated

LOGICS = ("and_any", "not_all", "not_any", "and_all")  # SillyTavern's selectiveLogic 0, 1, 2, 3
RECALL_TIERS = ("P1", "P2", "P3", "P4")  # where an always-on entry goes (P0 is for hard constraints)
MAX_KEYS = 200  # keys (and secondary keys) per entry
MAX_KEY = 400  # characters per key
_REGEX_KEY = re.compile(r"^/(.+)/([a-z]*)$", re.S)
_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}
_SETTINGS = {"keys", "secondary_keys", "logic", "case_sensitive", "whole_words", "constant", "never", "tier"}


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
    tier: str = "P1"

    def as_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "secondary_keys": list(self.secondary), "logic": self.logic,
                "case_sensitive": self.case_sensitive, "whole_words": self.whole_words, "constant": self.constant,
                "never": self.never, "tier": self.tier}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rule:
        return cls(tuple(d["keys"]), tuple(d["secondary_keys"]), d["logic"], d["case_sensitive"], d["whole_words"],
                   d["constant"], d["never"], d["tier"])

    def selected(self, secondary_found: int) -> bool:
        """Do ``secondary_found`` of the secondary keys satisfy ``logic`` (a primary key matched)?"""
        total = len(self.secondary)
        if not total:
            return True
        return {"and_any": secondary_found > 0, "not_all": secondary_found < total, "not_any": secondary_found == 0,
                "and_all": secondary_found == total}[self.logic]


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
                own.get("never", base.never), own.get("tier", base.tier))


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
    else:  # CCv3 books and cards keep SillyTavern's extras under extensions; NovelAI has keys only
        keys, secondary = _strings(entry.get("keys")), _strings(entry.get("secondary_keys"))
        logic_code, constant = ext.get("selectiveLogic"), entry.get("constant", entry.get("forceActivation"))
        case, whole = entry.get("case_sensitive", ext.get("case_sensitive")), ext.get("match_whole_words")
        if entry.get("use_regex") is True:
            keys = tuple(k if _REGEX_KEY.match(k) else f"/{k}/" for k in keys)
    selective = entry.get("selective") is not False if fmt == "sillytavern" else entry.get("selective") is True
    logic = LOGICS[logic_code] if isinstance(logic_code, int) and 0 <= logic_code < len(LOGICS) else "and_any"
    # SillyTavern: a trigger chance of 0% never inserts the entry
    never = zero_chance(entry if fmt == "sillytavern" else ext)
    return Rule(keys, secondary if selective else (), logic, _flag(case, False), _flag(whole, True),
                _flag(constant, False), never)


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
    if recall.get("tier", "P1") not in RECALL_TIERS:
        raise bad(f"tier must be one of {', '.join(RECALL_TIERS)}")
    for name in ("case_sensitive", "whole_words", "constant", "never"):
        if not isinstance(recall.get(name, False), bool):
            raise bad(f"{name} must be true or false")
