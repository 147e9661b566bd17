"""A local OpenAI-compatible LLM stub with a fixed latency and 429 rate limits, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` deterministically, so a run against it is reproducible: the
reply echoes the first ```python block of the last user message that parses and defines a function (the
context snippet of the rag, oracle and distractor prompts), or else the required signature from the prompt
with a ``return None`` body (closed book). ``GET /v1/models`` lists the one model; ``GET /stats`` returns
the server's counters (requests, 429s, retries of a prompt that got a 429 and how many of them came
before its Retry-After, peak in-flight requests, first arrival and last reply times), which a test or benchmark reads to see what the client really did.

Rate limits, either or both:

- ``--every K``: every K-th request (1-based, counted over all requests) gets a 429;
- ``--rate R [--burst B]``: a token bucket of R requests per second holding at most B tokens (default R);
  a request finding it empty gets a 429.

A 429 comes at once (as real APIs answer it) with ``Retry-After`` (whole seconds, rounded up) and
``retry-after-ms``: ``--retry-after`` seconds for ``--every``, the time until the bucket's next token for
``--rate``. Served with aiohttp.web (a LiteLLM dependency). As a dry-run server for your own configuration::

    python bench/stub_llm.py --port 8000 --latency 0.5 --rate 100
    agentbench run --llm openai/stub --api-base http://127.0.0.1:8000/v1 --concurrency 64

``--port 0`` picks a free port; the first line on stdout is ``listening <base URL>``. Python callers use
:func:`running_stub`, which starts the server as a subprocess and stops it on exit.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import hashlib
import json
import math
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

MODEL = "stub"
_FENCE = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)


def reply_code(prompt: str) -> str:
    """The deterministic answer to ``prompt``: its first ```python block defining a function, else the
    signature block with a ``return None`` body, else a fixed function."""
    blocks = [b.strip("\n") for b in _FENCE.findall(prompt)]
    for block in blocks:
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in tree.body):
            return block
    for block in blocks:
        first = block.strip().splitlines()[0] if block.strip() else ""
        if first.startswith("def ") and first.rstrip().endswith(":"):
            return f"{first.rstrip()}\n    return None"
    return "def solution(*args, **kwargs):\n    return None"


@dataclass
class Limits:
    latency: float = 0.5
    every: int = 0
    rate: float = 0.0
    burst: float = 0.0
    retry_after: float = 1.0


@dataclass
class Counters:
    requests: int = 0
    completions: int = 0
    rate_limited: int = 0
    retries: int = 0
    """Requests for a prompt that had been answered 429 before."""
    early_retries: int = 0
    """Retries that came sooner than the Retry-After of the 429 before them."""
    repeated_completions: int = 0
    """Prompts answered 200 more than once (0 when the client caches and retries correctly)."""
    in_flight: int = 0
    peak_in_flight: int = 0
    first_arrival: float | None = None
    last_reply: float | None = None
    """``time.time()`` of the first request's arrival and of the last 200 reply."""
    limited_prompts: dict[str, float] = field(default_factory=dict)
    """Prompt -> the monotonic time before which its last 429 asked it not to come back."""
    answered_prompts: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, set | dict)}
        out["distinct_prompts"] = len(self.answered_prompts | set(self.limited_prompts))
        return out


class StubServer:
    """The aiohttp application and its state (one instance per server)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.counters = Counters()
        self._tokens = limits.burst or limits.rate
        self._refilled = time.monotonic()
        self.app = web.Application()
        self.app.add_routes(
            [
                web.post("/v1/chat/completions", self.chat),
                web.post("/chat/completions", self.chat),
                web.get("/v1/models", self.models),
                web.get("/models", self.models),
                web.get("/stats", self.stats),
                web.post("/reset", self.reset),
            ]
        )

    def _limited(self, number: int) -> float | None:
        """Seconds the client should wait when request ``number`` (1-based) is rate limited, else None."""
        lim = self.limits
        if lim.every and number % lim.every == 0:
            return lim.retry_after
        if lim.rate:
            now = time.monotonic()
            capacity = lim.burst or lim.rate
            self._tokens = min(capacity, self._tokens + (now - self._refilled) * lim.rate)
            self._refilled = now
            if self._tokens < 1:
                return (1 - self._tokens) / lim.rate
            self._tokens -= 1
        return None

    async def chat(self, request: web.Request) -> web.Response:
        c = self.counters
        c.requests += 1
        number = c.requests  # before any await: other requests arrive meanwhile
        if c.first_arrival is None:
            c.first_arrival = time.time()
        body = await request.json()
        messages = body.get("messages") or []
        prompt = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        key = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        if key in c.limited_prompts:
            c.retries += 1
            if time.monotonic() < c.limited_prompts[key]:
                c.early_retries += 1
        wait = self._limited(number)
        if wait is not None:
            c.rate_limited += 1
            c.limited_prompts[key] = time.monotonic() + wait
            error = {
                "message": "Rate limit reached (stub)",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
            headers = {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000))}
            return web.json_response({"error": error}, status=429, headers=headers)
        c.in_flight += 1
        c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            await asyncio.sleep(self.limits.latency)
        finally:
            c.in_flight -= 1
        if key in c.answered_prompts:
            c.repeated_completions += 1
        c.answered_prompts.add(key)
        c.completions += 1
        c.last_reply = time.time()
        text = f"```python\n{reply_code(prompt)}\n```"
        prompt_tokens = max(1, len(json.dumps(messages)) // 4)
        completion_tokens = max(1, len(text) // 4)
        return web.json_response(
            {
                "id": f"chatcmpl-{key[:24]}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model") or MODEL,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "stub"}]}
        )

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.counters.to_json())

    async def reset(self, request: web.Request) -> web.Response:
        self.counters = Counters()
        return web.json_response({"ok": True})


async def serve(limits: Limits, host: str, port: int) -> None:
    server = StubServer(limits)
    runner = web.AppRunner(server.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"listening http://{host}:{bound}/v1", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@dataclass
class RunningStub:
    """A stub server in a subprocess: ``url`` is its OpenAI base URL (``.../v1``)."""

    url: str
    process: subprocess.Popen

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats", timeout=10) as response:
            return json.loads(response.read())

    def reset(self) -> None:
        request = urllib.request.Request(self.url.removesuffix("/v1") + "/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass


@contextlib.contextmanager
def running_stub(
    latency: float = 0.5,
    every: int = 0,
    rate: float = 0.0,
    burst: float = 0.0,
    retry_after: float = 1.0,
    host: str = "127.0.0.1",
) -> Iterator[RunningStub]:
    """Start the stub as a subprocess on a free port; stop it on exit."""
    args = [sys.executable, str(Path(__file__).resolve()), "--host", host, "--port", "0"]
    args += ["--latency", str(latency), "--every", str(every), "--rate", str(rate), "--burst", str(burst)]
    args += ["--retry-after", str(retry_after)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith("listening "):
            raise RuntimeError(f"the stub LLM server did not start (exit code {process.poll()})")
        yield RunningStub(line.split()[1], process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per completion")
    parser.add_argument("--every", type=int, default=0, help="every K-th request gets a 429 (0: none)")
    parser.add_argument("--rate", type=float, default=0.0, help="token bucket: requests per second (0: none)")
    parser.add_argument("--burst", type=float, default=0.0, help="token bucket capacity (default: --rate)")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds for --every")
    a = parser.parse_args(argv)
    limits = Limits(a.latency, a.every, a.rate, a.burst, a.retry_after)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(limits, a.host, a.port))


if __name__ == "__main__":
    main()
