"""The z-score's spread is ``statistics.pstdev``'s, float for float, computed faster."""

from __future__ import annotations

import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from canon_ledger.application.retrieval.rerank import pstdev


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
                min_size=1, max_size=120))
def test_the_spread_is_the_library_s_to_the_last_bit(values: list[float]) -> None:
    assert pstdev(values) == statistics.pstdev(values)


def test_other_inputs_go_to_the_library() -> None:
    assert pstdev([1, 2, 3]) == statistics.pstdev([1, 2, 3])  # ints
    assert pstdev([1.0, 2.0, 4.0]) == statistics.pstdev([1.0, 2.0, 4.0])
