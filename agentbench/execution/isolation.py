"""What the process executor can use on this machine to contain a job: namespaces, a dedicated uid, a
parent-death signal, and which homes to hide. :func:`~agentbench.execution.process.probe_isolation` picks
the strongest candidate whose trial job works."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Isolation:
    """How jobs are contained on this machine."""

    namespaces: bool
    drop_uid: bool
    python: str

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append(
                "namespaces (no network, host files read-only, private /tmp and HOME, "
                "host homes hidden, tree killed)"
            )
        else:
            parts.append(
                "no namespaces (unshare unavailable): jobs can use the network and read every file the "
                "user can, HOME included"
            )
        if self.drop_uid:
            parts.append("unprivileged uid per worker")
        return ", ".join(parts)


def _world_executable(path: str) -> bool:
    p = Path(path)
    try:
        return all(os.stat(d).st_mode & 0o001 for d in p.parents) and bool(
            os.stat(p).st_mode & 0o005 == 0o005
        )
    except OSError:
        return False


def _ns_prefix(root: bool) -> list[str]:
    user = [] if root else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc"]


_death: list = []


def _death_signal() -> tuple[list[str], Callable[[], None] | None]:
    """How the first process of a job gets SIGKILL when the thread that started it dies: a ``setpriv
    --pdeathsig KILL`` prefix, or (without a setpriv that knows it) a prctl between fork and exec."""
    if not _death:
        setpriv = shutil.which("setpriv")
        try:
            ok = (
                setpriv is not None
                and subprocess.run(
                    [setpriv, "--pdeathsig", "KILL", "true"], capture_output=True, timeout=30
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            _death[:] = [[setpriv, "--pdeathsig", "KILL"], None]
        else:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up now: the child only calls it

            def preexec() -> None:
                prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG

            _death[:] = [[], preexec]
    return _death[0], _death[1]


def _homes() -> list[str]:
    """The invoking user's home directories (``$HOME`` and the password database's), to hide from jobs."""
    homes = [os.environ.get("HOME", "")]
    try:
        import pwd

        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    return [h for h in homes if h.startswith("/")]


def _candidates() -> list[Isolation]:
    root = os.geteuid() == 0
    own = os.path.realpath(sys.executable)
    shared = [p for p in (own, "/usr/bin/python3", "/usr/local/bin/python3") if _world_executable(p)]
    shared = [os.path.realpath(p) for p in shared[:1]]
    have_unshare = shutil.which("unshare") is not None
    out = []
    for ns in ([True] if have_unshare else []) + [False]:
        if root:
            out += [Isolation(ns, True, p) for p in shared]
        out.append(Isolation(ns, False, own))
    return out
