"""Packet bytes come from orjson for speed; the contract defines them as json.dumps output.

Issued packets are audited by hash, so the two must agree on every input a packet can hold:
text of any script, control characters, quotes, emoji, integers of any size, nesting.
"""

from hypothesis import given, settings, strategies as st

from canon_ledger.application.packets.packet import canonical_bytes, canonical_json
from tests.helpers import examples

# Lone surrogates cannot be encoded as UTF-8 by either encoder (both raise), so they are excluded.
text = st.text(alphabet=st.characters(exclude_categories=("Cs",)))
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | text
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(text, inner, max_size=5),
                      max_leaves=30)


@settings(max_examples=examples(200, 500))
@given(values)
def test_orjson_bytes_equal_the_json_definition(value: object) -> None:
    assert canonical_bytes(value) == canonical_json(value).encode()


def test_escapes_that_differ_between_encoders_elsewhere() -> None:
    for s in ["\x00\x1f\x7f", "\u2028\u2029", "</script>", "\"\\/", "é😀", "\t\n\r\b\f"]:
        assert canonical_bytes({"t": s}) == canonical_json({"t": s}).encode()
