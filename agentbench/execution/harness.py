"""Per-assert harness and child supervision, shared by both executors.

Standard library only: the file is copied into the sandbox image, where the worker imports it, and the
process executor runs it with ``python -I -S -c``.

Verdicts must not depend on the executor or on the machine's load, so both executors run the snippet the
same number of Python frames deep (:data:`RUN_JOB_DEPTH`: ``RecursionError`` strikes at the same depth) and
time a job by the CPU time it used and the time it spent asleep (:func:`wait_child`), never by how long a busy
machine took to give it a CPU.

A verdict comes from a result line the harness writes after it observed an assert complete,
``<nonce> <index> <outcome>``, on a file descriptor of its own. stdout and stderr belong to the untrusted
code and the exit code never counts, so ``os._exit(0)``, ``sys.exit(0)``, a killed parent or printed fake
results leave asserts without a line, which the parent reports as an error. The harness binds every
builtin it needs before the snippet runs, so patching ``builtins`` or ``AssertionError`` cannot change
its reports. The nonce stops stray writes from counting; a repeated index marks the job as tampered with.
Code in the same interpreter could still dig the nonce out of memory: the sandbox around the process, not
the harness, is what contains deliberate attacks.
"""

import json
import os
import resource
import selectors
import signal
import sys
import time

PASS = "pass"
FAIL = "FAIL"
TIMEOUT = "TIMEOUT"
TAMPERED = "ERROR:Tampered"
RESULT_LIMIT = 1 << 20
# The snippet runs in the frame below run_job, which runs at this depth in both executors: the Docker worker
# gets there by its own calls (<module>, main, executor, run_one, child, run_job), the process executor's
# shorter chain (<module>, main, run_job) is padded. Frames count against the recursion limit, so a
# recursive snippet near the limit passes or raises RecursionError the same way in both.
RUN_JOB_DEPTH = 6
# A job times out once it has used its time limit of CPU time, or once it has spent this many times its time
# limit neither on a CPU nor waiting for one (asleep or blocked). Time spent runnable but starved by other
# load does not count, so a busy machine slows a job down without changing its verdict.
WALL_LIMIT_FACTOR = 3
# Whatever the load, a job ends after this many times its time limit of wall-clock time (a machine so busy
# that a job gets under a thirtieth of a CPU for that long is not one to measure on). Executors that wait for
# a job from outside (the Docker host) wait at least this long before they give up on a worker. A job that
# reaches this ceiling before it has used its CPU time or its idle time was starved, not slow: it gets no
# verdict (:data:`STARVED`), and the executors run it again later or report an infrastructure error.
STARVED_LIMIT_FACTOR = 30
STARVED = "starved"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_type_name = type.__dict__["__name__"].__get__  # immune to metaclasses that fake __name__


def outcome_of(exc, _assertion=AssertionError, _type=type, _name=_type_name, _chars=_NAME_CHARS):
    """Verdict for one assert: ``pass``, ``FAIL`` or ``ERROR:<ExceptionName>`` (name sanitised)."""
    if exc is None:
        return PASS
    if _type(exc) is _assertion:
        return FAIL
    name = "".join(c for c in _name(_type(exc))[:60] if c in _chars)
    return "ERROR:" + (name or "Unknown")


def _frame_depth():
    """How many Python frames deep the caller runs (its own frame included)."""
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def run_job(
    code,
    tests,
    result_fd,
    nonce,
    setup="",
    *,
    _write=os.write,
    _exec=exec,
    _compile=compile,
    _base=BaseException,
    _str=str,
    _len=len,
    _range=range,
    _enumerate=enumerate,
):
    """Run the snippet, then each assert in the snippet's namespace, writing one result line per assert.

    A test ``setup`` runs in a copy of that namespace, where the asserts then run: the snippet's functions
    keep their own globals, so a setup import cannot fix or break the code under test.

    Builtins are bound as defaults (evaluated before any untrusted code) so patching them changes nothing.
    A caller less than :data:`RUN_JOB_DEPTH` frames deep gets padding frames (calls of run_job itself).
    """
    if _frame_depth() < RUN_JOB_DEPTH:
        return run_job(code, tests, result_fd, nonce, setup)
    prefix = nonce + " "

    def emit(i, outcome):
        try:
            _write(result_fd, (prefix + _str(i) + " " + outcome + "\n").encode())
        except _base:
            pass

    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        _exec(_compile(code, "<snippet>", "exec"), namespace)
        if setup:
            namespace = namespace.copy()
            _exec(_compile(setup, "<test setup>", "exec"), namespace)
    except _base as exc:  # the snippet (or the setup) failed: every assert errors
        outcome = outcome_of(exc)
        for i in _range(_len(tests)):
            emit(i, outcome)
        return
    for i, test in _enumerate(tests):
        try:
            _exec(_compile(test, f"<assert {i}>", "exec"), namespace)
            exc = None
        except _base as caught:
            exc = caught
        emit(i, outcome_of(exc))


def job_limits(timeout, memory_mb, nproc=None):
    """The rlimits every executor gives a job, so verdicts do not depend on the executor."""
    return {
        "as": memory_mb << 20 if memory_mb else None,
        "cpu": int(timeout) + 2,
        "fsize": 16 << 20,
        "nofile": 256,
        "nproc": nproc,
    }


def apply_limits(limits):
    """Lower rlimits for the current process; keys: as, cpu, fsize, nproc, nofile (missing = unchanged)."""
    names = {
        "as": resource.RLIMIT_AS,
        "cpu": resource.RLIMIT_CPU,
        "fsize": resource.RLIMIT_FSIZE,
        "nproc": resource.RLIMIT_NPROC,
        "nofile": resource.RLIMIT_NOFILE,
    }
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, value in limits.items():
        if value is not None and key in names:
            resource.setrlimit(names[key], (int(value), int(value)))


def reset_signals():
    """Undo the dispositions a worker sets for itself, so the job gets Python's defaults."""
    for sig in (
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGALRM,
    ):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def parse_results(raw, n, nonce):
    """Result bytes -> (outcome per assert or None where no line was observed, tampered)."""
    outcomes = [None] * n
    tampered = False
    prefix = nonce + " "
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith(prefix):
            continue
        idx, _, outcome = line[len(prefix) :].partition(" ")
        if not idx.isdigit() or int(idx) >= n or not outcome:
            tampered = True
        elif outcomes[int(idx)] is not None:
            tampered = True
        else:
            outcomes[int(idx)] = outcome
    return outcomes, tampered


def exit_outcome(status, timed_out):
    """Verdict for asserts that got no result line, from how the job's process ended."""
    if timed_out:
        return TIMEOUT
    if status is None:
        return "ERROR:Lost"
    if os.WIFSIGNALED(status):
        try:
            return "ERROR:" + signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            return f"ERROR:Signal{os.WTERMSIG(status)}"
    return f"ERROR:Exit{os.WEXITSTATUS(status) if os.WIFEXITED(status) else status}"


def verdicts(raw, n, nonce, status, timed_out):
    """Final per-assert verdicts for a finished job."""
    outcomes, tampered = parse_results(raw, n, nonce)
    if tampered:
        return [TAMPERED] * n
    missing = exit_outcome(status, timed_out)
    return [o if o is not None else missing for o in outcomes]


class Capture:
    """Reads a child's pipes without ever blocking it: keeps the first ``limits[name]`` bytes of each and
    discards the rest, so 100 MB of output costs neither memory nor a stuck writer."""

    def __init__(self, fds, limits):
        self.sel = selectors.DefaultSelector()
        self.data = {name: bytearray() for name in fds}
        self.limits = limits
        self.open = set()
        for name, fd in fds.items():
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, name)
            self.open.add(fd)

    def pump(self, timeout):
        """Read whatever arrives within ``timeout`` seconds; False once every pipe is closed."""
        for key, _ in self.sel.select(max(timeout, 0)):
            if key.data is None:  # a wake-up fd (pidfd), not a pipe
                continue
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self._close(key.fd)
                continue
            room = self.limits[key.data] - len(self.data[key.data])
            if room > 0:
                self.data[key.data] += chunk[:room]
        return bool(self.open)

    def drain(self, timeout):
        """Read until every pipe is closed or ``timeout`` passes, then close what is left."""
        end = time.monotonic() + timeout
        while self.open and self.pump(min(0.05, end - time.monotonic())) and time.monotonic() < end:
            pass
        for fd in list(self.open):
            self._close(fd)
        self.sel.close()

    def _close(self, fd):
        self.sel.unregister(fd)
        os.close(fd)
        self.open.discard(fd)


def session_usage(sid):
    """(CPU seconds used, seconds spent waiting for a CPU) by session ``sid``.

    CPU time covers the live processes and the children they reaped; the wait is the longest run-queue
    delay of a live process (``/proc/<pid>/schedstat``; 0 where the kernel does not report it), so a job of
    several starved processes is not credited their waits twice.
    """
    ticks, waited_ns = 0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()  # fields[0] is field 3 of proc(5), the state
            if int(fields[3]) != sid:  # session; then utime, stime, cutime, cstime
                continue
            ticks += sum(int(x) for x in fields[11:15])
            with open(f"/proc/{entry}/schedstat", "rb") as f:
                waited_ns = max(waited_ns, int(f.read().split()[1]))
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK"), waited_ns / 1e9


def session_cpu_seconds(sid):
    """CPU seconds used so far by the live processes of session ``sid`` and the children they reaped."""
    return session_usage(sid)[0]


def wait_child(pid, capture, start, timeout, starved_factor=None):
    """Wait for ``pid`` while pumping its pipes; returns (wait status or None, timed_out, CPU seconds).

    ``pid`` leads its own session (the job). It times out once that session has used ``timeout`` seconds
    of CPU, or has spent ``WALL_LIMIT_FACTOR * timeout`` seconds since ``start`` off the CPU for reasons of
    its own (asleep, blocked): time it spent runnable but waiting for a CPU does not count. A wall-clock
    limit would time out a job that a loaded machine (or a busy Docker cgroup) gave only part of a CPU, so
    the verdict would depend on the load and on the executor. ``starved_factor * timeout`` seconds of
    wall-clock time (default :data:`STARVED_LIMIT_FACTOR`) end any job; one that gets there before either
    limit was starved, and ``timed_out`` is then :data:`STARVED` instead of True: no verdict.
    """
    factor = STARVED_LIMIT_FACTOR if starved_factor is None else starved_factor
    idle_limit = timeout * WALL_LIMIT_FACTOR
    hard_deadline = start + timeout * factor
    check_at = min(start + timeout, hard_deadline)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        capture.sel.register(pidfd, selectors.EVENT_READ, None)
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, False, usage.ru_utime + usage.ru_stime
            now = time.monotonic()
            if now >= check_at:
                used, waited = session_usage(pid)
                idle = now - start - waited - used
                if used >= timeout or idle >= idle_limit:
                    return None, True, used
                if now >= hard_deadline:
                    return None, STARVED, used
                # the job gains at most a second of either per second: look again when it may be done
                left = min(timeout - used, idle_limit - idle)
                check_at = min(now + min(max(left, 0.05), 0.5), hard_deadline)
            left = check_at - now
            capture.pump(left if pidfd is not None else min(left, 0.01))
    finally:
        if pidfd is not None:
            capture.sel.unregister(pidfd)
            os.close(pidfd)


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC = 1, 2, 4, 8, 4096, 16384
# Host directories any uid may write to: each gets a private tmpfs in the job's mount namespace.
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue", "/var/crash")
# Never masked even when HOME points at them: the job could not run without them.
_SYSTEM_DIRS = frozenset(
    "/ /bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /run /sbin /srv /sys /usr /var".split()
)


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _mount(source, target, fstype, flags, data=None):
    ctypes, libc = _libc()
    src = source.encode() if source else None
    fs = fstype.encode() if fstype else None
    if libc.mount(src, target.encode(), fs, flags, data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or source} on {target}: {os.strerror(err)}")


def _mount_tmpfs(target, size, mode="1777", owner=None):
    opts = f"size={size},mode={mode}" + (f",uid={owner[0]},gid={owner[1]}" if owner else "")
    _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, opts)


def _read_only_host():
    """Make every mount this namespace inherited read-only (recursively); False if the kernel cannot."""
    ctypes, libc = _libc()

    class MountAttr(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in ("attr_set", "attr_clr", "propagation", "userns_fd")]

    attr = MountAttr(1, 0, 0, 0)  # MOUNT_ATTR_RDONLY
    # mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, ...): syscall 442 on every architecture (Linux >= 5.12)
    if libc.syscall(442, -100, b"/", 0x8000, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return True
    done = True  # older kernels: remount each mount point read-only, keeping the flags it had
    flag_bits = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split() for line in f]
    for fields in mounts:
        target = fields[4].encode().decode("unicode_escape")
        flags = _MS_BIND | _MS_RDONLY | 32  # MS_REMOUNT
        for opt in fields[5].split(","):
            flags |= flag_bits.get(opt, 0)
        if libc.mount(None, target.encode(), None, flags, None) != 0:
            done = False
    return done


def _keep_open(paths):
    """O_PATH descriptors of ``paths`` (the interpreter's own files), opened before anything is masked."""
    fds = {}
    for path in paths:
        try:
            fds[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
        except OSError:
            pass
    return fds


def _isolate_files(opts):
    """In the job's mount namespace: host mounts read-only, private tmpfs on every world-writable
    directory, the invoking user's home, /root and /home hidden, and a fresh tmpfs as the job's HOME.

    The interpreter's own tree (``sys.base_prefix``) stays visible even when it lives under a hidden home.
    Returns whether the host could be made read-only."""
    size = opts["tmpfs"]
    keep = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)})
    masks = []
    for path in ("/root", "/home", *opts.get("hide", ())):
        real = os.path.realpath(path)
        if real not in _SYSTEM_DIRS and not any(k.startswith(real + "/") for k in _SYSTEM_DIRS):
            masks.append(real)
    masks = sorted(set(masks), key=len)
    kept = _keep_open(k for k in keep if any(k == m or k.startswith(m + "/") for m in masks))
    read_only = _read_only_host()
    for target in PRIVATE_DIRS:
        if os.path.isdir(target) and not os.path.islink(target):
            _mount_tmpfs(target, size)
    for target in masks:  # outer ones first: a home inside /home is then gone already
        if os.path.isdir(target):
            _mount_tmpfs(target, "1m", "755")
    for path, fd in kept.items():
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
        os.close(fd)
    home = opts.get("home")
    if home:
        os.makedirs(home, exist_ok=True)
        owner = (opts["uid"], opts["gid"]) if opts.get("uid") is not None else None
        _mount_tmpfs(home, size, "700", owner)
    return read_only


def _supervise(status_fd):
    """Fork the job; this process stays behind as the namespace's init until the job ends.

    The job never runs as pid 1 of its PID namespace: pid 1 keeps the parent-death signal ``unshare
    --kill-child`` gave it (the job drops its uid, which would clear it, and could clear it itself), so the
    namespace and everything in it dies with ``unshare``, and ``unshare`` with the executor. When the job
    ends, init writes its wait status on ``status_fd`` (which the job never holds) and exits, which kills
    whatever the job left running. Returns in the job's process only."""
    pid = os.fork()
    if pid == 0:
        os.close(status_fd)
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, status_fd)
    os.closerange(status_fd + 1, 1 << 16)
    while True:
        try:
            done, status = os.waitpid(-1, 0)  # orphans are reparented to init: reap them too
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if done == pid:
            break
    try:
        os.write(status_fd, f"{status}\n".encode())
    finally:
        os._exit(0)


def main(argv):
    """Process-executor entry: ``harness RESULT_FD OPTIONS_JSON``; the job JSON arrives on stdin.

    Options: ``tmpfs`` (size; needs a mount namespace: see :func:`_isolate_files`, with ``hide`` the
    directories to mask besides /root and /home and ``home`` where to mount the job's HOME), ``init``
    (with ``status_fd``: run the job in a child, see :func:`_supervise`), ``uid``/``gid`` (drop to them
    after mounting), ``limits`` (see apply_limits).
    """
    result_fd = int(argv[1])
    opts = json.loads(argv[2]) if len(argv) > 2 else {}
    try:
        if opts.get("tmpfs"):
            _isolate_files(opts)
            os.chdir("/tmp")
        if opts.get("init"):
            _supervise(opts["status_fd"])
        if opts.get("uid") is not None:
            os.setgroups([])
            os.setgid(opts["gid"])
            os.setuid(opts["uid"])
        apply_limits(opts.get("limits", {}))
        job = json.loads(sys.stdin.buffer.read())
    except Exception as exc:  # setup failure: the parent sees no result lines and an exit code of 71
        sys.stderr.write(f"agentbench harness setup failed: {exc!r}\n")
        sys.stderr.flush()
        os._exit(71)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, closefd=False)
    run_job(job["code"], job["tests"], result_fd, job["nonce"], job.get("setup", ""))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
