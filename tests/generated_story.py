"""The benchmarks' story generator, ``benchmarks/gen_story.py``, for tests (benchmarks/ is no
package): ``from tests.generated_story import gen_story``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("gen_story", ROOT / "benchmarks" / "gen_story.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_story = _load()
