"""The fold split of ``benchmarks/cv_cranfield.py`` (issue 21), pinned: the cross-validated
numbers in docs/benchmarks.md are reproducible only while it stays the same (benchmarks/ is no
package, so the script is loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("cv_cranfield", ROOT / "benchmarks" / "cv_cranfield.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cv_cranfield", module)
    spec.loader.exec_module(module)
    return module


cv = _load()


def test_five_disjoint_folds_of_45_cover_the_225_queries() -> None:
    split = cv.folds()
    assert (cv.QUERIES, cv.FOLDS, cv.SEED) == (225, 5, 21)
    assert [len(fold) for fold in split] == [45] * 5
    assert sorted(n for fold in split for n in fold) == list(range(1, 226))  # disjoint and covering
    assert all(fold == sorted(fold) for fold in split)


def test_the_split_is_pinned() -> None:
    split = cv.folds()
    assert split[0][:10] == [4, 5, 11, 12, 13, 14, 15, 20, 24, 26]
    assert [fold[:5] for fold in split[1:]] == [[1, 2, 6, 7, 18], [8, 17, 21, 27, 35], [3, 10, 32, 54, 57],
                                                 [9, 16, 22, 23, 30]]
    assert [fold[-2:] for fold in split] == [[217, 222], [224, 225], [216, 219], [215, 223], [195, 218]]
    assert cv.folds() == split  # no hidden state: the same split on every call


def test_another_seed_or_size_gives_another_split() -> None:
    assert cv.folds(seed=22) != cv.folds()
    small = cv.folds(n=12, k=5)
    assert [len(fold) for fold in small] == [3, 3, 2, 2, 2]
    assert sorted(n for fold in small for n in fold) == list(range(1, 13))
