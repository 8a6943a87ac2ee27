"""The L0 packet compiler: confirmed canon -> a token-budgeted context packet per worker call."""
