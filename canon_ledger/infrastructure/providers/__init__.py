"""LLM providers: ``offline`` (default: extractive, no network) and ``gemini``."""
