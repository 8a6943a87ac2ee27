"""Use cases: command handling (and, later, packets, audit, compile, lint, quota)."""
