"""One story's mention matcher: every entry's keys in Aho-Corasick automata.

Built from the story's canon rows (every step not retired, each with its ``domain.recall.Rule``)
and kept by the reader (``canon_view``) under the build and the highest source position of
those rows; the steps added after it join as a second part (``with_newer``). A packet only runs
the automata over its
chapter's goals and scene summaries. It finds steps whose keys are mentioned; whether a step
is in force at the packet's chapter is the compiler's question, answered by the canon reads.

Two automata, one over casefolded keys (searched in the casefolded text) and one over
case-sensitive keys; whether a whole-word key's match counts is ``domain.recall.found``'s
question, under the rule the caller names: ``match(texts, spaceless=False)`` is the rule of
packet compilers 1-6 (no letter or digit of any script on either side), ``spaceless=True``
SillyTavern's (a key with no ASCII letter or digit, as in Chinese, Japanese, Thai or Korean,
matches as a substring; see ``domain.recall``). The automata are the same for both: one index
serves every compiler. Regular-expression keys (``/pattern/flags``) are few and run one by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ahocorasick

from canon_ledger.application.packets.ports import Always, Mention
from canon_ledger.domain.recall import Rule, anywhere, bounded, default_rule, regex_key, spaceless_key
from canon_ledger.projections.driver_sql import json_column

Step = tuple[str, str, int]  # (kind, key, step)


# (rule: an index into the part's rules, secondary, the key as written, whole words, a spaceless key)
_Key = tuple[int, bool, str, bool, bool]


class _Part:
    """The keys of some of a story's steps, in two automata and a list of regexes."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self.rules: list[tuple[Step, Rule]] = []
        folded: dict[str, list[_Key]] = {}
        exact: dict[str, list[_Key]] = {}
        self.regexes: list[tuple[Any, _Key]] = []
        constant, never, gated = [], set(), set()
        for r in rows:
            d = json_column(r.recall)
            rule = Rule.from_dict(d) if d else default_rule(r.name, json_column(r.aliases) or [])
            step: Step = (r.kind, r.key, r.step)
            if rule.never:
                never.add(step)
                continue
            if rule.gated:
                gated.add(step)
            i = len(self.rules)
            self.rules.append((step, rule))
            if rule.constant:
                constant.append(Always(*step, rule.tier, rule.order, rule.ignore_budget))
            for secondary, keys in ((False, rule.keys), (True, rule.secondary)):
                for text in keys:
                    key = (i, secondary, text, rule.whole_words, spaceless_key(text))
                    pattern = regex_key(text, rule.case_sensitive) if text.startswith("/") else None
                    if pattern is not None:
                        self.regexes.append((pattern, key))
                    elif rule.case_sensitive:
                        exact.setdefault(text, []).append(key)
                    else:
                        folded.setdefault(text.casefold(), []).append(key)
        self.constant, self.never, self.gated = constant, never, gated
        self.folded, self.exact = _automaton(folded), _automaton(exact)

    def match(self, texts: list[tuple[str, str]], spaceless: bool) -> list[Mention]:
        first: dict[int, tuple[str, str, tuple[int, int]]] = {}
        secondary: dict[int, set[str]] = {}
        for t, (where, text) in enumerate(texts):
            here: dict[int, tuple[int, int, str]] = {}
            for start, length, (n, is_secondary, said, _, _) in self._found(text, spaceless):
                if is_secondary:
                    secondary.setdefault(n, set()).add(said)
                elif n not in first and (n not in here or (start, -length) < here[n][:2]):
                    here[n] = (start, -length, said)
            first.update((i, (where, said, (t, start))) for i, (start, _, said) in here.items())
        out = []
        for i, (where, said, at) in first.items():
            step, rule = self.rules[i]
            if rule.selected(len(secondary.get(i, ()))):
                out.append(Mention(*step, where, said, rule.order, rule.ignore_budget, at))
        return out

    def _found(self, text: str, spaceless: bool) -> Iterable[tuple[int, int, _Key]]:
        """Each key found in ``text``: where it starts, its length, and the key (whole-word keys
        only where ``domain.recall.found`` counts them, under the ``spaceless`` rule or not)."""
        for automaton, haystack in ((self.folded, text.casefold()), (self.exact, text)):
            if automaton is None:
                continue
            for end, (length, keys) in automaton.iter(haystack):
                start = end - length + 1
                whole = bounded(haystack, start, end + 1, spaceless=spaceless)
                yield from ((start, length, k) for k in keys if whole or anywhere(k[3], spaceless, k[4]))
        for pattern, key in self.regexes:
            m = pattern.search(text)
            if m is not None:
                yield m.start(), len(m.group()), key


class LoreIndex:
    """``match(texts)``: the mentioned steps; ``constant``: the always-on steps; ``never``: the
    steps no packet may hold; ``gated``: the steps only their rule (or a tag) may bring into a
    packet (``domain.recall.Rule.gated``).

    Built from every step of the story up to ``source`` (its highest source position), and
    extended by ``with_newer``: steps are immutable rows, so the steps added since are exactly
    the rows whose source is higher, kept in a second, small part until the reader builds
    the whole again (``canon_view``)."""

    def __init__(self, rows: Iterable[Any], source: int | None = None) -> None:
        self.source = source
        self._parts: tuple[_Part, ...] = (_Part(rows),)
        self._settle()

    def with_newer(self, rows: Iterable[Any]) -> LoreIndex:
        """This index's steps and ``rows`` (every step with a source above ``self.source``)."""
        index = object.__new__(LoreIndex)
        index.source = self.source
        index._parts = (self._parts[0], _Part(rows))
        index._settle()
        return index

    def _settle(self) -> None:
        self.constant: tuple[Always, ...] = tuple(sorted(a for p in self._parts for a in p.constant))
        self.never: frozenset[Step] = frozenset(s for p in self._parts for s in p.never)
        self.gated: frozenset[Step] = frozenset(s for p in self._parts for s in p.gated)

    def match(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> list[Mention]:
        """The steps mentioned in ``texts`` (``(where, text)`` pairs, in the order a reason should
        name them): a primary key found, and the secondary keys found satisfy the rule's logic.
        Each names the first text it was found in and, there, the key found first (the longer
        of two starting together); sorted by (kind, key, step).

        ``spaceless``: False, whole words as packet compilers 1-6 matched them (a key touching a
        letter or digit of any script is no match: Chinese and Japanese keys never match inside
        their own text); True, SillyTavern's rule across scripts (``domain.recall``: a key with no
        ASCII letter or digit matches as a substring; a neighbour in a script without spaces is
        a word boundary)."""
        return sorted(m for p in self._parts for m in p.match(texts, spaceless))


def _automaton(patterns: dict[str, list[_Key]]) -> Any:
    if not patterns:
        return None
    automaton = ahocorasick.Automaton()
    for word, keys in patterns.items():
        automaton.add_word(word, (len(word), tuple(keys)))
    automaton.make_automaton()
    return automaton
