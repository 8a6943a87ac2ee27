"""Confirmed canon written out as a lorebook other tools read (pure).

Targets (``TARGETS``): SillyTavern world info (``{"entries": {uid: entry}}``), a CCv3 lorebook
(``{"spec": "lorebook_v3", "data": {...}}``) and a NovelAI ``.lorebook`` (``{"lorebookVersion":
6, "entries": [...], "settings": {...}, "categories": []}``), each entry with the fields its
format documents (SillyTavern's new-entry template; the CCv3 spec's Lorebook object; NovelAI's
lore entry with its ``contextConfig``).

Invariant: an entry an import brought (``fields.lorebook``), exported to its own format (a
character card's book counts as ``lorebook_v3``), is its source entry written back whole:
every field as the file held it, its content the canon text. What canon changed since wins:
keys become the aliases when they differ from the source's keys, the name field is set when
the canon name differs from the name the source gives, and an entry with its own
``fields.recall`` writes that rule's activation. Only a uid/id another entry of the document
holds already (or one the format does not allow) is renumbered, and a character card's entry gains the fields CCv3 requires and
a card may leave out (``use_regex``, ``extensions``). So import -> export -> import gives the
same entries.

Any other entry (another format's, or canon never imported) is mapped through SillyTavern's
entry, as SillyTavern converts between its world info, character books and NovelAI lorebooks:
from the source what has a counterpart (order = ``insertion_order`` = NovelAI's ``budgetPriority`` =
RisuAI's ``insertorder``, position, the settings a character book keeps under ``extensions``), then
the activation the entry has in packets (``domain.recall``: keys = name and aliases unless a
source or ``fields.recall`` says otherwise; secondary keys and their logic, constant, case
sensitivity, whole words; a ``never`` rule is a 0% trigger chance, or a disabled entry in
NovelAI, which has no chance).
NovelAI has no secondary keys, case or whole-word settings: those are not written there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID, uuid5

from canon_ledger.domain import ids
from canon_ledger.domain.lorebook import FORMATS, LoreEntry, LorebookError, read_entry
from canon_ledger.domain.recall import LOGICS, Rule, default_rule, rule, zero_chance

TARGETS = ("sillytavern", "lorebook_v3", "novelai")
NOT_IMPORTED = "not_imported"  # the source of an entry no lorebook import brought
# The source formats written back whole into each target.
SAME_FORMAT = {"sillytavern": ("sillytavern",), "lorebook_v3": ("lorebook_v3", "chara_card_v2", "chara_card_v3"),
               "novelai": ("novelai",)}
KEYS = {"sillytavern": "key", "lorebook_v3": "keys", "novelai": "keys"}
CONTENT = {"sillytavern": "content", "lorebook_v3": "content", "novelai": "text"}
NAI_VERSION = 6

# SillyTavern's new-entry template (``newWorldInfoEntryDefinition`` in its world-info.js).
ST_TEMPLATE: dict[str, Any] = {
    "key": [], "keysecondary": [], "comment": "", "content": "", "constant": False, "vectorized": False,
    "selective": True, "selectiveLogic": 0, "addMemo": False, "order": 100, "position": 0, "disable": False,
    "ignoreBudget": False, "excludeRecursion": False, "preventRecursion": False, "matchPersonaDescription": False,
    "matchCharacterDescription": False, "matchCharacterPersonality": False, "matchCharacterDepthPrompt": False,
    "matchScenario": False, "matchCreatorNotes": False, "delayUntilRecursion": 0, "probability": 100,
    "useProbability": True, "depth": 4, "outletName": "", "group": "", "groupOverride": False, "groupWeight": 100,
    "scanDepth": None, "caseSensitive": None, "matchWholeWords": None, "useGroupScoring": None, "automationId": "",
    "role": 0, "sticky": None, "cooldown": None, "delay": None, "triggers": [],
}
# A SillyTavern entry's settings as a character book keeps them under ``extensions``
# (SillyTavern's ``convertWorldInfoToCharacterBook`` and ``convertCharacterBook``).
ST_EXTENSIONS = {
    "position": "position", "excludeRecursion": "exclude_recursion", "displayIndex": "display_index",
    "probability": "probability", "useProbability": "useProbability", "depth": "depth",
    "selectiveLogic": "selectiveLogic", "outletName": "outlet_name", "group": "group",
    "groupOverride": "group_override", "groupWeight": "group_weight", "preventRecursion": "prevent_recursion",
    "delayUntilRecursion": "delay_until_recursion", "scanDepth": "scan_depth", "matchWholeWords": "match_whole_words",
    "useGroupScoring": "use_group_scoring", "caseSensitive": "case_sensitive", "automationId": "automation_id",
    "role": "role", "vectorized": "vectorized", "sticky": "sticky", "cooldown": "cooldown", "delay": "delay",
    "matchPersonaDescription": "match_persona_description", "matchCharacterDescription": "match_character_description",
    "matchCharacterPersonality": "match_character_personality",
    "matchCharacterDepthPrompt": "match_character_depth_prompt", "matchScenario": "match_scenario",
    "matchCreatorNotes": "match_creator_notes", "triggers": "triggers", "ignoreBudget": "ignore_budget",
}
# A new NovelAI entry's context settings (``contextConfig``) and search range.
NAI_CONTEXT: dict[str, Any] = {
    "prefix": "", "suffix": "\n", "tokenBudget": 1, "reservedTokens": 0, "budgetPriority": 400,
    "trimDirection": "trimBottom", "insertionType": "newline", "maximumTrimType": "sentence", "insertionPosition": -1,
}
NAI_SEARCH_RANGE = 1000


@dataclass(frozen=True)
class ExportedEntry:
    """One confirmed canon entry as of the export's chapter: its kind, key and the version in
    force as the log's step holds it (``CanonProposal.as_version``: name, aliases, text, fields,
    ...), with only what may be shown then (the caller drops what is hidden)."""

    kind: str
    key: str
    version: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.version["name"])

    @property
    def aliases(self) -> list[str]:
        return list(self.version.get("aliases") or [])

    @property
    def text(self) -> str:
        return str(self.version.get("text") or "")

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.version.get("fields") or {})

    @property
    def content(self) -> str:
        """The text, then each development-chain node shown (``kind id: text``) on a line of its own."""
        nodes = self.fields.get("nodes")
        shown = [n for n in nodes if isinstance(n, dict) and "id" in n and "text" in n] if isinstance(nodes, list) else []
        lines = [f"{n.get('kind', 'node')} {n['id']}: {n['text']}" for n in shown]
        return "\n".join([self.text, *lines]) if lines else self.text


@dataclass(frozen=True)
class _Source:
    """The lorebook entry an import brought: its format, the entry as its file held it (no
    content), and how the import read it (name, keys)."""

    format: str
    entry: dict[str, Any]
    read: LoreEntry


def _source(e: ExportedEntry) -> _Source | None:
    lore = e.fields.get("lorebook")
    if not isinstance(lore, dict) or lore.get("format") not in FORMATS or not isinstance(lore.get("entry"), dict):
        return None
    try:
        return _Source(lore["format"], lore["entry"], read_entry(lore["format"], lore["entry"]))
    except LorebookError:  # written by hand, not as a lorebook holds it: exported as canon
        return None


def source_format(e: ExportedEntry) -> str:
    """The format an entry was imported from, or ``NOT_IMPORTED``."""
    source = _source(e)
    return source.format if source is not None else NOT_IMPORTED


def document(target: str, entries: Sequence[ExportedEntry], *, story_id: str, name: str = "") -> dict[str, Any]:
    """The ``target`` lorebook (one of ``TARGETS``) holding ``entries``, in their order, each
    uid/id unique in it (``ValueError`` for another target)."""
    if target not in TARGETS:
        raise ValueError(f"unknown lorebook format {target!r}; one of {', '.join(TARGETS)}")
    written = [_entry(target, e, i) for i, e in enumerate(entries)]
    _unique_ids(target, written, [ids.canon_entry_id(story_id, e.kind, e.key) for e in entries])
    if target == "sillytavern":
        return {"entries": {str(e["uid"]): e for e in written}}
    if target == "lorebook_v3":
        return {"spec": "lorebook_v3", "data": {"name": name, "extensions": {}, "entries": written}}
    return {"lorebookVersion": NAI_VERSION, "entries": written, "settings": {"orderByKeyLocations": False},
            "categories": []}


def _entry(target: str, e: ExportedEntry, index: int) -> dict[str, Any]:
    source = _source(e)
    own = e.fields.get("recall")
    activation, keys_revised = _activation(e, source)
    if source is not None and source.format in SAME_FORMAT[target]:
        return _written_back(target, e, source.entry, activation, keys_revised=keys_revised,
                             own_rule=isinstance(own, dict))
    hub = _sillytavern_of(source, index)
    _activate_sillytavern(hub, activation)
    hub.update(comment=e.name, addMemo=True, content=e.content)
    return _FROM_SILLYTAVERN[target](hub, e.name)


def _activation(e: ExportedEntry, source: _Source | None) -> tuple[Rule, bool]:
    """The entry's activation as packets read it (``recall.rule``), with canon's aliases as its
    keys when canon revised them away from the source's (unless ``fields.recall`` names keys);
    and whether it did."""
    fields = e.fields if source is not None else {k: v for k, v in e.fields.items() if k != "lorebook"}
    found = rule(e.name, e.aliases, fields) or default_rule(e.name, e.aliases)
    if source is None:
        return found, False
    own = e.fields.get("recall")
    revised = list(dict.fromkeys(source.read.keys)) != list(e.aliases)
    if revised and not (isinstance(own, dict) and "keys" in own):
        found = replace(found, keys=tuple(dict.fromkeys(a for a in e.aliases if a.strip())))
    return found, revised


def _written_back(target: str, e: ExportedEntry, source: dict[str, Any], activation: Rule, *, keys_revised: bool,
                  own_rule: bool) -> dict[str, Any]:
    out = copy.deepcopy(source)
    out[CONTENT[target]] = e.content
    if own_rule:
        _ACTIVATE[target](out, activation)
    elif keys_revised:
        out[KEYS[target]] = list(activation.keys)
    if read_entry(target, out).name != e.name:
        out[_name_field(target, out)] = e.name
    if target == "lorebook_v3":  # a character card's entry may lack what CCv3 requires
        for field, default in (("extensions", {}), ("enabled", True), ("insertion_order", 100), ("use_regex", False)):
            out.setdefault(field, default)
    return out


def _name_field(target: str, entry: dict[str, Any]) -> str:
    """Where ``lorebook.read`` finds an entry's name in ``target``."""
    if target == "novelai":
        return "displayName"
    if target == "lorebook_v3" and entry.get("name"):
        return "name"
    return "comment"


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _chance(settings: dict[str, Any], never: bool) -> None:
    """A ``never`` rule as a 0% trigger chance; an entry no longer ``never`` loses its 0%."""
    if never:
        settings.update(useProbability=True, probability=0)
    elif zero_chance(settings):
        settings["probability"] = 100


# -- activation, written in each format's terms -------------------------------------------------
def _activate_sillytavern(entry: dict[str, Any], r: Rule) -> None:
    entry["key"] = list(r.keys)
    if r.secondary or entry.get("selective") is not False:  # inert secondary keys are kept as they are
        entry["keysecondary"] = list(r.secondary)
    if r.secondary:
        entry["selective"] = True
    entry.update(selectiveLogic=LOGICS.index(r.logic), constant=r.constant, caseSensitive=r.case_sensitive,
                 matchWholeWords=r.whole_words)
    _chance(entry, r.never)


def _activate_lorebook_v3(entry: dict[str, Any], r: Rule) -> None:
    extensions = entry["extensions"] = _object(entry.get("extensions"))
    entry["keys"] = list(r.keys)  # a regular expression key is written /pattern/flags, as SillyTavern writes it
    entry["use_regex"] = False
    if r.secondary or entry.get("selective") is True:
        entry["secondary_keys"] = list(r.secondary)
    if r.secondary:
        entry["selective"] = True
    entry.update(constant=r.constant, case_sensitive=r.case_sensitive)
    extensions.update(selectiveLogic=LOGICS.index(r.logic), match_whole_words=r.whole_words)
    _chance(extensions, r.never)


def _activate_novelai(entry: dict[str, Any], r: Rule) -> None:
    entry.update(keys=list(r.keys), forceActivation=r.constant)
    if r.never:  # NovelAI has no trigger chance
        entry["enabled"] = False


_ACTIVATE: dict[str, Callable[[dict[str, Any], Rule], None]] = {
    "sillytavern": _activate_sillytavern, "lorebook_v3": _activate_lorebook_v3, "novelai": _activate_novelai}


# -- any entry as SillyTavern's, and SillyTavern's as each target's -----------------------------
def _sillytavern_of(source: _Source | None, index: int) -> dict[str, Any]:
    """The source entry as a SillyTavern entry (its ``convertCharacterBook`` and
    ``convertNovelLorebook``), or a new one; keys and content are set after."""
    entry = copy.deepcopy(ST_TEMPLATE)
    entry["displayIndex"] = index
    if source is None:
        return entry
    src = copy.deepcopy(source.entry)
    if source.format == "sillytavern":
        return entry | src
    if source.format == "novelai":
        budget_priority = _object(src.get("contextConfig")).get("budgetPriority")
        if _number(budget_priority):
            entry["order"] = budget_priority
        return entry
    if source.format == "risu":  # no target is RisuAI's: its order, then the activation packets read
        if _number(src.get("insertorder")):
            entry["order"] = src["insertorder"]
        return entry
    extensions = _object(src.get("extensions"))
    entry.update(uid=src.get("id"), keysecondary=src.get("secondary_keys") or [], constant=src.get("constant") is True,
                 selective=src.get("selective") is True, disable=src.get("enabled") is False,
                 position=0 if src.get("position") == "before_char" else 1)
    if _number(src.get("insertion_order")):
        entry["order"] = src["insertion_order"]
    entry.update({st: extensions[v3] for st, v3 in ST_EXTENSIONS.items() if v3 in extensions})
    entry["extensions"] = extensions
    return entry


def _as_sillytavern(hub: dict[str, Any], name: str) -> dict[str, Any]:
    return {"uid": hub.pop("uid", None), **hub}


def _as_lorebook_v3(hub: dict[str, Any], name: str) -> dict[str, Any]:
    """SillyTavern's ``convertWorldInfoToCharacterBook``, plus the entry's name."""
    extensions = _object(hub.get("extensions")) | {v3: hub[st] for st, v3 in ST_EXTENSIONS.items() if st in hub}
    entry = {"id": hub.get("uid"), "keys": hub["key"], "secondary_keys": hub["keysecondary"], "comment": hub["comment"],
             "content": hub["content"], "constant": hub["constant"], "selective": hub["selective"],
             "insertion_order": hub["order"], "enabled": not hub["disable"],
             "position": "before_char" if hub["position"] == 0 else "after_char", "use_regex": False,
             "extensions": extensions, "name": name}
    if isinstance(hub.get("caseSensitive"), bool):
        entry["case_sensitive"] = hub["caseSensitive"]
    return entry


def _as_novelai(hub: dict[str, Any], name: str) -> dict[str, Any]:
    never = zero_chance(hub)
    priority = hub["order"] if _number(hub.get("order")) else NAI_CONTEXT["budgetPriority"]
    return {"text": hub["content"], "contextConfig": NAI_CONTEXT | {"budgetPriority": priority}, "displayName": name,
            "id": None, "keys": hub["key"], "searchRange": NAI_SEARCH_RANGE, "enabled": not hub["disable"] and not never,
            "forceActivation": hub["constant"], "keyRelative": False, "nonStoryActivatable": False, "category": "",
            "loreBiasGroups": []}


_FROM_SILLYTAVERN: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "sillytavern": _as_sillytavern, "lorebook_v3": _as_lorebook_v3, "novelai": _as_novelai}


def _valid_id(target: str, value: Any) -> bool:
    """A SillyTavern uid is a whole number (it names the entry's key in ``entries``), a NovelAI
    id a string (a UUID, as NovelAI writes it), a CCv3 id either."""
    number = isinstance(value, int) and not isinstance(value, bool)
    if target == "sillytavern":
        return number and value >= 0
    if target == "novelai":
        return isinstance(value, str) and value != ""
    return number or isinstance(value, str)


def _unique_ids(target: str, written: list[dict[str, Any]], canon_ids: list[UUID]) -> None:
    """Keep each entry's uid/id unless it is no valid one or an earlier entry holds it; give the
    rest the smallest free number (SillyTavern's rule) or, in NovelAI, their canon entry's id."""
    field = "uid" if target == "sillytavern" else "id"
    taken: set[str] = set()
    pending = []
    for i, entry in enumerate(written):
        value = entry.get(field)
        if _valid_id(target, value) and str(value) not in taken:
            taken.add(str(value))
        else:
            pending.append(i)
    free = 0
    for i in pending:
        given: int | str
        if target == "novelai":
            given, n = str(canon_ids[i]), 0
            while given in taken:
                n += 1
                given = str(uuid5(canon_ids[i], str(n)))
        else:
            while str(free) in taken:
                free += 1
            given = free
        written[i][field] = given
        taken.add(str(given))
