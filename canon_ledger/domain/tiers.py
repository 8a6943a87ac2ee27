"""A packet's tiers: the one table of their names, in fill order, and what each holds.

A recipe's read names the tier its candidates join (``application.packets.recipes``). The
compiler fills P0 first and never trims it (a P0 that does not fit refuses the packet), then
each later tier while the budget has room. The names sort in tier order ("P0" < ... < "P4"):
the compiler sorts candidates by their tier's name.
"""

from __future__ import annotations

from typing import Final, Literal

Tier = Literal["P0", "P1", "P2", "P3", "P4"]
P0: Final = "P0"
P1: Final = "P1"
P2: Final = "P2"
P3: Final = "P3"
P4: Final = "P4"
TIERS: tuple[Tier, ...] = (P0, P1, P2, P3, P4)
# What each tier holds, as a packet's schema describes its items' tiers.
HOLDS: dict[Tier, str] = {P0: "hard constraints", P1: "current state", P2: "recent context",
                          P3: "distant reference", P4: "supplementary (retrieval)"}
# The tiers an entry's recall rule may name for it when always on: P0 is for hard constraints.
RECALL_TIERS: tuple[Tier, ...] = (P1, P2, P3, P4)
