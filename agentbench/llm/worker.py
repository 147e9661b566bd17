"""The child process that makes LiteLLM calls for :mod:`.processes`: ``python -m agentbench.llm.worker``.

LiteLLM spends several milliseconds of CPU on every call (request building, pricing, logging). At high
concurrency against a fast API that, not the API, caps a run on one core; in worker processes it spreads
over the machine's cores. Each request carries the complete ``acompletion`` arguments, so any worker can
serve any model; the only state a worker keeps is each client's wire limit (:class:`_WireGroups`).

Protocol: one JSON object per line. Requests ``{"id": N, "kwargs": {...}, "wire": {"group": G, "limit":
L}}`` (at most L requests of client G on the wire in this worker); replies, in
completion order, ``{"id": N, "ok": true, "fields": <completion_fields>, "gated": <sent through the wire-gated client>}``
or ``{"id": N, "ok": false, "kind": <error_kind>, "type": <exception class>, "message": ...,
"retry_after": <seconds or null>}``. The worker exits when its input ends, after answering what it
already received.

``--fork=IN,OUT`` (repeatable; Linux): once LiteLLM is imported, fork one more worker that reads requests
from file descriptor IN and writes replies to OUT, starting with ``{"pid": N}``. The import takes seconds of
CPU; paid once, it lets every worker of a pool start together, and sooner (:func:`_fork_workers`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from typing import IO, Any, NoReturn

import httpx


class _Gate:
    """One request's hold on its group's wire limit. ``held``: the request holds a slot for its whole
    call; otherwise it takes one only while the gated HTTP client sends it and reads the answer.
    ``used``: it went through the gated client."""

    def __init__(self, semaphore: asyncio.Semaphore, held: bool) -> None:
        self.semaphore = semaphore
        self.held = held
        self.used = False


_GATE: contextvars.ContextVar[_Gate | None] = contextvars.ContextVar("agentbench_wire_gate", default=None)


class _WireGatedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends through ``client`` (LiteLLM's own HTTP client, with its SSL, proxy
    and aiohttp settings) and holds the current request's wire slot from sending until the answer's body
    is read, so LiteLLM's CPU before and after (building the request, pricing the answer) happens
    outside the slot. Handed to LiteLLM as ``litellm.aclient_session`` by :func:`_wire_gated_session`."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        gate = _GATE.get()
        if gate is not None:
            gate.used = True
        if gate is None or gate.held:
            return await self._send(request)
        await gate.semaphore.acquire()
        try:
            response = await self._send(request)
        except BaseException:
            gate.semaphore.release()
            raise
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_ReleasingStream(response, gate.semaphore.release),
            extensions=response.extensions,
        )

    async def _send(self, request: httpx.Request) -> httpx.Response:
        # the client that wraps this transport follows redirects (each hop comes back here) and reads
        # the body; the inner client only sends
        return await self._client.send(request, stream=True, follow_redirects=False)

    async def aclose(self) -> None:
        await self._client.aclose()


class _ReleasingStream(httpx.AsyncByteStream):
    """An answer's body that releases its wire slot once it is closed (read to the end, or given up)."""

    def __init__(self, response: httpx.Response, release: Callable[[], None]) -> None:
        self._response = response
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._response.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


@contextlib.asynccontextmanager
async def _wire_gated_session(litellm: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Hand LiteLLM an HTTP client whose transport is :class:`_WireGatedTransport`, for as long as the
    worker serves. ``litellm.aclient_session`` is LiteLLM's hook for the client its OpenAI-SDK providers
    (``openai/``, OpenAI-compatible servers behind ``api_base``, ``azure/``) send through; other providers
    keep their own clients and are held to the limit for their whole call (:class:`_WireGroups`)."""
    from litellm.llms.openai.common_utils import BaseOpenAILLM

    previous = litellm.aclient_session
    inner = previous or BaseOpenAILLM.get_async_http_client()  # LiteLLM's client for these providers
    # trust_env off: proxies are the inner client's business, and a proxy mount here would bypass the gate
    session = httpx.AsyncClient(transport=_WireGatedTransport(inner), trust_env=False)
    litellm.aclient_session = session
    try:
        yield session
    finally:
        litellm.aclient_session = previous
        if previous is None:
            await session.aclose()


class _WireGroups:
    """The wire limit of each group (one client's share in this worker). A request of a group whose last
    request went through the gated client holds a slot only on the wire; any other (the group's first
    requests, a provider that sends some other way) holds one for its whole call, as an in-process call
    holds the client's semaphore. So the limit holds whatever the transport, and the client may hand
    this worker more requests than its share."""

    def __init__(self) -> None:
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._gated: set[str] = set()

    @contextlib.asynccontextmanager
    async def gate(self, group: str, limit: int) -> AsyncIterator[_Gate]:
        semaphore = self._semaphores.setdefault(group, asyncio.Semaphore(limit))
        held = group not in self._gated
        if held:
            await semaphore.acquire()
            if group in self._gated:  # learnt while this request waited
                semaphore.release()
                held = False
        gate = _Gate(semaphore, held)
        token = _GATE.set(gate)
        try:
            yield gate
        finally:
            _GATE.reset(token)
            if held:
                semaphore.release()

    def learn(self, group: str, gate: _Gate) -> None:
        """After a successful call: how the group's next requests are held."""
        if gate.used:
            self._gated.add(group)
        else:
            self._gated.discard(group)


def _read_lines(
    stream: IO[bytes], loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]
) -> None:
    for line in stream:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    loop.call_soon_threadsafe(queue.put_nowait, None)


async def _warm_up(litellm: Any) -> None:
    """A first call costs LiteLLM about 0.5 s of CPU in lazy set-up (provider modules, pricing, logging).
    A mock call pays it now, while the run sets up, rather than in the middle of the first wave of
    requests; the requests that arrive meanwhile wait in the queue."""
    with contextlib.suppress(Exception):
        await litellm.acompletion(
            model="openai/gpt-4o-mini",
            api_key="warm-up",
            messages=[{"role": "user", "content": "warm-up"}],
            mock_response="warm-up",
        )


async def serve(requests: IO[bytes], out: IO[bytes], litellm: Any = None) -> None:
    """Answer the requests read from ``requests`` on ``out`` (the protocol above) until the input ends."""
    if litellm is None:
        from ._litellm import plain_litellm

        litellm = plain_litellm()
    async with _wire_gated_session(litellm):
        await _serve(litellm, requests, out)


async def _serve(litellm: Any, requests: IO[bytes], out: IO[bytes]) -> None:
    from .client import completion_fields, error_kind, retry_after

    groups = _WireGroups()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(requests, loop, queue), daemon=True).start()
    await _warm_up(litellm)

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()

    async def call(request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The answer's fields, and whether it went through the gated client."""
        wire = request["wire"]
        async with groups.gate(wire["group"], wire["limit"]) as gate:
            response = await litellm.acompletion(**request["kwargs"])
        groups.learn(wire["group"], gate)
        return completion_fields(litellm, response, priced=True), gate.used

    async def answer(request: dict[str, Any]) -> None:
        try:
            fields, gated = await call(request)
            reply({"id": request["id"], "ok": True, "fields": fields, "gated": gated})
        except Exception as exc:
            reply(
                {
                    "id": request["id"],
                    "ok": False,
                    "kind": error_kind(litellm, exc),
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "retry_after": retry_after(exc),
                }
            )

    running: set[asyncio.Task[None]] = set()
    while (line := await queue.get()) is not None:
        task = asyncio.create_task(answer(json.loads(line)))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running)


def _die_with(parent: int) -> None:
    """Ask the kernel to end this fork when ``parent``, the worker it was forked from, ends: the pool stops
    that one (its own child), and calls in flight here must not outlive an interrupted run. The signal
    follows the forking *thread*: here the worker's main thread, which lives as long as the worker."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the call above
        os._exit(1)


def _fork_workers(litellm: Any, forks: list[tuple[int, int]], own_out: IO[bytes]) -> None:
    """Fork a worker per (requests, replies) pair of file descriptors. Done after LiteLLM's import and
    before any thread or event loop exists, so each fork starts with LiteLLM imported and nothing
    half-done; it never returns to the caller (``os._exit``: no second run of the parent's exit
    handlers)."""
    if threading.active_count() > 1:
        # something started a thread at import: a fork would copy its locks without it. Closing the pipes
        # ends those workers for the pool, which replaces them with workers started afresh
        print("agentbench: LiteLLM's import started a thread: workers are not forked", file=sys.stderr)
        for fd in (fd for pair in forks for fd in pair):
            os.close(fd)
        return
    parent = os.getpid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps ended forks: no zombies
    for i, (requests, replies) in enumerate(forks):
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: the pool replaces this one when it sees it end
            print(f"agentbench: could not fork a LiteLLM worker: {exc}", file=sys.stderr)
            pid = -1
        if pid == 0:

            def prepare(i: int = i) -> None:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _die_with(parent)
                own_out.close()  # the parent's worker must see its replies end when it ends, not when we do
                for fd in (fd for pair in forks[i + 1 :] for fd in pair):
                    os.close(fd)

            serve_forked(requests, replies, litellm, prepare)
        os.close(requests)
        os.close(replies)


def serve_forked(requests: int, replies: int, litellm: Any, prepare: Callable[[], None]) -> NoReturn:
    """A forked worker's whole life: ``prepare()``, its pid as the first line on ``replies``, then
    :func:`serve` until ``requests`` end. Whatever happens it never returns to the code it was forked
    from, and exits with ``os._exit`` (no second run of the parent's exit handlers)."""
    code = 0
    try:
        prepare()
        out = os.fdopen(replies, "wb")
        out.write(json.dumps({"pid": os.getpid()}).encode() + b"\n")
        out.flush()
        asyncio.run(serve(os.fdopen(requests, "rb"), out, litellm))
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(argv: list[str] | None = None) -> int:
    forks = [
        (int(a), int(b))
        for arg in (sys.argv[1:] if argv is None else argv)
        for a, b in [arg.removeprefix("--fork=").split(",")]
    ]
    # Ctrl-C reaches the whole process group: the parent handles it and closes our input
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the protocol keeps the real stdout; anything a library prints goes to stderr instead
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ._litellm import plain_litellm

    litellm = plain_litellm()
    if forks:
        _fork_workers(litellm, forks, out)
    asyncio.run(serve(sys.stdin.buffer, out, litellm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
