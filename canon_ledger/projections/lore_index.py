"""One story's mention matcher: every entry's keys in Aho-Corasick automata.

Built from the story's canon rows (every step not retired, each with its ``domain.recall.Rule``
and the chapter it takes effect from)
and kept by the reader (``canon_view``) under the build and the highest source position of
those rows; the steps added after it join as a second part (``with_newer``). A packet only runs
the automata over its chapter's goals and scene summaries. It finds steps whose keys are
mentioned; whether a step is in force at the packet's chapter is the compiler's question,
answered by the canon reads.

The steps of one entry that share a rule (most revisions keep the entry's name and aliases)
are matched once, as one rule: ``mentions`` says which entries are mentioned (``by``: those
with a mentioned step in effect by a chapter, the only ones that can have it in force then), and
builds the ``Mention`` of a step only when asked for it (the compiler asks for the step in force).

Two automata, one over casefolded keys (searched in the casefolded text) and one over
case-sensitive keys; whether a whole-word key's match counts is ``domain.recall.found``'s
question, under the rule the caller names: ``match(texts, spaceless=False)`` is the rule of
packet compilers 1-6 (no letter or digit of any script on either side), ``spaceless=True``
SillyTavern's (a key with no ASCII letter or digit, as in Chinese, Japanese, Thai or Korean,
matches as a substring; see ``domain.recall``). The automata are the same for both: one index
serves every compiler. Regular-expression keys (``/pattern/flags``) are few and run one by one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

import ahocorasick
import orjson

from canon_ledger.application.packets.ports import Always, Mention
from canon_ledger.domain.recall import Rule, anywhere, bounded, default_rule, regex_key, spaceless_key
from canon_ledger.projections.driver_sql import json_column

Step = tuple[str, str, int]  # (kind, key, step)
_STEP = attrgetter("kind", "key", "step")
Entry = tuple[str, str]  # (kind, key)
Find = tuple[str, str, tuple[int, int]]  # where a rule's key was found first: (where, said, at)
MENTIONS_CACHE = 64  # searches an index keeps (``LoreIndex.mentions``)


# (rule: an index into the part's rules, secondary, the key as written, whole words, a spaceless key)
_Key = tuple[int, bool, str, bool, bool]


class _Part:
    """The keys of some of a story's steps, in two automata and a list of regexes. Each rule
    is an entry's, once however many of its steps share it (``rules``, ``steps``,
    ``rule_of``)."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self.rules: list[tuple[Entry, Rule]] = []
        self.steps: list[list[int]] = []  # each rule's steps
        self.since: list[int] = []  # each rule's first chapter: the least valid_from of its steps
        self.rule_of: dict[Step, int] = {}  # a step (not never) -> its rule's index
        folded: dict[str, list[_Key]] = {}
        exact: dict[str, list[_Key]] = {}
        self.regexes: list[tuple[Any, _Key]] = []
        constant, never, gated = [], set(), set()
        shared: dict[tuple[Entry, Rule], int] = {}
        for r in rows:
            d = json_column(r.recall)
            rule = Rule.from_dict(d) if d else default_rule(r.name, json_column(r.aliases) or [])
            step: Step = (r.kind, r.key, r.step)
            if rule.never:
                never.add(step)
                continue
            if rule.gated:
                gated.add(step)
            if rule.constant:
                constant.append(Always(*step, rule.tier, rule.order, rule.ignore_budget))
            entry = (r.kind, r.key)
            i = shared.get((entry, rule))
            if i is None:
                i = shared[(entry, rule)] = self._add(entry, rule, folded, exact)
                self.since.append(r.valid_from)
            self.since[i] = min(self.since[i], r.valid_from)
            self.steps[i].append(r.step)
            self.rule_of[step] = i
        self.constant, self.never, self.gated = constant, never, gated
        self.folded, self.exact = _automaton(folded), _automaton(exact)

    def _add(self, entry: Entry, rule: Rule, folded: dict[str, list[_Key]], exact: dict[str, list[_Key]]) -> int:
        """A new rule of ``entry``: its index, its keys added where they are searched."""
        i = len(self.rules)
        self.rules.append((entry, rule))
        self.steps.append([])
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
        return i

    def found(self, texts: list[tuple[str, str]], spaceless: bool) -> dict[int, Find]:
        """The rules mentioned in ``texts`` (a primary key found, the secondary keys found
        satisfying the rule's logic), each with where its key was found first."""
        first: dict[int, Find] = {}
        secondary: dict[int, set[str]] = {}
        for t, (where, text) in enumerate(texts):
            here: dict[int, tuple[int, int, str]] = {}
            for start, length, (n, is_secondary, said, _, _) in self._found(text, spaceless):
                if is_secondary:
                    secondary.setdefault(n, set()).add(said)
                elif n not in first and (n not in here or (start, -length) < here[n][:2]):
                    here[n] = (start, -length, said)
            first.update((i, (where, said, (t, start))) for i, (start, _, said) in here.items())
        return {i: find for i, find in first.items() if self.rules[i][1].selected(len(secondary.get(i, ())))}

    def mention(self, i: int, step: int, find: Find) -> Mention:
        """The mention of ``step``, one of rule ``i``'s steps, found as ``find`` says."""
        (kind, key), rule = self.rules[i]
        where, said, at = find
        return Mention(kind, key, step, where, said, rule.order, rule.ignore_budget, at)

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


class Mentions:
    """What one search of texts found (``LoreIndex.mentions``): ``entries``, those with a step
    mentioned; ``of``, a step's mention."""

    def __init__(self, found: list[tuple[_Part, dict[int, Find]]]) -> None:
        self._found = found
        self.entries: frozenset[Entry] = frozenset(part.rules[i][0] for part, rules in found for i in rules)
        self._of: dict[Step, Mention | None] = {}  # ``of``'s answers, built once
        self._by: dict[int, frozenset[Entry]] = {}  # ``by``'s answers

    def by(self, chapter: int) -> frozenset[Entry]:
        """Of ``entries``, those with a mentioned step in effect by ``chapter`` (its valid_from
        not after it): no other can have a mentioned step in force then."""
        if chapter not in self._by:
            self._by[chapter] = frozenset(part.rules[i][0] for part, rules in self._found for i in rules
                                          if part.since[i] <= chapter)
        return self._by[chapter]

    def of(self, kind: str, key: str, step: int) -> Mention | None:
        """The mention of the step, or None when it is not mentioned (or is no step of the index)."""
        asked = (kind, key, step)
        if asked not in self._of:
            self._of[asked] = self._mention(asked)
        return self._of[asked]

    def _mention(self, step: Step) -> Mention | None:
        for part, rules in self._found:
            i = part.rule_of.get(step)
            if i is not None:
                find = rules.get(i)
                return None if find is None else part.mention(i, step[2], find)
        return None

    def __iter__(self) -> Iterator[Mention]:
        """Every step mentioned, in no order."""
        for part, rules in self._found:
            for i, find in rules.items():
                yield from (part.mention(i, step, find) for step in part.steps[i])


class LoreIndex:
    """``match(texts)``: the mentioned steps (``mentions``: the mentioned entries, and each
    step's mention when asked for); ``constant``: the always-on steps; ``never``: the
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
        self._mentions: dict[bytes, Mentions] = {}  # ``mentions``' searches, by ``_digest``
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
        return sorted(self.mentions(texts, spaceless=spaceless), key=_STEP)

    def mentions(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> Mentions:
        """What ``match`` finds, as the entries mentioned and each step's mention on demand:
        the steps of an entry sharing a rule are matched once, and a caller that reads the step
        in force of each entry builds only those steps' mentions. The last ``MENTIONS_CACHE``
        searches are kept: an index never changes (a canon change makes a new one), so the same
        texts (a chapter asked for again, by any role) find the same mentions. Shared: treat
        it as a value."""
        asked = _digest(texts, spaceless)
        mentions = self._mentions.get(asked)
        if mentions is None:
            mentions = Mentions([(p, p.found(texts, spaceless)) for p in self._parts])
            if len(self._mentions) >= MENTIONS_CACHE:  # full: the oldest search goes
                self._mentions.pop(next(iter(self._mentions), asked), None)
            self._mentions[asked] = mentions
        return mentions


def _digest(texts: list[tuple[str, str]], spaceless: bool) -> bytes:
    """What a search is kept under: a digest of its texts and rule (a draft under review is a
    whole chapter: the texts themselves are not kept)."""
    return hashlib.blake2b(orjson.dumps([spaceless, texts]), digest_size=16).digest()


def _automaton(patterns: dict[str, list[_Key]]) -> Any:
    if not patterns:
        return None
    automaton = ahocorasick.Automaton()
    for word, keys in patterns.items():
        automaton.add_word(word, (len(word), tuple(keys)))
    automaton.make_automaton()
    return automaton
