"""``local/...`` models: a LiteLLM custom provider running llama-cpp-python in a child process.

Each model is loaded once per process into its own worker (:mod:`.local_worker`) and reused; calls go
through ``Llama.create_chat_completion`` so the GGUF's own chat template formats the messages. The
worker is a separate process because llama.cpp is native code: a build for another CPU dies of SIGILL,
a memory-hungry context is killed by the OOM killer, and either would otherwise end the whole run
without a word. Here such a death becomes :class:`LocalModelDied`, one line naming the model, the
signal and the fix. Generations are serialised on the model's lock; ``acompletion`` runs the blocking
call in a daemon worker thread. Sampling is deterministic by default (temperature 0 → greedy, fixed
seed), and a reply depends only on its request: the worker evaluates every prompt from an empty KV cache
(no prefix reuse across requests, whose batch split changes greedy output) with a fixed batch size. The
worker exits within a fraction of a second of this process's death, even mid-generation.

Tuning through the environment: ``AGENTBENCH_LLAMA_THREADS`` (default: usable CPU cores),
``AGENTBENCH_LLAMA_CTX`` (context window, default 4096) and ``OMP_WAIT_POLICY`` (default ``PASSIVE``:
idle llama.cpp threads sleep instead of spinning, which keeps throughput up on a busy machine).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from .._env import prepare_environment
from ..errors import ConfigError, ModelError
from .processes import usable_cores
from .weights import ensure_model, local_model_spec

prepare_environment()  # LiteLLM is imported below: with the offline defaults, as in ._litellm

from litellm import CustomLLM  # noqa: E402
from litellm.exceptions import ContextWindowExceededError  # noqa: E402
from litellm.types.utils import ModelResponse, Usage  # noqa: E402

__all__ = [
    "PORTABLE_CMAKE_ARGS",
    "LocalLLM",
    "LocalModelDied",
    "LocalModelProcess",
    "load_local_model",
    "llama_threads",
    "rebuild_command",
]

DEFAULT_MAX_TOKENS = 512
DEFAULT_CTX = 4096

PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
"""llama.cpp build flags that run on every x86-64 CPU with AVX2, whatever else the build host has
(GGML_NATIVE would compile for the build host, AVX-512 and AMX included). arm64 builds ignore them."""

_load_lock = threading.Lock()
_models: dict[str, tuple[Any, threading.Lock]] = {}


class LocalModelDied(ModelError):
    """The local model's process ended while in use: fatal for the run, never a per-query error."""


def rebuild_command() -> str:
    """The command that replaces the installed llama-cpp-python with a portable build of the same version."""
    import importlib.metadata as md

    try:
        requirement = f"llama-cpp-python=={md.version('llama-cpp-python')}"
    except md.PackageNotFoundError:
        requirement = "llama-cpp-python"
    return (
        f"CMAKE_ARGS='{PORTABLE_CMAKE_ARGS}' {sys.executable} -m pip install --no-cache-dir "
        f"--force-reinstall --no-deps {requirement}"
    )


def llama_threads() -> int:
    """Threads for llama.cpp: ``$AGENTBENCH_LLAMA_THREADS`` or the CPU cores this process may use."""
    env = os.environ.get("AGENTBENCH_LLAMA_THREADS")
    if env:
        return max(1, int(env))
    return usable_cores()


class LocalModelProcess:
    """A loaded GGUF model in a worker process, with ``Llama``'s ``create_chat_completion``/``reset``."""

    def __init__(self, name: str, model_path: str, *, n_ctx: int, n_threads: int) -> None:
        self.name = name
        self.death_reported = False
        """Whether the worker's death was raised to a caller: until then every use raises it."""
        self._lock = threading.Lock()
        self._stderr = tempfile.TemporaryFile()
        # parent_pid: the worker's watchdog ends it as soon as this process is gone
        spec = {
            "model_path": model_path,
            "n_ctx": n_ctx,
            "n_threads": n_threads,
            "parent_pid": os.getpid(),
        }
        # llama.cpp's OpenMP workers spin while waiting; next to other busy processes (the sandbox, a
        # shared CI box) spinning threads starve each other and throughput drops several-fold (a
        # 64-token reply took 120 s instead of 16 s on a heavily loaded two-core machine)
        env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentbench.llm.local_worker", json.dumps(spec)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
        )
        ready = self._receive()
        if not ready.get("ok"):
            self.close()
            raise ModelError(f"cannot load local/{name}: {ready.get('error')}: {ready.get('message')}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def create_chat_completion(self, messages: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        reply = self._call({"messages": messages, "params": params})
        if not reply.get("ok"):
            message = str(reply.get("message", ""))
            if reply.get("error") == "ValueError":  # e.g. "Requested tokens (...) exceed context window"
                raise ValueError(message)
            raise RuntimeError(f"{reply.get('error')}: {message}")
        return reply["result"]

    def reset(self) -> None:
        """Forget the KV cache (every request already starts from an empty one; kept for callers)."""
        self._call({"op": "reset"})

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                raise self.death() from None
            return self._receive()

    def _receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise self.death()
        return json.loads(line)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def death(self) -> LocalModelDied:
        """How the worker ended, as the error to raise (waits for it; marks the death reported)."""
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # output closed but still running: treat as hung
            self.process.kill()
            code = self.process.wait()
        self.death_reported = True
        return LocalModelDied(death_message(f"local/{self.name}", code, self._stderr_tail()))

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4096))
            lines = self._stderr.read().decode("utf-8", "replace").splitlines()
        except (OSError, ValueError):
            return ""
        last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
        return last[:200]

    def close(self, timeout: float = 10.0) -> None:
        """End the worker: close its input (it exits when idle), kill it if it does not."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def death_message(model: str, returncode: int, stderr_tail: str = "") -> str:
    """One line: which model died, of what, and what to do about it."""
    said = f" (it printed: {stderr_tail})" if stderr_tail else ""
    if returncode >= 0:
        return (
            f"{model} exited unexpectedly with code {returncode}{said}; if this repeats, rebuild "
            f"llama-cpp-python portably: {rebuild_command()}"
        )
    try:
        sig = signal.Signals(-returncode).name
    except ValueError:
        sig = f"signal {-returncode}"
    if sig == "SIGKILL":
        return (
            f"{model} was killed by SIGKILL, most likely by the kernel's out-of-memory killer{said}: free "
            "memory, lower AGENTBENCH_LLAMA_CTX or use local/qwen2.5-coder-0.5b"
        )
    if sig == "SIGILL":
        return (
            f"{model} died of SIGILL (illegal instruction): llama-cpp-python was compiled for CPU "
            f"features this machine cannot execute; rebuild it portably: {rebuild_command()}"
        )
    return (
        f"{model} died of {sig} inside llama-cpp-python{said}; rebuild it portably and retry: "
        f"{rebuild_command()}"
    )


def load_local_model(name: str) -> tuple[Any, threading.Lock]:
    """The process-wide ``(model, lock)`` for local model ``name``, starting its worker on first use."""
    spec = local_model_spec(name)
    with _load_lock:
        if spec.name in _models:
            model, lock = _models[spec.name]
            if not isinstance(model, LocalModelProcess) or model.alive:
                return model, lock
            if not model.death_reported:  # it died while idle: that is still news for the caller
                raise model.death()
            # its death was reported; whoever asks again gets a new worker
        path = ensure_model(spec.name)
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(
                f"llama-cpp-python is not installed, needed by local/{spec.name}: pip install 'agentbench[{spec.extra}]'"
            )
        # (also in this process, for callers that load llama.cpp here too, as bench/run_overhead.py does)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        model = LocalModelProcess(
            spec.name,
            str(path),
            n_ctx=int(os.environ.get("AGENTBENCH_LLAMA_CTX", DEFAULT_CTX)),
            n_threads=llama_threads(),
        )
        if not _models:
            atexit.register(_free_models)
        _models[spec.name] = (model, threading.Lock())
        return _models[spec.name]


def _free_models() -> None:
    """End the workers at exit. One still generating for a daemon thread (an interrupted run) is
    killed rather than waited for."""
    for model, lock in list(_models.values()):
        if isinstance(model, LocalModelProcess):
            model.close(timeout=10.0 if lock.acquire(blocking=False) else 0.0)


def _sampling(optional_params: dict) -> dict[str, Any]:
    params: dict[str, Any] = {
        "temperature": float(optional_params.get("temperature", 0.0) or 0.0),
        "max_tokens": int(optional_params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "seed": int(optional_params.get("seed") or 0),
    }
    if optional_params.get("top_p") is not None:
        params["top_p"] = float(optional_params["top_p"])
    grammar = optional_params.get("grammar") or (optional_params.get("extra_body") or {}).get("grammar")
    if grammar:  # GBNF text: the worker samples the reply under it
        params["grammar"] = str(grammar)
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
