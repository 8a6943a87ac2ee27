"""Sentence embedders fetched from the Hugging Face hub by name: for online users, never the
default, chosen only with ``CANON_EMBEDDER=hub:REPO[:ONNX_FILE]``.

The repo's ONNX export and its ``tokenizer.json`` are downloaded (and cached) by
``huggingface_hub``, an optional dependency, then run like the packaged model. With no network
or no ``huggingface_hub`` the choice fails with an error that says what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from canon_ledger.infrastructure.providers.minilm import OnnxEmbedder, SemanticUnavailable

DEFAULT_ONNX_FILE = "onnx/model.onnx"  # where sentence-transformers repos keep their ONNX export


def hub_embedder(spec: str, download: Callable[..., Any] | None = None) -> OnnxEmbedder:
    """``spec``: ``REPO`` or ``REPO:ONNX_FILE`` (e.g. ``sentence-transformers/all-MiniLM-L6-v2``).
    ``download(repo_id=, filename=) -> local path``: ``huggingface_hub.hf_hub_download`` by default."""
    repo, _, onnx_file = spec.partition(":")
    if not repo:
        raise ValueError("hub:REPO[:ONNX_FILE], e.g. hub:sentence-transformers/all-MiniLM-L6-v2")
    if download is None:
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise SemanticUnavailable(f"hub:{repo} needs huggingface_hub (pip install huggingface_hub) and network "
                                      "access; offline, use the packaged model (CANON_EMBEDDER=minilm)") from None
        download = hf_hub_download
    try:
        model = download(repo_id=repo, filename=onnx_file or DEFAULT_ONNX_FILE)
        tokenizer = download(repo_id=repo, filename="tokenizer.json")
    except Exception as e:  # noqa: BLE001 - any fetch failure means the same thing to the user
        raise SemanticUnavailable(f"could not fetch {repo} from the hub ({type(e).__name__}: {str(e)[:160]}); "
                                  "offline, use the packaged model (CANON_EMBEDDER=minilm)") from None
    return OnnxEmbedder(f"hub:{repo}", Path(model), Path(tokenizer))
