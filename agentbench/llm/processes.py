"""LiteLLM calls spread over worker processes (:mod:`.worker`).

At ``--concurrency 64`` against an API answering in 0.5 s, a run has 7.8 ms of one core per completion;
LiteLLM alone takes 5-10 ms of CPU per call, so in one process the run is CPU-bound, not API-bound. Worker
processes make the calls on the other cores while the run's own process keeps prompts, caching, retries
and records. Only the call itself crosses: retries, the response cache and the statistics stay in
:class:`~agentbench.llm.client.LLMClient`, so results are the same with or without workers.

One pool per process, shared by every client (a matrix's models too): the workers are stateless, each
request carrying its full ``acompletion`` arguments. A worker that dies fails its pending requests as
transient errors (the client retries them) and is replaced at the next request.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from typing import IO, Any

from .kept import child_environment, keep_seconds, kept_workers, start_planned_servers

__all__ = [
    "Answer",
    "LLMProcessPool",
    "RemoteCallError",
    "WireLimit",
    "default_processes",
    "process_pool",
    "usable_cores",
    "worker_count",
]


@dataclass(frozen=True)
class WireLimit:
    """At most ``limit`` requests of ``group`` (one client) on the wire at once, over all workers. A
    worker holds a request's slot only while it is sent and answered, not while LiteLLM builds it or
    reads the answer (or, for a provider that does not send through the HTTP client the worker hands
    LiteLLM, for the whole call), so the client can hand the workers more requests than the limit and they
    wait there, built, for a slot."""

    group: str
    limit: int


@dataclass(frozen=True)
class Answer:
    fields: dict[str, Any]
    """:func:`~agentbench.llm.client.completion_fields` of the response."""
    gated: bool
    """Whether LiteLLM sent the request through the worker's wire-gated HTTP client, so that the
    :class:`WireLimit` slots of the client's next requests cover only their time on the wire."""


class RemoteCallError(Exception):
    """A LiteLLM exception raised in a worker, as the client needs to classify and report it."""

    def __init__(self, kind: str, type_name: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        """:func:`~agentbench.llm.client.error_kind` of the original exception."""
        self.type_name = type_name
        self.retry_after = retry_after


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


REQUESTS_PER_WORKER = 32
"""Requests in flight per worker a run starts by default (docs/scaling-api.md)."""
MAX_DEFAULT_WORKERS = 4
"""Each worker holds about 200 MB (LiteLLM and the OpenAI SDK); four keep up with hundreds of requests a
second, so more are only started when ``--llm-processes`` asks."""


FORKS = sys.platform == "linux"
"""Whether a pool's workers are forked from one that imported LiteLLM (``--fork`` of :mod:`.worker`),
rather than each importing it: fork after import is only safe where the platform's libraries expect it."""


def default_processes(concurrency: int) -> int:
    """Workers for an API model when ``--llm-processes`` is not given: one per 32 requests in flight, at
    most one per core and four in all, none on one core. Below 32 in flight one process keeps up with the
    API, and the workers' own start (importing LiteLLM) would cost more than they save; except where
    workers are kept between runs (:mod:`.kept`): a kept worker starts with LiteLLM imported, so there is
    always at least one, and the run's own process never imports LiteLLM."""
    cores = usable_cores()
    spread = 0 if cores < 2 else min(cores, MAX_DEFAULT_WORKERS, concurrency // REQUESTS_PER_WORKER)
    return max(spread, 1) if FORKS and keep_seconds() > 0 else spread


def worker_count(concurrency: int, processes: int | None) -> int:
    """Workers for a client at ``concurrency``: ``processes`` (``--llm-processes``) when given, else
    :func:`default_processes`."""
    return default_processes(concurrency) if processes is None else processes


class _Worker:
    """One worker as the pool sees it: pipes for requests and replies, and the process when it is this
    process's child (a fork of another worker has none: its pid comes as its first reply line)."""

    def __init__(
        self,
        requests: IO[bytes],
        replies: IO[bytes],
        process: subprocess.Popen[bytes] | None = None,
        stderr: IO[bytes] | None = None,
        link: socket.socket | None = None,
    ) -> None:
        self.process = process
        self._link = link
        """The connection to the kept server (:mod:`.kept`) that forked this worker: closing it ends the
        worker."""
        self.pid: int | None = process.pid if process is not None else None
        self._requests = requests
        self._replies = replies
        self._stderr = stderr
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]] = {}
        """Requests sent and not answered yet, also those whose caller stopped waiting (an answer to a
        cancelled future is dropped)."""
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._ids = itertools.count()
        self.group_load: Counter[str] = Counter()
        """Requests per :class:`WireLimit` group sent and not answered (changed under the pool's lock)."""
        self._exited: dict[str, Any] | None = None
        """The error every request gets once the child has exited."""
        # pipe writes can block while the child is busy: never on the caller's event loop
        threading.Thread(target=self._write, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def start(cls, processes: int = 1) -> list[_Worker]:
        """``processes`` new workers: one child process, and where :data:`FORKS` allows, the rest forked
        from it once it has imported LiteLLM (each would otherwise import it at the same time, seconds of
        CPU apiece on cores the run is still setting up on); elsewhere a child each. Where workers are
        kept (:mod:`.kept`), all are forked by the kept server instead, with LiteLLM already imported."""
        if processes < 1:
            return []
        if processes > 1 and not FORKS:
            return [w for _ in range(processes) for w in cls.start(1)]
        stderr = tempfile.TemporaryFile()
        try:
            kept = kept_workers(processes, stderr) if FORKS else None
        except BaseException:  # a bad AGENTBENCH_KEEP_WORKERS
            stderr.close()
            raise
        if kept is not None:
            return [
                cls(
                    os.fdopen(requests, "wb"),
                    os.fdopen(replies, "rb"),
                    stderr=stderr if i == 0 else None,
                    link=kept.link,
                )
                for i, (requests, replies) in enumerate(kept.pipes)
            ]
        pairs = [(os.pipe(), os.pipe()) for _ in range(processes - 1)]  # (requests, replies) of each fork
        theirs = [fd for requests, replies in pairs for fd in (requests[0], replies[1])]
        env = child_environment(dict(os.environ))
        forks = [f"--fork={requests[0]},{replies[1]}" for requests, replies in pairs]
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "agentbench.llm.worker", *forks],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                pass_fds=theirs,
            )
        except BaseException:
            for fd in (fd for requests, replies in pairs for fd in (requests[1], replies[0])):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        assert process.stdin is not None and process.stdout is not None
        workers = [cls(process.stdin, process.stdout, process, stderr)]
        for requests, replies in pairs:
            workers.append(cls(os.fdopen(requests[1], "wb"), os.fdopen(replies[0], "rb")))
        return workers

    @property
    def alive(self) -> bool:
        """False once the reader has seen the child exit (no system call: asked on every request)."""
        return self._exited is None

    @property
    def load(self) -> int:
        return len(self._pending)

    async def call(self, kwargs: dict[str, Any], wire: WireLimit) -> dict[str, Any]:
        """The worker's reply; ``wire`` is this worker's share of the client's limit."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            exited = self._exited
            if exited is None:
                self._pending[request_id] = (loop, future)
        if exited is not None:
            _settle(future, exited)
        else:
            request = {"id": request_id, "kwargs": kwargs, "wire": {"group": wire.group, "limit": wire.limit}}
            self._outbox.put(json.dumps(request).encode() + b"\n")
        return await future

    def _write(self) -> None:
        stdin = self._requests
        while (data := self._outbox.get()) is not None:
            try:
                stdin.write(data)
                stdin.flush()
            except OSError:  # the child died: _read fails what is pending
                return
        try:
            stdin.close()
        except OSError:
            pass

    def _read(self) -> None:
        answered = False
        for line in self._replies:
            message = json.loads(line)
            if "id" not in message:  # a fork's first line
                self.pid = message.get("pid")
                continue
            answered = True
            with self._lock:
                entry = self._pending.pop(message["id"], None)
            if entry is not None:
                _deliver(*entry, message)
        code = self.process.wait() if self.process is not None else None
        errors = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            errors = self._stderr.read().decode(errors="replace")
            self._stderr.close()
        self._replies.close()  # a replaced worker keeps no file open in a process that lives on
        died: dict[str, Any] = {"ok": False}
        if not answered and code is not None and code > 0:
            # an error before the first answer (LiteLLM that does not import): every replacement would
            # fail the same way, so the run stops with the error's last line instead of retrying
            last = next((line.strip() for line in reversed(errors.splitlines()) if line.strip()), "")
            died.update(kind="fatal", type="LLMWorkerFailed", retry_after=None)
            died["message"] = (
                f"a LiteLLM worker process failed to start (exit code {code}): {last or 'no output'}; check "
                "the installation (pip install -e '.[all]'), or run with --llm-processes 0 to see the error "
                "in the run's process"
            )
        else:  # killed, or failed mid-run (a fork: its parent worker ended): retried on a replacement
            tail = " ".join(errors.split()[-30:])
            died.update(kind="transient", type="LLMWorkerExited", retry_after=0.0)
            status = f" with code {code}" if code is not None else ""
            died["message"] = f"a LiteLLM worker process exited{status}" + (f": {tail}" if tail else "")
        with self._lock:
            pending, self._pending, self._exited = self._pending, {}, died
        for loop, future in pending.values():
            _deliver(loop, future, died)

    def close(self) -> None:
        """End of input, then the worker is stopped: every answer has arrived, or nobody waits for it any
        more (an interrupted run). Left to exit by itself, it spends seconds in LiteLLM's shutdown, which
        the run would wait for at exit. A fork ends with the worker it was forked from."""
        self._outbox.put(None)
        if self._link is not None:
            self._link.close()  # a kept server's workers end with it, its other workers of this pool too
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _deliver(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[dict[str, Any]], message: dict[str, Any]
) -> None:
    """Settle ``future`` on its own loop, unless that loop is gone (its caller gave up and returned)."""
    try:
        loop.call_soon_threadsafe(_settle, future, message)
    except RuntimeError:  # the loop is closed
        pass


def _settle(future: asyncio.Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if future.done():  # the caller was cancelled
        return
    if message["ok"]:
        future.set_result(message)
    else:
        future.set_exception(
            RemoteCallError(message["kind"], message["type"], message["message"], message.get("retry_after"))
        )


class LLMProcessPool:
    """``complete(kwargs)`` runs ``litellm.acompletion(**kwargs)`` in the least busy worker and returns its
    :func:`~agentbench.llm.client.completion_fields`, or raises :class:`RemoteCallError`."""

    def __init__(self, processes: int) -> None:
        self._workers = _Worker.start(processes)
        self._lock = threading.Lock()
        self._splits: dict[str, int] = {}
        """How many workers share each :class:`WireLimit` group, fixed at the group's first request: a
        worker sizes a group's semaphore once, so a split that changed as the pool grew would let the
        shares add up to more than the limit."""

    @property
    def size(self) -> int:
        return len(self._workers)

    def grow(self, processes: int) -> None:
        with self._lock:
            if processes > len(self._workers):
                self._workers += _Worker.start(processes - len(self._workers))

    async def complete(self, kwargs: dict[str, Any], wire: WireLimit) -> Answer:
        """The limit is split over the first ``min(workers, limit)`` workers (as many as the pool had at
        the group's first request) and the request goes to the one with the fewest of the group's
        requests, so every share stays busy."""
        with self._lock:
            for i, worker in enumerate(self._workers):
                if not worker.alive:
                    self._workers[i] = _Worker.start()[0]
            split = self._splits.setdefault(wire.group, min(len(self._workers), wire.limit))
            candidates = self._workers[:split]
            index = min(range(len(candidates)), key=lambda i: candidates[i].group_load[wire.group])
            worker = candidates[index]
            base, extra = divmod(wire.limit, len(candidates))
            share = WireLimit(wire.group, base + (index < extra))
            worker.group_load[wire.group] += 1
        try:
            reply = await worker.call(kwargs, share)
        finally:
            with self._lock:
                worker.group_load[wire.group] -= 1
        return Answer(reply["fields"], bool(reply.get("gated")))

    def close(self) -> None:
        """Stop the workers; then, with workers kept between runs, start the server none was found for
        (:func:`~.kept.start_planned_servers`): the run is over, so its import competes with nothing."""
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()
        start_planned_servers()


_pool: LLMProcessPool | None = None
_pool_lock = threading.Lock()


def process_pool(processes: int) -> LLMProcessPool:
    """This process's pool, started (or grown) to at least ``processes`` workers and stopped at exit."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = LLMProcessPool(processes)
            atexit.register(_pool.close)
        elif _pool.size < processes:
            _pool.grow(processes)
        return _pool
