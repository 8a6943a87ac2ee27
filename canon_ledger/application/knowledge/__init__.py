"""The knowledge layer: wiki pages compiled from chunks, within an LLM quota."""
