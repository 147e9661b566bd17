"""The kept server of LiteLLM workers: ``python -m agentbench.llm.server SOCKET IDLE`` (:mod:`.kept` starts
it and says why). It imports LiteLLM once, then forks the workers each pool asks for; it is single-threaded,
so a fork copies no lock held by another thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any, NoReturn

from .kept import FAILED, MAX_WORKERS, REPLY_TIMEOUT, receive_message, send_message

__all__ = ["main"]


def _end_with(link: socket.socket) -> None:
    """In a worker: exit as soon as its pool's connection closes (the pool closed, or its process ended)."""
    with contextlib.suppress(OSError):
        while link.recv(1 << 12):
            pass
    os._exit(0)


def _worker(
    litellm: Any, link: socket.socket, pipe: tuple[int, int], stderr: int, request: dict[str, Any]
) -> NoReturn:
    """A forked worker: the command's environment and directory, its errors to the command's file, its
    life tied to the command's connection, then :func:`.worker.serve_forked`."""
    from .worker import serve_forked

    def prepare() -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.dup2(stderr, 2)
        os.close(stderr)
        os.dup2(2, 1)  # as in a started worker: what a library prints goes to the errors
        os.environ.clear()
        os.environ.update(request["env"])
        with contextlib.suppress(OSError):
            os.chdir(request["cwd"])
        link.settimeout(None)
        threading.Thread(target=_end_with, args=(link,), daemon=True).start()

    serve_forked(pipe[0], pipe[1], litellm, prepare)


class _Server:
    def __init__(self, litellm: Any, listener: socket.socket, idle: float, lock: IO[str]) -> None:
        self.litellm = litellm
        self.listener = listener
        self.lock = lock
        self.idle = idle
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.pools: set[socket.socket] = set()
        self.stopping = False

    def run(self) -> None:
        last = time.monotonic()
        while not self.stopping:
            timeout = None
            if not self.pools:
                timeout = last + self.idle - time.monotonic()
                if timeout <= 0:
                    return
            for key, _ in self.selector.select(timeout):
                if key.fileobj is self.listener:
                    self._accept()
                else:  # a pool's connection: it only ever closes
                    link = key.fileobj
                    assert isinstance(link, socket.socket)
                    with contextlib.suppress(OSError):
                        if link.recv(1 << 12):
                            continue
                    self.selector.unregister(link)
                    self.pools.discard(link)
                    link.close()
                    last = time.monotonic()

    def drain(self) -> None:
        """After the socket is unlinked: answer the connections already waiting, which found it before
        (their workers do not need the server once forked)."""
        self.listener.setblocking(False)
        while self._accept():
            pass

    def _accept(self) -> bool:
        try:
            link, _ = self.listener.accept()
        except OSError:
            return False
        link.settimeout(REPLY_TIMEOUT)
        try:
            uid = struct.unpack("3i", link.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            if uid != os.getuid():
                raise OSError(f"a connection from user {uid}")
            request, fds = receive_message(link, 2 * MAX_WORKERS + 1)
            self._answer(link, request, fds)
        except (OSError, ValueError, KeyError) as exc:
            print(f"agentbench: a request failed: {exc}", file=sys.stderr, flush=True)
            link.close()
        return True

    def _answer(self, link: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        if request.get("status"):
            send_message(link, {"pid": os.getpid(), "idle": self.idle, "pools": len(self.pools)})
            link.close()
            return
        if request.get("stop"):
            self.stopping = True
            send_message(link, {"ok": True})
            link.close()
            return
        try:
            count = int(request["workers"])
            if not 0 < count <= MAX_WORKERS or len(fds) != 2 * count + 1:
                raise ValueError(f"{len(fds)} file descriptors for {count} workers")
            for pipe in [(fds[2 * i], fds[2 * i + 1]) for i in range(count)]:
                if os.fork() == 0:
                    self._close_server_files(keep=link)
                    for fd in fds:  # the other workers' pipes: each must see its own worker end
                        if fd not in (*pipe, fds[-1]):
                            os.close(fd)
                    _worker(self.litellm, link, pipe, fds[-1], request)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # a worker not forked: the command starts its own (those forked end when it closes the link)
            with contextlib.suppress(OSError):
                send_message(link, {"ok": False, "error": f"could not fork workers: {exc}"})
            link.close()
        else:
            send_message(link, {"ok": True})
            self.selector.register(link, selectors.EVENT_READ)
            self.pools.add(link)
            print(f"agentbench: forked {count} worker(s) for a run", file=sys.stderr, flush=True)
        finally:
            for fd in fds:
                os.close(fd)

    def _close_server_files(self, keep: socket.socket) -> None:
        """In a fresh fork: the server's listener, lock and other pools' connections are not its own (a
        worker holding the lock would keep a new server from starting after this one exits)."""
        self.selector.close()
        self.listener.close()
        self.lock.close()
        for link in self.pools:
            if link is not keep:
                link.close()


def main(argv: list[str] | None = None) -> int:
    path_arg, idle_arg = sys.argv[1:] if argv is None else argv
    path, idle = Path(path_arg), float(idle_arg)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115 - held for the server's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another command's server for the same key is starting or serving
    if os.fork():  # the daemon is the child: no command waits for it (the lock is shared with it)
        os._exit(0)
    try:
        from ._litellm import plain_litellm

        litellm = plain_litellm()
        if threading.active_count() > 1:  # a fork would copy its locks without it (worker._fork_workers)
            raise RuntimeError("LiteLLM's import started a thread, so workers cannot be forked")
        return _serve(path, idle, litellm, lock)
    except Exception as exc:
        traceback.print_exc()
        print(f"agentbench: {FAILED}{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


def _serve(path: Path, idle: float, litellm: Any, lock: IO[str]) -> int:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a killed server's socket: the lock says none serves it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps ended workers
    print(f"agentbench: serving {path} (pid {os.getpid()}, idle {idle:g} s)", file=sys.stderr, flush=True)
    server = _Server(litellm, listener, idle, lock)
    try:
        server.run()
    finally:
        path.unlink(missing_ok=True)  # before the lock goes: a new server never loses its socket
    server.drain()
    listener.close()
    # a clean exit leaves nothing behind (an error leaves the log, whose last line the next command reports)
    path.with_suffix(".log").unlink(missing_ok=True)
    path.with_suffix(".lock").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
