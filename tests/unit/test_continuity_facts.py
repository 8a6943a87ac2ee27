"""``domain.continuity.facts_of``: which of a canon version's ``fields`` are structured facts a
draft can contradict (what the canon read model stores in ``rm_canon.facts``)."""

from __future__ import annotations

import math

from canon_ledger.domain.continuity import CONTROL_FIELDS, MAX_FACT, MAX_FACTS, facts_of


def test_scalar_fields_are_facts() -> None:
    fields = {"eyes": "grey", "age": 17, "height": 1.62, "alive": True, "married": False, "debt": 0, "home": "Harrowgate"}
    assert facts_of(fields) == fields


def test_control_fields_are_no_facts() -> None:
    assert CONTROL_FIELDS == {"hidden_until", "recall", "lorebook", "nodes", "secret"}
    fields = {"hidden_until": 12, "recall": {"keys": ["x"]}, "lorebook": {"entry": {}}, "nodes": [],
              "secret": "she is the heir", "state": "dead"}
    assert facts_of(fields) == {"state": "dead"}  # ``state`` is a fact; the others steer the ledger


def test_long_and_blank_strings_are_dropped() -> None:
    fields = {"short": "x" * MAX_FACT, "prose": "x" * (MAX_FACT + 1), "blank": "   ", "empty": ""}
    assert facts_of(fields) == {"short": "x" * MAX_FACT}


def test_nan_lists_objects_and_nulls_are_dropped() -> None:
    fields = {"nan": math.nan, "titles": ["a"], "kin": {"mother": "Ada"}, "none": None, "age": 17}
    assert facts_of(fields) == {"age": 17}


def test_booleans_stay_booleans_and_numbers_numbers() -> None:
    facts = facts_of({"alive": True, "count": 1, "ratio": 1.0})
    assert facts["alive"] is True and type(facts["count"]) is int and type(facts["ratio"]) is float


def test_at_most_max_facts_in_key_order_and_long_names_dropped() -> None:
    fields = {f"f{i:03d}": i for i in range(MAX_FACTS + 10)} | {"n" * 81: "too long a name"}
    facts = facts_of(fields)
    assert list(facts) == [f"f{i:03d}" for i in range(MAX_FACTS)]
    assert facts_of({"n" * 80: "ok", "n" * 81: "no"}) == {"n" * 80: "ok"}


def test_no_fields_no_facts() -> None:
    assert facts_of({}) == {}
