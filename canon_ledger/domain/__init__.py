"""Canon Ledger's domain: aggregates, commands, invariants. Pure: no I/O."""
