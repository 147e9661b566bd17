"""``local/...`` models: a LiteLLM custom provider running llama-cpp-python in-process.

Each model is loaded once per process and reused; calls go through ``Llama.create_chat_completion``
so the GGUF's own chat template formats the messages. llama.cpp contexts are not thread-safe, so every
generation holds the model's lock; ``acompletion`` runs the blocking call in a daemon worker thread. Sampling
is deterministic by default (temperature 0 → greedy, fixed seed).

Tuning through the environment: ``AGENTBENCH_LLAMA_THREADS`` (default: usable CPU cores),
``AGENTBENCH_LLAMA_CTX`` (context window, default 4096) and ``OMP_WAIT_POLICY`` (default ``PASSIVE``:
idle llama.cpp threads sleep instead of spinning, which keeps throughput up on a busy machine).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
from typing import Any

from litellm import CustomLLM
from litellm.exceptions import ContextWindowExceededError
from litellm.types.utils import ModelResponse, Usage

from ..errors import ConfigError
from .weights import ensure_model, local_model_spec

__all__ = ["LocalLLM", "load_local_model", "llama_threads"]

DEFAULT_MAX_TOKENS = 512
DEFAULT_CTX = 4096

_load_lock = threading.Lock()
_models: dict[str, tuple[Any, threading.Lock]] = {}


def llama_threads() -> int:
    """Threads for llama.cpp: ``$AGENTBENCH_LLAMA_THREADS`` or the CPU cores this process may use."""
    env = os.environ.get("AGENTBENCH_LLAMA_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def load_local_model(name: str) -> tuple[Any, threading.Lock]:
    """The process-wide ``(Llama, lock)`` for local model ``name``, loading it on first use."""
    spec = local_model_spec(name)
    with _load_lock:
        if spec.name in _models:
            return _models[spec.name]
        path = ensure_model(spec.name)
        # llama.cpp's OpenMP workers spin while waiting; next to other busy processes (the sandbox, a
        # shared CI box) spinning threads starve each other and throughput drops several-fold
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                f"llama-cpp-python is not installed, needed by local/{spec.name}: pip install 'agentbench[{spec.extra}]'"
            ) from exc
        threads = llama_threads()
        llama = Llama(
            model_path=str(path),
            n_ctx=int(os.environ.get("AGENTBENCH_LLAMA_CTX", DEFAULT_CTX)),
            n_threads=threads,
            n_threads_batch=threads,
            seed=0,
            verbose=False,
        )
        if not _models:
            atexit.register(_free_models)
        _models[spec.name] = (llama, threading.Lock())
        return _models[spec.name]


def _free_models() -> None:
    """Free the models at exit, while llama_cpp is intact: left to ``Llama.__del__`` during interpreter
    teardown, freeing fails with "Exception ignored ... 'NoneType' object is not callable". A model still
    generating in a daemon thread (an interrupted run) is left alone: freeing it under the thread crashes."""
    for llama, lock in list(_models.values()):
        if lock.acquire(blocking=False):
            try:
                llama.close()
            finally:
                lock.release()


def _sampling(optional_params: dict) -> dict[str, Any]:
    params: dict[str, Any] = {
        "temperature": float(optional_params.get("temperature", 0.0) or 0.0),
        "max_tokens": int(optional_params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "seed": int(optional_params.get("seed") or 0),
    }
    if optional_params.get("top_p") is not None:
        params["top_p"] = float(optional_params["top_p"])
    stop = optional_params.get("stop")
    if stop:
        params["stop"] = [stop] if isinstance(stop, str) else list(stop)
    return params


class LocalLLM(CustomLLM):
    """Serves ``local/qwen2.5-coder-1.5b`` and ``local/qwen2.5-coder-0.5b``."""

    def completion(
        self, model: str, messages: list, model_response: ModelResponse, optional_params: dict, **_: Any
    ):
        llama, lock = load_local_model(model)
        params = _sampling(optional_params or {})
        chat = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        with lock:
            started = time.perf_counter()  # after the lock: concurrent requests queue here, not generate
            try:
                out = llama.create_chat_completion(messages=chat, **params)
            except ValueError as exc:
                # llama-cpp-python: "Requested tokens (...) exceed context window of ..."
                if "context window" in str(exc):
                    raise ContextWindowExceededError(
                        message=str(exc), model=f"local/{model}", llm_provider="local"
                    ) from exc
                raise
            generation_seconds = time.perf_counter() - started
        choice = out["choices"][0]
        model_response.choices[0].message.content = choice["message"].get("content") or ""
        model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
        usage = out.get("usage") or {}
        model_response.usage = Usage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            total_tokens=int(usage.get("total_tokens", 0)),
        )
        model_response.model = f"local/{local_model_spec(model).name}"
        model_response._hidden_params["generation_seconds"] = generation_seconds
        return model_response

    async def acompletion(self, *args: Any, **kwargs: Any):
        # A daemon thread rather than the default executor: on Ctrl-C the process exits at once instead
        # of joining a generation that may run for many seconds more.
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        def work() -> None:
            try:
                result, error = self.completion(*args, **kwargs), None
            except BaseException as exc:  # handed to the awaiting coroutine
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the event loop is gone (interrupted run)
                pass

        threading.Thread(target=work, name="agentbench-llama", daemon=True).start()
        return await future
