"""One worker container of :class:`~agentbench.execution.container.DockerExecutor`: its attach socket,
the framing of Docker's attach stream, and the signed answers of ``sandbox/worker.py``."""

from __future__ import annotations

import hmac
import json
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import SandboxError
from . import harness
from .base import Job
from .engine import sandbox_error

if TYPE_CHECKING:
    from .container import DockerExecutor

PROTOCOL = b"AB1 "
START_TIMEOUT = 60.0
BUFFER_LIMIT = 32 << 20


class _Lost(Exception):
    """The worker container died or hung; ``str()`` says which."""


class _Frames:
    """Demultiplexes Docker's attach stream and yields verified answer lines."""

    def __init__(self, sock: Any, key: bytes) -> None:
        self.sock, self.key = sock, key
        self.raw = bytearray()
        self.out = bytearray()
        self.err = bytearray()

    def next(
        self, deadline: float, wake_at: float = float("inf"), on_wake: Callable[[], None] | None = None
    ) -> dict:
        """The next verified answer; calls ``on_wake`` once if none has come by ``wake_at``."""
        while True:
            nl = self.out.find(b"\n")
            if nl >= 0:
                line = bytes(self.out[:nl])
                del self.out[: nl + 1]
                answer = self._verify(line)
                if answer is not None:
                    return answer
                continue
            if on_wake is not None and time.monotonic() >= wake_at:
                on_wake()
                on_wake = None
            self._recv(min(deadline, wake_at) if on_wake is not None else deadline, deadline)

    def _verify(self, line: bytes) -> dict | None:
        """The answer in ``line`` if its signature checks out (junk a job wrote may precede it)."""
        start = line.find(PROTOCOL)
        while start >= 0:
            mac, _, payload = line[start + len(PROTOCOL) :].partition(b" ")
            good = hmac.new(self.key, payload, "sha256").hexdigest().encode()
            if hmac.compare_digest(mac, good):
                return json.loads(payload)
            start = line.find(PROTOCOL, start + 1)
        return None

    def _recv(self, until: float, deadline: float) -> None:
        now = time.monotonic()
        if now >= deadline:
            raise _Lost("stopped answering")
        try:  # close() in another thread may have closed the socket under us: EBADF, a lost worker
            self.sock.settimeout(max(until - now, 0.001))
            chunk = self.sock.recv(1 << 16)
        except TimeoutError as exc:
            if time.monotonic() >= deadline:
                raise _Lost("stopped answering") from exc
            return
        except OSError as exc:
            raise _Lost(f"connection failed ({exc})") from exc
        if not chunk:
            raise _Lost("died")
        self.raw += chunk
        while len(self.raw) >= 8:
            kind, size = self.raw[0], int.from_bytes(self.raw[4:8], "big")
            if len(self.raw) < 8 + size:
                break
            payload = self.raw[8 : 8 + size]
            del self.raw[: 8 + size]
            if kind == 1:
                self.out += payload
                if len(self.out) > BUFFER_LIMIT:  # a job flooding init's stdout: keep the tail only
                    del self.out[: -(1 << 20)]
            else:
                self.err = (self.err + payload)[-4096:]


class _Worker:
    """One container plus its attach socket."""

    def __init__(self, owner: DockerExecutor) -> None:
        self.owner = owner
        self.container: Any = None
        self.sock: Any = None
        self.frames: _Frames | None = None
        self._attached: Any = None
        self.seq = 0

    def start(self) -> None:
        o = self.owner
        try:
            self.container = o.client.containers.create(o.image, **o.container_options())
            attached = self.container.attach_socket(
                params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self.sock = getattr(attached, "_sock", attached)
            self._attached = attached  # keep the HTTP response alive
            self.container.start()
        except Exception as exc:  # DockerException, or requests' errors when the engine goes away
            self.stop()
            raise sandbox_error("starting a sandbox container", exc) from exc
        key = os.urandom(32)
        self.frames = _Frames(self.sock, key)
        try:
            self.sock.sendall(json.dumps({"secret": key.hex()}).encode() + b"\n")
            ready = self.frames.next(time.monotonic() + START_TIMEOUT)
        except (_Lost, OSError) as exc:
            detail = self.frames.err.decode(errors="replace").strip()[-300:]
            self.stop()
            raise SandboxError(f"a sandbox container failed to start ({exc}): {detail}") from exc
        self.python = ready.get("python", "?")

    def run(self, job: Job, on_slow: Callable[[], None] | None = None) -> dict:
        """Send the job, wait for its answer; ``on_slow`` is called once if it runs past ``slow_after``."""
        if self.frames is None:
            raise _Lost("was never started")
        self.seq += 1
        o = self.owner
        factor = harness.STARVED_LIMIT_FACTOR  # read now, and sent: the worker's ceiling is the same
        message = {
            "id": self.seq,
            "code": job.code,
            "tests": list(job.tests),
            "setup": job.setup,
            "timeout": job.timeout,
            "output_limit": o.output_limit,
            "memory_mb": o.job_memory_mb,
            "starved_factor": factor,
        }
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise _Lost(f"connection failed ({exc})") from exc
        now = time.monotonic()
        wall_limit = job.timeout * factor  # the longest a starved job may take
        deadline, wake_at = now + wall_limit + o.hang_grace, now + o.slow_after
        while True:
            answer = self.frames.next(deadline, wake_at, on_slow)
            on_slow = None
            if answer.get("id") == self.seq:
                return answer

    def shutdown(self) -> None:
        """Wake a thread blocked reading this worker's socket (closing the socket alone would not)."""
        try:
            if self.sock is not None:
                self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def stop(self) -> None:
        self.shutdown()
        for closer in (
            getattr(self.sock, "close", None),
            getattr(self._attached, "close", None),
        ):
            try:
                if closer:
                    closer()
            except OSError:
                pass
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:
                pass  # already gone (auto-remove), being removed, or the engine is down
            self.container = None
