"""Async LLM client over ``litellm.acompletion``.

- bounded concurrency (one ``asyncio.Semaphore`` per event loop) over requests in flight: a request
  waiting to retry gives its slot to another, so a rate-limited run keeps ``concurrency`` requests busy;
- retries (``tenacity``) on rate limits and transient provider errors, after the ``Retry-After`` the
  provider sent (``retry-after-ms`` or ``retry-after`` seconds), else exponential backoff with jitter;
  LiteLLM's own retries are off, so ``max_retries`` is the only retry budget;
- deterministic defaults: temperature 0, fixed seed;
- a persistent response cache (:mod:`.cache`), so rerunning a configuration makes no LLM calls;
- token usage and cost per call (``litellm.completion_cost``; 0 for ``local/`` models), summed in
  :class:`LLMStats` over the calls this client actually made (cache hits are counted separately);
- :meth:`LLMClient.check` validates the model and its API key up front (:mod:`.check`).

Errors that only affect one request (still failing after the retries, context too long, content
filtered) come back as an :class:`LLMResult` with ``error`` set, to be recorded as ``llm_error``. Errors
that doom every request (bad key, unknown model, unsupported parameters) raise :class:`ModelError`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from ..errors import ConfigError, ModelError
from ._litellm import in_process_provider
from .cache import ResponseCache, cache_key
from .check import DEFAULT_MODEL, check_model, check_reachable, key_variable, redact
from .processes import LLMProcessPool, RemoteCallError, WireLimit, process_pool

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MODEL", "LLMClient", "LLMResult", "LLMStats", "SAMPLE", "check_model", "redact"]

SAMPLE: ContextVar[int | None] = ContextVar("agentbench_sample", default=None)
"""The repeated sample (``--samples`` above 1) of this context's requests, set by the run's worker so agents
need not pass it: part of the cache key, and added to the seed (a seeded provider would otherwise give one
sample N times). None, the default, changes neither: one-sample keys and requests are as they were."""


class LLMStats(BaseModel):
    """Totals over one client's lifetime. Tokens and cost count live calls only, not cache hits."""

    calls: int = 0
    """Requests sent to the provider that returned a response (retries not counted)."""
    cache_hits: int = 0
    errors: int = 0
    """Requests that ended as ``llm_error``."""
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class ToolCall(BaseModel):
    """A function call the model asked for (native function calling, or parsed from its text)."""

    id: str = ""
    name: str
    arguments: str
    """JSON text, as the provider returned it (it may not parse: that is the model's error)."""


class LLMResult(BaseModel):
    """One completion (or the error that replaced it)."""

    model: str
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Native function calls (only when the request passed ``tools``)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    """Cost of the call that produced the text (also when it is now served from the cache)."""
    cached: bool = False
    error: str | None = None
    """``"<ExceptionClass>: message"`` when the request failed after retries; the text is then empty."""
    attempts: int = 0
    latency_s: float = 0.0
    """Seconds the request kept the provider busy: the wall time of the call (retries included), or the
    generation time the provider reports itself (``local/`` models), which leaves out the wait for the
    model lock that serialises concurrent requests, so per-call seconds add up to the real LLM time."""

    @property
    def ok(self) -> bool:
        return self.error is None


def _exception_classes(litellm: Any) -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """(fatal, transient, per-request) LiteLLM errors. Every release defines them in
    ``litellm.exceptions``; not all re-export them at the top."""
    errors = litellm.exceptions
    fatal = (
        errors.AuthenticationError,
        errors.PermissionDeniedError,
        errors.NotFoundError,
        errors.UnsupportedParamsError,
        errors.BudgetExceededError,
    )
    transient = (
        errors.RateLimitError,
        errors.Timeout,
        errors.APIConnectionError,
        errors.InternalServerError,
        errors.ServiceUnavailableError,
        errors.BadGatewayError,
    )
    per_request = (errors.BadRequestError, errors.APIError, errors.UnprocessableEntityError)
    return fatal, transient, per_request


def _provider_fatal(exc: BaseException) -> ModelError | None:
    """A :class:`ModelError` a provider of ours raised (LiteLLM wraps it, e.g. in APIConnectionError,
    which would otherwise be retried and recorded per query): it dooms every request, so it is raised."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ModelError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def _sleep(seconds: float) -> None:
    """tenacity's sleep between attempts (this module's ``asyncio.sleep``, which tests replace)."""
    await asyncio.sleep(seconds)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms``, else ``retry-after`` in seconds; an
    HTTP date is ignored), from the response headers LiteLLM keeps on its exceptions; None if absent."""
    if exc is None:
        return None
    if isinstance(exc, RemoteCallError):
        return exc.retry_after
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not isinstance(headers, Mapping):
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except (TypeError, ValueError):
            continue
        if seconds >= 0:
            return seconds
    return None


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split()) or repr(exc)
    name = exc.type_name if isinstance(exc, RemoteCallError) else type(exc).__name__
    return redact(f"{name}: {message}")[:500]


def error_kind(litellm: Any | None, exc: BaseException) -> str:
    """How a call's exception is handled: ``provider_fatal`` (a provider of ours raised a
    :class:`ModelError`), ``auth`` and ``fatal`` (doom every request), ``transient`` (retried),
    ``per_request`` (recorded as ``llm_error``) or ``other`` (a bug: raised). A worker process's
    :class:`RemoteCallError` carries the kind its worker found; ``litellm`` None: imported only if the
    exception needs it."""
    if isinstance(exc, RemoteCallError):
        return exc.kind
    if _provider_fatal(exc) is not None:
        return "provider_fatal"
    if litellm is None:
        if "litellm" not in sys.modules:
            return "other"  # not raised by LiteLLM
        from ._litellm import litellm_module

        litellm = litellm_module()
    fatal, transient, per_request = _exception_classes(litellm)
    if isinstance(exc, litellm.exceptions.AuthenticationError):
        return "auth"
    if isinstance(exc, fatal):
        return "fatal"
    if isinstance(exc, transient):
        return "transient"
    if isinstance(exc, per_request):
        return "per_request"
    return "other"


def completion_fields(litellm: Any, response: Any, *, priced: bool) -> dict[str, Any]:
    """What a run keeps of a LiteLLM response (plain JSON, so a worker process can send it): text, tool
    calls, token counts, the cost LiteLLM priced (when ``priced``; 0 for models missing from its cost map)
    and, for ``local/`` models, the seconds the model was busy."""
    choice = response.choices[0]
    calls = [
        {
            "id": str(getattr(c, "id", "") or ""),
            "name": str(getattr(c.function, "name", "") or ""),
            "arguments": str(getattr(c.function, "arguments", "") or ""),
        }
        for c in (getattr(choice.message, "tool_calls", None) or [])
        if getattr(c, "function", None) is not None
    ]
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = 0.0
    if priced:
        # LiteLLM priced the response already (pricing it again costs ms of CPU per call, a cap on
        # throughput at high concurrency); models missing from the cost map cost "unknown" = 0
        try:
            if isinstance(hidden, dict) and "response_cost" in hidden:
                cost = float(hidden["response_cost"] or 0.0)
            else:
                cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:
            cost = 0.0
    busy = hidden.get("generation_seconds") if isinstance(hidden, dict) else None
    return {
        "text": getattr(choice.message, "content", None) or "",
        "tool_calls": calls,
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "cost_usd": cost,
        "busy_seconds": float(busy) if isinstance(busy, int | float) else None,
    }


_client_ids = itertools.count()


class PerLoopSemaphore:
    """``sem()`` is an ``asyncio.Semaphore`` of the running event loop: a semaphore is bound to one loop,
    and the run stage starts a loop per chunk of work."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._by_loop: dict[int, asyncio.Semaphore] = {}

    def __call__(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._by_loop:
            self._by_loop[loop_id] = asyncio.Semaphore(self.value)
        return self._by_loop[loop_id]


class LLMClient:
    """Completions for one model with caching, bounded concurrency and retries.

    ``params`` are extra LiteLLM arguments that change the output (e.g. ``top_p``, ``stop`` or, in
    tests, ``mock_response``); they are part of the cache key. ``cache`` is a :class:`ResponseCache`,
    the directory of one, ``True`` for the default one (``llm-responses/`` under
    :func:`agentbench.cache.cache_dir`) or ``False``.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = 0,
        params: dict[str, Any] | None = None,
        concurrency: int = 4,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 600.0,
        cache: ResponseCache | str | Path | bool = True,
        processes: int = 0,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.model = model
        self.api_base = api_base
        self._placeholder_key = False
        if api_key is None and api_base and (var := key_variable(model)) and not os.environ.get(var):
            # a self-hosted OpenAI-compatible server may need no key, but the OpenAI SDK refuses to send a
            # request without one; a server that does need one answers 401, reported as a ModelError
            api_key, self._placeholder_key = "no-key", True
        self._api_key = api_key
        self.params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
        if seed is not None:
            self.params["seed"] = seed
        self.params.update(params or {})
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        if cache is True:
            self.cache: ResponseCache | None = ResponseCache()
        elif cache is False:
            self.cache = None
        elif isinstance(cache, ResponseCache):
            self.cache = cache
        else:
            self.cache = ResponseCache(cache)
        self.stats = LLMStats()
        self._semaphore = PerLoopSemaphore(concurrency)
        self._handoff = PerLoopSemaphore(2 * concurrency)
        """Requests handed to worker processes, which hold them to ``concurrency`` on the wire
        (:class:`WireLimit`): the extra ``concurrency`` wait there, built, for a slot."""
        self._wire = WireLimit(f"{os.getpid()}:{next(_client_ids)}", concurrency)
        self._in_flight: dict[str, asyncio.Future[LLMResult]] = {}
        """Requests being answered, by cache key: an identical request waits for the same answer."""
        self._ready = False
        self.processes = processes
        """Worker processes making the calls (:mod:`.processes`); 0, or a model served by a handler
        registered in this process, keeps them in this process."""
        self._pool: LLMProcessPool | None = None

    @property
    def is_local(self) -> bool:
        return self.model.startswith("local/")

    def check(self) -> None:
        """Fail fast when the model is unknown, its key is missing (see :func:`check_model`) or the
        ``api_base`` server cannot be reached (see :func:`check_reachable`)."""
        check_model(self.model, self.api_base, None if self._placeholder_key else self._api_key)
        if self.api_base:
            check_reachable(self.api_base)
        self._start_workers()  # they import LiteLLM (seconds) while the run sets up

    def _start_workers(self) -> None:
        """Worker processes serve API models whose parameters travel as JSON (a Python object given as a
        parameter, e.g. an exception as ``mock_response``, keeps the calls in this process)."""
        if self._pool is not None or self.processes < 1 or in_process_provider(self.model):
            return
        try:
            json.dumps(self.params)
        except (TypeError, ValueError):
            return
        self._pool = process_pool(self.processes)
        logger.info(
            "llm: %s, calls made in %d worker process%s (--llm-processes)",
            self.model,
            self.processes,
            "" if self.processes == 1 else "es",
        )

    def key(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> str:
        """Cache key of a request: model, messages, tools, the decoding grammar, output-affecting params
        and the API base (an unconstrained reply is never served for a constrained request)."""
        params = {**self._sampled_params(), "api_base": self.api_base}
        if (sample := SAMPLE.get()) is not None:
            params["sample"] = sample
        if tools:
            params["tools"] = tools
        if grammar:
            params["grammar"] = grammar
        return cache_key(self.model, messages, params)

    def _sampled_params(self) -> dict[str, Any]:
        """The request's parameters; under a repeated sample (:data:`SAMPLE`) the seed is offset by its index."""
        sample = SAMPLE.get()
        if sample is None or self.params.get("seed") is None:
            return dict(self.params)
        return {**self.params, "seed": self.params["seed"] + sample}

    async def _prepare(self) -> Any:
        """LiteLLM, or None when worker processes make the calls: then this process never imports it
        (seconds of CPU on the run's critical path, while the workers import it on other cores)."""
        if not self._ready and self.is_local:
            # load the weights outside LiteLLM so a ConfigError (missing parts) reaches the caller intact
            from .local import load_local_model

            await asyncio.to_thread(load_local_model, self.model)
        if not self._ready:
            self._start_workers()
        self._ready = True
        if self._pool is not None:
            return None
        from ._litellm import litellm_module

        return litellm_module()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> LLMResult:
        """The completion for ``messages``: from the cache, or from the provider with retries.

        ``tools`` (OpenAI function schemas) enables native function calling; the calls come back in
        :attr:`LLMResult.tool_calls`. ``grammar`` (GBNF text, ``local/`` models only) constrains the
        reply to the grammar's language (:mod:`agentbench.agent.grammar`)."""
        if grammar and not self.is_local:
            raise ConfigError(f"{self.model}: a decoding grammar needs a local/ model")
        key = self.key(messages, tools, grammar)
        if (hit := self._cached(key)) is not None:
            return hit
        if self.cache is None:
            return await self._call_with_retries(await self._prepare(), messages, tools, grammar)
        loop = asyncio.get_running_loop()
        twin = self._in_flight.get(key)
        if twin is not None and twin.get_loop() is loop:
            # the same request is in flight (e.g. rag whose top-1 is the canonical, and oracle)
            result = await asyncio.shield(twin)
            if result.ok:
                self.stats.cache_hits += 1
                return result.model_copy(update={"cached": True})
            return result
        future: asyncio.Future[LLMResult] = loop.create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a fatal error nobody awaited
        self._in_flight[key] = future  # until the answer is in the cache, so no twin misses both
        try:
            result = await self._call_with_retries(await self._prepare(), messages, tools, grammar)
            future.set_result(result)
            if result.ok:
                # a write transaction takes milliseconds: on the event loop it would stall every request
                await asyncio.to_thread(
                    self.cache.put,
                    key,
                    self.model,
                    {
                        "text": result.text,
                        "tool_calls": [c.model_dump() for c in result.tool_calls],
                        "prompt_tokens": result.prompt_tokens,
                        "completion_tokens": result.completion_tokens,
                        "cost_usd": result.cost_usd,
                        "attempts": result.attempts,
                        "latency_s": result.latency_s,
                    },
                )
        except Exception as exc:  # a ModelError: its twin raises it too
            if not future.done():
                future.set_exception(exc)
            raise
        except BaseException:  # cancelled
            future.cancel()
            raise
        finally:
            if self._in_flight.get(key) is future:
                del self._in_flight[key]
        return result

    def _cached(self, key: str) -> LLMResult | None:
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cache_hits += 1
            return LLMResult(model=self.model, cached=True, **hit)
        return None

    def _backoff(self, state: RetryCallState) -> float:
        """Seconds before the next attempt. The provider's ``Retry-After`` when it sent one (capped at
        ``max_backoff_s``), stretched by a random 0-25% so the requests it refused together do not all
        come back in the same instant; else ``backoff_s * 2**(n-1)`` capped at ``max_backoff_s`` after the
        n-th failure, times a random factor in [0.5, 1) so concurrent requests do not retry in lockstep."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if (asked := retry_after(exc)) is not None:
            return min(asked, self.max_backoff_s) * (1 + random.random() / 4)
        delay = wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s)(state)
        return delay * (0.5 + random.random() / 2)

    def _retrying(self, litellm: Any | None) -> AsyncRetrying:
        """Up to ``max_retries`` retries of transient provider errors; anything else ends the loop at once
        (a provider's own :class:`ModelError`, which LiteLLM may wrap in a transient class, included)."""

        def count_retry(_: RetryCallState) -> None:
            self.stats.retries += 1

        return AsyncRetrying(
            retry=retry_if_exception(lambda exc: error_kind(litellm, exc) == "transient"),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._backoff,
            sleep=_sleep,
            before_sleep=count_retry,
            reraise=True,  # the last error itself, not tenacity's RetryError
        )

    async def _call_with_retries(
        self,
        litellm: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> LLMResult:
        """The provider's answer, each attempt holding a concurrency slot only while it is in flight
        (the wait before a retry does not)."""
        kwargs: dict[str, Any] = self._sampled_params()
        if tools:
            kwargs["tools"] = tools
        if grammar:  # reaches the local provider's optional_params, then its worker process as JSON
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "grammar": grammar}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        kwargs.update(
            model=self.model,
            messages=messages,
            timeout=self.timeout_s,
            num_retries=0,  # retries are ours (above), not LiteLLM's
            drop_params=True,
        )
        started = time.perf_counter()
        attempts = 0
        try:
            async for attempt in self._retrying(litellm):
                with attempt:
                    slots = self._semaphore if self._pool is None else self._handoff
                    async with slots():
                        attempts = attempt.retry_state.attempt_number
                        if self._pool is not None:
                            fields = (await self._pool.complete(kwargs, self._wire)).fields
                        else:
                            response = await litellm.acompletion(**kwargs)
                            fields = completion_fields(litellm, response, priced=not self.is_local)
        except Exception as exc:
            kind = error_kind(litellm, exc)
            if kind == "provider_fatal":  # e.g. the local model's process died
                raise (_provider_fatal(exc) or ModelError(f"{self.model}: {_describe(exc)}")) from None
            if kind in ("auth", "fatal"):
                hint = ""
                if self._placeholder_key and kind == "auth":
                    hint = f" (no API key was sent to {self.api_base}: export {key_variable(self.model)})"
                raise ModelError(f"{self.model}: {_describe(exc)}{hint}") from exc
            if kind == "transient":  # still failing after the retries
                return self._error(exc, attempts, started)
            if kind == "other":
                if isinstance(exc, RemoteCallError):  # a bug behind the call, raised in a worker
                    raise ModelError(f"{self.model}: {_describe(exc)}") from exc
                raise
            if "LLM Provider NOT provided" in str(exc):  # unknown model string (check() not called)
                raise ModelError(f"unknown model {self.model!r}: LiteLLM cannot tell its provider") from exc
            return self._error(exc, attempts, started)  # e.g. context window exceeded, content filtered
        return self._result(fields, attempts, started)

    def _error(self, exc: BaseException, attempts: int, started: float) -> LLMResult:
        self.stats.errors += 1
        return LLMResult(
            model=self.model, error=_describe(exc), attempts=attempts, latency_s=time.perf_counter() - started
        )

    def _result(self, fields: dict[str, Any], attempts: int, started: float) -> LLMResult:
        busy = fields["busy_seconds"]
        self.stats.calls += 1
        self.stats.prompt_tokens += fields["prompt_tokens"]
        self.stats.completion_tokens += fields["completion_tokens"]
        self.stats.cost_usd += fields["cost_usd"]
        return LLMResult(
            model=self.model,
            text=fields["text"],
            tool_calls=[ToolCall(**call) for call in fields["tool_calls"]],
            prompt_tokens=fields["prompt_tokens"],
            completion_tokens=fields["completion_tokens"],
            cost_usd=fields["cost_usd"],
            attempts=attempts,
            latency_s=busy if busy is not None else time.perf_counter() - started,
        )

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
