"""Strict JSON out (never NaN or Infinity), the same for the CLI's lines and the API's bodies."""

from __future__ import annotations

import json
from typing import Any


def strict(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float as null: what strict JSON can say of it."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(strict(obj), ensure_ascii=False, default=str, allow_nan=False)
