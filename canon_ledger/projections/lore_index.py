"""One story's mention matcher: every entry's keys in one Aho-Corasick automaton.

Built from the story's canon rows (every step not retired, each with its ``domain.recall.Rule``)
once per change of the story's canon, and kept by the reader (``canon_view``) under the build
and the highest source position of those rows: a packet only runs the automaton over its
chapter's goals and scene summaries. It finds steps whose keys are mentioned; whether a step
is in force at the packet's chapter is the compiler's question, answered by the canon reads.

Two automata, one over casefolded keys (searched in the casefolded text) and one over
case-sensitive keys; a whole-word key's match must not touch a letter or digit on either side.
Regular-expression keys (``/pattern/flags``) are few and run one by one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ahocorasick

from canon_ledger.application.packets.ports import Always, Mention
from canon_ledger.domain.recall import Rule, default_rule, regex_key

Step = tuple[str, str, int]  # (kind, key, step)


@dataclass(frozen=True, slots=True)
class _Key:
    rule: int  # index into LoreIndex._rules
    secondary: bool
    text: str  # as the entry writes it (a reason quotes it)
    whole: bool


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class LoreIndex:
    """``match(texts)``: the mentioned steps; ``constant``: the always-on steps; ``never``: the
    steps no packet may hold."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self._rules: list[tuple[Step, Rule]] = []
        folded: dict[str, list[_Key]] = {}
        exact: dict[str, list[_Key]] = {}
        self._regexes: list[tuple[Any, _Key]] = []
        constant, never = [], set()
        for r in rows:
            d = r.recall if isinstance(r.recall, dict) or r.recall is None else json.loads(r.recall)
            aliases = r.aliases if isinstance(r.aliases, list) or r.aliases is None else json.loads(r.aliases)
            rule = Rule.from_dict(d) if d else default_rule(r.name, aliases or [])
            step: Step = (r.kind, r.key, r.step)
            if rule.never:
                never.add(step)
                continue
            i = len(self._rules)
            self._rules.append((step, rule))
            if rule.constant:
                constant.append(Always(*step, rule.tier))
            for secondary, keys in ((False, rule.keys), (True, rule.secondary)):
                for text in keys:
                    key = _Key(i, secondary, text, rule.whole_words)
                    pattern = regex_key(text, rule.case_sensitive)
                    if pattern is not None:
                        self._regexes.append((pattern, key))
                    elif rule.case_sensitive:
                        exact.setdefault(text, []).append(key)
                    else:
                        folded.setdefault(text.casefold(), []).append(key)
        self.constant: tuple[Always, ...] = tuple(sorted(constant))
        self.never: frozenset[Step] = frozenset(never)
        self._folded, self._exact = _automaton(folded), _automaton(exact)

    def match(self, texts: list[tuple[str, str]]) -> list[Mention]:
        """The steps mentioned in ``texts`` (``(where, text)`` pairs, in the order a reason should
        name them): a primary key found, and the secondary keys found satisfy the rule's logic.
        Each names the first text it was found in and, there, the key found first (the longer
        of two starting together); sorted by (kind, key, step)."""
        first: dict[int, tuple[str, str]] = {}
        secondary: dict[int, set[str]] = {}
        for where, text in texts:
            here: dict[int, tuple[int, int, str]] = {}
            for start, length, key in self._found(text):
                if key.secondary:
                    secondary.setdefault(key.rule, set()).add(key.text)
                elif key.rule not in first and (key.rule not in here or (start, -length) < here[key.rule][:2]):
                    here[key.rule] = (start, -length, key.text)
            first.update((i, (where, said)) for i, (_, _, said) in here.items())
        out = []
        for i, (where, said) in first.items():
            step, rule = self._rules[i]
            if rule.selected(len(secondary.get(i, ()))):
                out.append(Mention(*step, where, said))
        return sorted(out)

    def _found(self, text: str) -> Iterable[tuple[int, int, _Key]]:
        """Each key found in ``text``: where it starts, its length, and the key."""
        for automaton, haystack in ((self._folded, text.casefold()), (self._exact, text)):
            if automaton is None:
                continue
            for end, (length, keys) in automaton.iter(haystack):
                start = end - length + 1
                whole = (start == 0 or not _word(haystack[start - 1])) and (
                    end + 1 == len(haystack) or not _word(haystack[end + 1]))
                yield from ((start, length, k) for k in keys if whole or not k.whole)
        for pattern, key in self._regexes:
            m = pattern.search(text)
            if m is not None:
                yield m.start(), len(m.group()), key


def _automaton(patterns: dict[str, list[_Key]]) -> Any:
    if not patterns:
        return None
    automaton = ahocorasick.Automaton()
    for word, keys in patterns.items():
        automaton.add_word(word, (len(word), tuple(keys)))
    automaton.make_automaton()
    return automaton
