"""Read models built from events (the packet compiler reads only these)."""
