"""The child process that makes LiteLLM calls for :mod:`.processes`: ``python -m agentbench.llm.worker``.

LiteLLM spends several milliseconds of CPU on every call (request building, pricing, logging). At high
concurrency against a fast API that, not the API, caps a run on one core; in worker processes it spreads
over the machine's cores. Each request carries the complete ``acompletion`` arguments, so any worker can
serve any model; the only state a worker keeps is each client's wire limit (:class:`_WireGroups`).

Protocol: one JSON object per line. Requests ``{"id": N, "kwargs": {...}, "wire": {"group": G, "limit":
L}}`` (at most L requests of client G on the wire in this worker); replies, in
completion order, ``{"id": N, "ok": true, "fields": <completion_fields>, "httpx": <sent through httpx>}``
or ``{"id": N, "ok": false, "kind": <error_kind>, "type": <exception class>, "message": ...,
"retry_after": <seconds or null>}``. The worker exits when its input ends, after answering what it
already received."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from typing import IO, Any


class _Gate:
    """One request's hold on its group's wire limit. ``held``: the request holds a slot for its whole
    call; otherwise it takes one only around each ``httpx.AsyncClient.send``. ``used``: it sent
    through httpx."""

    def __init__(self, semaphore: asyncio.Semaphore, held: bool) -> None:
        self.semaphore = semaphore
        self.held = held
        self.used = False


_GATE: contextvars.ContextVar[_Gate | None] = contextvars.ContextVar("agentbench_wire_gate", default=None)


def _install_wire_gate() -> None:
    """Hold a request's wire slot only while httpx sends it and reads the answer: LiteLLM's providers
    send through ``httpx.AsyncClient.send``, so LiteLLM's own CPU before and after (building the request,
    pricing the answer) happens outside the slot."""
    import httpx

    send = httpx.AsyncClient.send

    async def gated_send(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        gate = _GATE.get()
        if gate is None:
            return await send(self, request, **kwargs)
        gate.used = True
        if gate.held:
            return await send(self, request, **kwargs)
        async with gate.semaphore:
            return await send(self, request, **kwargs)

    httpx.AsyncClient.send = gated_send  # type: ignore[method-assign]


class _WireGroups:
    """The wire limit of each group (one client's share in this worker). A request of a group whose last
    request went through httpx holds a slot only on the wire; any other (the group's first requests, a
    provider that does not send through httpx) holds one for its whole call, as an in-process call holds
    the client's semaphore. So the limit holds whatever the transport, and the client may hand this
    worker more requests than its share."""

    def __init__(self) -> None:
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._through_httpx: set[str] = set()

    @contextlib.asynccontextmanager
    async def gate(self, group: str, limit: int) -> AsyncIterator[_Gate]:
        semaphore = self._semaphores.setdefault(group, asyncio.Semaphore(limit))
        held = group not in self._through_httpx
        if held:
            await semaphore.acquire()
            if group in self._through_httpx:  # learnt while this request waited
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
            self._through_httpx.add(group)
        else:
            self._through_httpx.discard(group)


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


async def serve(requests: IO[bytes], out: IO[bytes]) -> None:
    from ._litellm import plain_litellm
    from .client import completion_fields, error_kind, retry_after

    litellm = plain_litellm()
    _install_wire_gate()
    groups = _WireGroups()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(requests, loop, queue), daemon=True).start()
    await _warm_up(litellm)

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()

    async def call(request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The answer's fields, and whether it went through httpx."""
        wire = request["wire"]
        async with groups.gate(wire["group"], wire["limit"]) as gate:
            response = await litellm.acompletion(**request["kwargs"])
        groups.learn(wire["group"], gate)
        return completion_fields(litellm, response, priced=True), gate.used

    async def answer(request: dict[str, Any]) -> None:
        try:
            fields, through_httpx = await call(request)
            reply({"id": request["id"], "ok": True, "fields": fields, "httpx": through_httpx})
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


def main() -> int:
    # Ctrl-C reaches the whole process group: the parent handles it and closes our input
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the protocol keeps the real stdout; anything a library prints goes to stderr instead
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    asyncio.run(serve(sys.stdin.buffer, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
