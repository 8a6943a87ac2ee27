"""Adapters: event stores, CLI (and later providers, tokenizer, HTTP)."""
