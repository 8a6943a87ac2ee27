"""How each fact reads inside a packet. Rendered once, when the event is projected.

Changing a format here changes packet bytes: bump the canon projection's VERSION and
rebuild, so issued packets stay auditable against the version that made them.
"""

from __future__ import annotations

import json
from typing import Any

# Fields that steer packing or recall rather than describe the entry: never rendered as text
# (an imported lorebook entry's source settings would otherwise repeat its content in JSON).
CONTROL_FIELDS = ("hidden_until", "nodes", "state", "recall", "lorebook")


def guardrails(lines: list[str]) -> str:
    return "Style guardrails:\n" + "\n".join(f"- {line}" for line in lines) if lines else ""


def output_contract(text: str) -> str:
    return f"Output contract: {text}" if text else ""


def goals(chapter: int, goals: list[str]) -> str:
    return f"Chapter {chapter} goals:\n" + "\n".join(f"- {g}" for g in goals) if goals else ""


TAG_LABELS = (("characters", "Characters"), ("locations", "Locations"), ("threads", "Threads"),
              ("callbacks", "Callbacks"), ("items", "Items"))


def scene_card(chapter: int, scene_id: str, summary: str, tags: dict[str, list[str]]) -> str:
    lines = [f"Scene {scene_id} (chapter {chapter}): {summary}"]
    lines += [f"{label}: {', '.join(tags[name])}" for name, label in TAG_LABELS if tags.get(name)]
    return "\n".join(lines)


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)


def canon_version(kind: str, key: str, version: dict[str, Any]) -> str:
    aka = version.get("aliases") or []
    head = f"{version['name']} ({kind} {key}"
    head += f"; also {', '.join(aka)}" if aka else ""
    head += f"; from chapter {version['valid_from']})"
    lines = [head]
    if version.get("text"):
        lines.append(version["text"])
    fields = version.get("fields") or {}
    state = fields.get("state")
    described = [f"{k}: {_value(v)}" for k, v in sorted(fields.items()) if k not in CONTROL_FIELDS]
    if state is not None:
        described.insert(0, f"state: {_value(state)}")
    if described:
        lines.append("; ".join(described))
    return "\n".join(lines)


def retirement(kind: str, key: str, valid_from: int, reason: str) -> str:
    return f"({kind} {key}) retired from chapter {valid_from}: {reason}"


def chain_node(chain: str, node: dict[str, Any]) -> str:
    return f"[{chain}] {node.get('kind', 'node')} {node['id']}: {node['text']}"


def chapter_summary(chapter: int, text: str) -> str:
    return f"Chapter {chapter} summary: {text}"


def volume_summary(volume: int, text: str) -> str:
    return f"Volume {volume} summary: {text}"


def chapter_text(chapter: int, text: str) -> str:
    return f"Chapter {chapter} text:\n{text}"
