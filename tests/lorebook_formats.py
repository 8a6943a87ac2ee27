"""Each lorebook format's documented fields, as JSON Schema, for the export's tests.

Sources: SillyTavern's world info entry (``newWorldInfoEntryDefinition`` in public/scripts/
world-info.js: the fields of a new entry, their types; a file is ``{"entries": {uid: entry}}``);
the Character Card V3 spec's Lorebook object (SPEC_V3.md, "Lorebook Fields"; standalone as
``{"spec": "lorebook_v3", "data": Lorebook}``); NovelAI's ``.lorebook`` (``lorebookVersion``,
``entries`` of ``LoreEntry`` with its ``contextConfig``, ``settings``, ``categories``). What a
format documents as required is required here; optional fields are typed when present.

Builders (``risu_export``, ``world_info_list``, ``novelai_story``) write the shapes of other
tools that the reader takes, as small fixtures: RisuAI's export (its ``loreBook`` type and
``exportLoreBook``, kwaroran/RisuAI src/ts/storage/database.svelte.ts and
src/ts/process/lorebook.svelte.ts), a world info whose ``entries`` is a list (SillyTavern PR
#5921), a NovelAI ``.story`` container.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

_STRINGS = {"type": "array", "items": {"type": "string"}}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_BOOL_OR_NULL = {"type": ["boolean", "null"]}

SILLYTAVERN_ENTRY = {
    "type": "object",
    "required": ["uid", "key", "keysecondary", "comment", "content", "constant", "selective", "order", "position",
                 "disable"],
    "properties": {
        "uid": {"type": "integer", "minimum": 0}, "key": _STRINGS, "keysecondary": _STRINGS,
        "comment": {"type": "string"}, "content": {"type": "string"}, "constant": {"type": "boolean"},
        "vectorized": {"type": "boolean"}, "selective": {"type": "boolean"},
        "selectiveLogic": {"enum": [0, 1, 2, 3]}, "addMemo": {"type": "boolean"}, "order": {"type": "number"},
        "position": {"type": "number"}, "disable": {"type": "boolean"}, "ignoreBudget": {"type": "boolean"},
        "excludeRecursion": {"type": "boolean"}, "preventRecursion": {"type": "boolean"},
        "delayUntilRecursion": {"type": ["number", "boolean"]},
        "probability": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
        "useProbability": {"type": "boolean"}, "depth": {"type": "number"}, "outletName": {"type": "string"},
        "group": {"type": "string"}, "groupOverride": {"type": "boolean"}, "groupWeight": {"type": "number"},
        "scanDepth": _NUMBER_OR_NULL, "caseSensitive": _BOOL_OR_NULL, "matchWholeWords": _BOOL_OR_NULL,
        "useGroupScoring": _BOOL_OR_NULL, "automationId": {"type": "string"}, "role": {"type": ["integer", "null"]},
        "sticky": _NUMBER_OR_NULL, "cooldown": _NUMBER_OR_NULL, "delay": _NUMBER_OR_NULL, "triggers": _STRINGS,
        "displayIndex": {"type": ["integer", "null"]},
        **{name: {"type": "boolean"} for name in (
            "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
            "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes")},
    },
}
SILLYTAVERN = {"type": "object", "required": ["entries"],
               "properties": {"entries": {"type": "object", "additionalProperties": SILLYTAVERN_ENTRY}}}

LOREBOOK_V3_ENTRY = {
    "type": "object",
    "required": ["keys", "content", "extensions", "enabled", "insertion_order", "use_regex"],
    "properties": {
        "keys": _STRINGS, "content": {"type": "string"}, "extensions": {"type": "object"},
        "enabled": {"type": "boolean"}, "insertion_order": {"type": "number"}, "case_sensitive": {"type": "boolean"},
        "use_regex": {"type": "boolean"}, "constant": {"type": "boolean"}, "name": {"type": "string"},
        "priority": {"type": "number"}, "id": {"type": ["integer", "string"]}, "comment": {"type": "string"},
        "selective": {"type": "boolean"}, "secondary_keys": _STRINGS,
        "position": {"enum": ["before_char", "after_char"]},
    },
}
LOREBOOK_V3 = {
    "type": "object", "required": ["spec", "data"],
    "properties": {
        "spec": {"const": "lorebook_v3"},
        "data": {"type": "object", "required": ["extensions", "entries"], "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "scan_depth": {"type": "number"},
            "token_budget": {"type": "number"}, "recursive_scanning": {"type": "boolean"},
            "extensions": {"type": "object"}, "entries": {"type": "array", "items": LOREBOOK_V3_ENTRY}}},
    },
}

_NAI_CONTEXT = {
    "type": "object",
    "required": ["prefix", "suffix", "tokenBudget", "reservedTokens", "budgetPriority", "trimDirection",
                 "insertionType", "maximumTrimType", "insertionPosition"],
    "properties": {
        "prefix": {"type": "string"}, "suffix": {"type": "string"}, "tokenBudget": {"type": "number"},
        "reservedTokens": {"type": "number"}, "budgetPriority": {"type": "number"},
        "trimDirection": {"enum": ["trimBottom", "trimTop", "doNotTrim"]},
        "insertionType": {"enum": ["newline", "sentence", "token"]},
        "maximumTrimType": {"enum": ["newline", "sentence", "token"]}, "insertionPosition": {"type": "integer"},
    },
}
NOVELAI_ENTRY = {
    "type": "object",
    "required": ["text", "contextConfig", "displayName", "keys", "searchRange", "enabled", "forceActivation",
                 "keyRelative", "nonStoryActivatable", "category", "loreBiasGroups"],
    "properties": {
        "text": {"type": "string"}, "contextConfig": _NAI_CONTEXT, "displayName": {"type": "string"},
        "keys": _STRINGS, "searchRange": {"type": "integer", "minimum": 0}, "enabled": {"type": "boolean"},
        "forceActivation": {"type": "boolean"}, "keyRelative": {"type": "boolean"},
        "nonStoryActivatable": {"type": "boolean"}, "category": {"type": "string"},
        "loreBiasGroups": {"type": "array"}, "id": {"type": "string"}, "lastUpdatedAt": {"type": "integer"},
    },
}
NOVELAI = {
    "type": "object", "required": ["lorebookVersion", "entries", "settings", "categories"],
    "properties": {
        "lorebookVersion": {"type": "integer"}, "entries": {"type": "array", "items": NOVELAI_ENTRY},
        "settings": {"type": "object", "properties": {"orderByKeyLocations": {"type": "boolean"}}},
        "categories": {"type": "array"},
    },
}

SCHEMAS = {"sillytavern": SILLYTAVERN, "lorebook_v3": LOREBOOK_V3, "novelai": NOVELAI}


def problems(fmt: str, doc: Any) -> list[str]:
    """Where ``doc`` departs from ``fmt``'s documented fields (empty: it validates), including
    what a schema cannot say: SillyTavern files key each entry by its uid, ids are unique."""
    found = [f"{'/'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}"
             for e in Draft202012Validator(SCHEMAS[fmt]).iter_errors(doc)]
    if found:
        return found
    if fmt == "sillytavern":
        found += [f"entries/{k}: keyed apart from its uid {e['uid']}" for k, e in doc["entries"].items()
                  if k != str(e["uid"])]
        return found
    entries = doc["data"]["entries"] if fmt == "lorebook_v3" else doc["entries"]
    ids = [str(e["id"]) for e in entries if "id" in e]
    return found + [f"id {i} is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]


# -- builders of the shapes other tools write that the reader takes (not schemas: no spec) -------
def risu_entry(key: str, content: str, *, comment: str = "", secondkey: str = "", selective: bool = False,
               always: bool = False, insertorder: int = 100, mode: str = "normal", **extra: Any) -> dict[str, Any]:
    """A RisuAI lorebook item (``loreBook`` in its database.svelte.ts): ``key`` and ``secondkey``
    are comma-separated strings, ``alwaysActive`` is its constant, ``insertorder`` its order."""
    return {"key": key, "secondkey": secondkey, "insertorder": insertorder, "comment": comment, "content": content,
            "mode": mode, "alwaysActive": always, "selective": selective, **extra}


def risu_folder(folder_id: str, comment: str) -> dict[str, Any]:
    """A folder of RisuAI's lorebook editor (an item, not an entry): its key names it, its
    entries name it in their ``folder``."""
    return risu_entry(f"\uf000folder:{folder_id}", "", comment=comment, mode="folder")


def risu_export(items: list[dict[str, Any]]) -> dict[str, Any]:
    """RisuAI's lorebook export file (``exportLoreBook``)."""
    return {"type": "risu", "ver": 1, "data": items}


def world_info_list(entries: list[dict[str, Any]], name: str = "") -> dict[str, Any]:
    """A world info whose ``entries`` is a list (a character book without its card, as
    SillyTavern's PR #5921 reads it)."""
    return {"name": name, "entries": entries}


def novelai_story(title: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A NovelAI ``.story`` container holding a lorebook."""
    return {"storyContainerVersion": 1, "metadata": {"storyMetadataVersion": 1, "title": title},
            "content": {"storyContentVersion": 6, "story": {}, "context": [],
                        "lorebook": {"lorebookVersion": 4, "entries": entries, "settings": {}, "categories": []}}}
