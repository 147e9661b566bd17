"""LiteLLM workers kept alive between commands (opt-in, Linux): ``AGENTBENCH_KEEP_WORKERS=<idle seconds>``.

Every command that starts LiteLLM workers (:mod:`.processes`) otherwise pays LiteLLM's import, about 2 s
of CPU, before its first call. A kept server (``python -m agentbench.llm.server``) imports it once, then
forks the workers each pool asks for over a Unix socket in a private directory, and exits once no pool
has been connected for the idle time. A command that finds no server starts its own workers, and the
server when its run ends, for the next command: no command waits for a server, and a server's import
never competes with a run for the cores.

A forked worker belongs to the pool that asked for it, not to the server: it ends when that pool closes
its connection or its process ends, even killed, so no call outlives its run, and stopping the server
(``agentbench workers --stop``) leaves running pools untouched.

A server serves only commands that would start identical workers: the same Python and the same
agentbench, LiteLLM and site-packages files, and the same environment (LiteLLM and httpx read it at
import). Its socket's name is a hash of those. Each worker gets the asking command's environment and
working directory. Nothing is written but the socket, a lock and a log, which a server that exits
cleanly removes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._env import with_defaults
from ..errors import ConfigError

__all__ = [
    "KEEP_ENV",
    "KeptWorkers",
    "ServerInfo",
    "child_environment",
    "keep_seconds",
    "kept_workers",
    "list_servers",
    "runtime_dir",
    "server_key",
    "start_planned_servers",
    "stop_server",
    "send_message",
    "receive_message",
]

logger = logging.getLogger("agentbench.llm")

KEEP_ENV = "AGENTBENCH_KEEP_WORKERS"
VOLATILE = frozenset({"_", "PWD", "OLDPWD", "SHLVL", "COLUMNS", "LINES", KEEP_ENV})
"""Variables that change from one shell command to the next and that LiteLLM never reads: left out of
the server's key, as agentbench's own ``AGENTBENCH_*`` are (a worker still gets the command's values)."""
REPLY_TIMEOUT = 10.0
MAX_WORKERS = 64
_HEADER = struct.Struct("!I")

FAILED = "kept server failed: "
"""How a server's last line in its log begins when it failed, for the next command to report."""

_warned: set[str] = set()
_planned: dict[Path, tuple[float, dict[str, str]]] = {}
"""Servers to start when this process's pool closes: none listened when it started."""


def keep_seconds() -> float:
    """The idle time a kept server lives for, from ``AGENTBENCH_KEEP_WORKERS``; 0 (unset): not kept."""
    raw = os.environ.get(KEEP_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ConfigError(
            f"{KEEP_ENV}={raw!r} is not a number of seconds: set it to the idle time kept LiteLLM workers "
            "live for (e.g. 600), or to 0 or nothing to start them in each run"
        )
    return seconds


def runtime_dir(create: bool = True) -> Path:
    """A directory only this user can enter, in ``$XDG_RUNTIME_DIR`` or else the temp dir. Raises OSError
    when it exists with other owners or permissions (another user's socket could take this user's API
    keys), or is missing and not to be created."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"agentbench-{os.getuid()}"
    if create:
        path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not stat.S_ISDIR(info.st_mode):  # no symlink
        raise OSError(f"{path} is not a directory private to this user (chmod 700 it, or remove it)")
    return path


def _environment() -> dict[str, str]:
    """The environment a worker of this command imports LiteLLM in (the offline defaults applied)."""
    return with_defaults(dict(os.environ))


def child_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child process that must import this agentbench (a worker, a server), whatever the
    directory it starts in."""
    package_root = str(Path(__file__).resolve().parents[2])
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)}


def _fingerprint(paths: list[Path]) -> list[Any]:
    marks: list[Any] = []
    for path in paths:
        try:
            info = path.stat()
            marks.append([str(path), info.st_mtime_ns, info.st_size])
        except OSError:
            marks.append([str(path), None])
    return marks


def _code_paths() -> list[Path]:
    """The files whose change makes a server stale: agentbench's own (the worker's code and what it
    imports), LiteLLM's, and site-packages itself (a package installed or removed changes its entries)."""
    package = Path(__file__).resolve().parents[1]
    paths = sorted(package.rglob("*.py"))
    for name in ("litellm", "openai", "httpx"):
        spec = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name].__spec__
        if spec is not None and spec.origin:
            origin = Path(spec.origin)
            paths += [origin, origin.parent.parent]
    return paths


def server_key(env: dict[str, str] | None = None) -> str:
    """The name of the server that serves this command: a hash of its Python, the code paths' stats and
    the environment outside :data:`VOLATILE`."""
    return hashlib.sha256(json.dumps(identity(env)).encode()).hexdigest()[:24]


def identity(env: dict[str, str] | None = None) -> dict[str, Any]:
    """What :func:`server_key` hashes (shown when two commands unexpectedly get different servers)."""
    env = _environment() if env is None else env
    return {
        "python": sys.executable,
        "version": sys.version,
        "code": _fingerprint(_code_paths()),
        "env": sorted(
            (k, v) for k, v in env.items() if k not in VOLATILE and not k.startswith("AGENTBENCH_")
        ),
    }


@dataclass
class KeptWorkers:
    """Workers forked by a kept server for this process: pipe ends (requests to write, replies to read)
    and the connection whose closing ends them all."""

    link: socket.socket
    pipes: list[tuple[int, int]]


def send_message(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    data = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else 0
    if sent < len(data):  # (never send nothing: the peer may have read its answer and gone)
        sock.sendall(data[sent:])


def receive_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """One message, and the file descriptors that came with it."""
    buffer, fds = b"", []
    while len(buffer) < _HEADER.size or len(buffer) < _HEADER.size + _HEADER.unpack_from(buffer)[0]:
        if max_fds and not fds:
            chunk, got, _, _ = socket.recv_fds(sock, 1 << 16, max_fds)
            fds += got
        else:
            chunk = sock.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise ConnectionError("the connection closed mid-message")
        buffer += chunk
    (size,) = _HEADER.unpack_from(buffer)
    return json.loads(buffer[_HEADER.size : _HEADER.size + size]), fds


def _connect(path: Path, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def _socket_path() -> Path:
    path = runtime_dir() / f"{server_key()}.sock"
    if len(os.fsencode(path)) > 107:
        raise OSError(f"{path} is too long for a Unix socket: set XDG_RUNTIME_DIR to a shorter directory")
    return path


def _failure(path: Path) -> str | None:
    """The last line of a server for ``path`` that failed (it left its log; a clean exit removes it, a
    running or starting one holds the lock)."""
    import fcntl  # (Unix: kept workers are Linux only)

    try:
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        last = path.with_suffix(".log").read_text(errors="replace").strip().splitlines()[-1:]
    except (OSError, BlockingIOError):
        return None
    return last[0].removeprefix(f"agentbench: {FAILED}") if last and FAILED in last[0] else None


def _spawn(path: Path, idle: float, env: dict[str, str]) -> None:
    """Start a server for ``path`` and return once it is on its own: a daemon in a session of its own (a
    Ctrl-C in the terminal is for the command), holding none of the command's files (a CI step waiting
    for its output to close is not held). If another command's server holds the key's lock, it does
    nothing."""
    with open(path.with_suffix(".log"), "ab") as log:
        subprocess.run(
            [sys.executable, "-m", "agentbench.llm.server", str(path), repr(idle)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=child_environment(env),
            cwd="/",
            start_new_session=True,
            timeout=REPLY_TIMEOUT,
            check=False,
        )


def _plan_server(path: Path, idle: float) -> None:
    """No server listens: start one when this process's pool closes (:func:`start_planned_servers`), so
    that its import of LiteLLM does not compete with this run for the cores, unless the last one failed:
    then say why, once, and leave the next command to try again."""
    if path in _planned:
        return
    failed = _failure(path)
    if failed is not None:
        path.with_suffix(".log").unlink(missing_ok=True)
        raise OSError(f"the last kept server failed: {failed}")
    _planned[path] = (idle, _environment())
    logger.info(
        "llm: LiteLLM workers will be kept for the next runs: a server starts when this run ends and stays "
        "%g s after the last (%s; `agentbench workers --stop` ends it)",
        idle,
        KEEP_ENV,
    )


def start_planned_servers() -> None:
    """Start the servers this process planned (when its pool closes: its run is over)."""
    while _planned:
        path, (idle, env) = _planned.popitem()
        try:
            _spawn(path, idle, env)
        except (OSError, subprocess.SubprocessError) as exc:
            logger.debug("could not start a kept server: %s", exc)


def kept_workers(processes: int, stderr: IO[bytes]) -> KeptWorkers | None:
    """``processes`` workers forked by the kept server, their errors written to ``stderr``; None when
    workers are not kept, no server listens yet (one is started when the pool closes), or it cannot be
    used (a warning says why, once per reason): the caller then starts its own."""
    idle = keep_seconds()
    if idle <= 0 or sys.platform != "linux" or not 0 < processes <= MAX_WORKERS:
        return None
    ours: list[int] = []
    theirs: list[int] = []
    link: socket.socket | None = None
    try:
        path = _socket_path()
        try:
            link = _connect(path, REPLY_TIMEOUT)
        except (FileNotFoundError, ConnectionRefusedError):
            _plan_server(path, idle)
            return None
        for _ in range(processes):
            requests, replies = os.pipe(), os.pipe()
            ours += [requests[1], replies[0]]
            theirs += [requests[0], replies[1]]
        request = {"workers": processes, "env": dict(os.environ), "cwd": os.getcwd()}
        send_message(link, request, [*theirs, stderr.fileno()])
        reply, _ = receive_message(link)
        if not reply.get("ok"):
            raise OSError(reply.get("error", "the server refused"))
        link.settimeout(None)
        return KeptWorkers(link, [(ours[i], ours[i + 1]) for i in range(0, len(ours), 2)])
    except (OSError, ValueError, KeyError) as exc:
        for fd in ours:
            os.close(fd)
        if link is not None:
            link.close()
        reason = str(exc) or type(exc).__name__
        if reason not in _warned:
            _warned.add(reason)
            logger.warning(
                "llm: kept LiteLLM workers are not available (%s); this run starts its own", reason
            )
        return None
    finally:
        for fd in theirs:
            os.close(fd)


@dataclass(frozen=True)
class ServerInfo:
    socket: Path
    pid: int | None
    """None: nothing listens on the socket (a server that was killed)."""
    idle: float | None
    pools: int | None


def list_servers() -> list[ServerInfo]:
    """This user's kept servers (read-only: a stale socket is reported, not removed)."""
    if sys.platform != "linux":
        return []
    try:
        directory = runtime_dir(create=False)
    except OSError:
        return []
    servers = []
    for path in sorted(directory.glob("*.sock")):
        try:
            with _connect(path, REPLY_TIMEOUT) as sock:
                send_message(sock, {"status": True})
                reply, _ = receive_message(sock)
            servers.append(ServerInfo(path, reply["pid"], reply["idle"], reply["pools"]))
        except (OSError, ValueError, KeyError):
            servers.append(ServerInfo(path, None, None, None))
    return servers


def stop_server(path: Path) -> bool:
    """Ask the server on ``path`` to exit now (its workers serve their pools to the end)."""
    try:
        with _connect(path, REPLY_TIMEOUT) as sock:
            send_message(sock, {"stop": True})
            reply, _ = receive_message(sock)
        return bool(reply.get("ok"))
    except (OSError, ValueError):
        return False
