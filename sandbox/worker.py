"""In-container worker: runs jobs sent over stdin, answers on stdout. Standard library only.

Two processes, so that untrusted code never shares memory with the key that signs results:

- the *signer* (main process) reads the host's secret and jobs from stdin, forwards each job to the
  executor, and writes the executor's answer to stdout as ``AB1 <hmac> <json>``. It forks the executor
  before it reads the secret and never forks again.
- the *executor* pre-imports common modules, then forks one child per job from this warm interpreter.
  The child redirects stdout/stderr to pipes, closes every other descriptor, lowers its rlimits and
  priority, and runs the harness. Afterwards the executor kills every process except init, the signer and
  itself (daemonized grandchildren included), wipes /tmp and /dev/shm, and reports ``dirty`` if it could
  not, so that the host replaces the container.

Both are non-dumpable: a job running as the same uid cannot open their descriptors or read their memory.
It can reach init's stdout (``/proc/1/fd/1``), which is why frames are signed.
"""

import gc
import hmac
import json
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PROTOCOL = "AB1"
WIPE_DIRS = ("/tmp", "/dev/shm")
# What snippets import most, loaded once before forking. Kept small: a bigger heap makes every fork slower.
PREWARM = "bisect calendar collections datetime functools heapq itertools math operator re string".split()
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def set_nondumpable():
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------- signer


def signer(proto_in, proto_out, to_exec, from_exec, exec_pid):
    inp = os.fdopen(proto_in, "rb")
    hello = inp.readline()
    if not hello:
        return
    key = bytes.fromhex(json.loads(hello)["secret"])
    answers = os.fdopen(from_exec, "rb")

    def send(payload):
        mac = hmac.new(key, payload, "sha256").hexdigest().encode()
        write_all(proto_out, PROTOCOL.encode() + b" " + mac + b" " + payload + b"\n")

    ready = answers.readline()
    if not ready:
        return
    send(ready.rstrip(b"\n"))
    for line in inp:
        write_all(to_exec, line)
        answer = answers.readline()
        if not answer:  # the executor died: exit so the host sees the container go
            return
        send(answer.rstrip(b"\n"))
        if json.loads(answer).get("dirty"):
            return
    os.close(to_exec)
    os.waitpid(exec_pid, 0)


# ---------------------------------------------------------------- executor


def executor(jobs_fd, answers_fd, keep):
    for name in PREWARM:
        try:
            __import__(name)
        except ImportError:
            pass
    gc.collect()
    gc.freeze()  # keep the warm heap shared copy-on-write with every job
    answer = {"type": "ready", "python": sys.version.split()[0], "pid": os.getpid()}
    write_all(answers_fd, json.dumps(answer).encode() + b"\n")
    for line in os.fdopen(jobs_fd, "rb"):
        answer = run_one(json.loads(line), keep)
        write_all(answers_fd, json.dumps(answer).encode() + b"\n")
        if answer["dirty"]:
            return


def run_one(job, keep):
    n, nonce = len(job["tests"]), os.urandom(12).hex()
    timeout = min(float(job.get("timeout", 10)), 3600.0)
    limit = int(job.get("output_limit", 8192))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(job, nonce, out_w, err_w, res_w, timeout)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    limits = {"out": limit, "err": limit, "res": harness.RESULT_LIMIT}
    capture = harness.Capture({"out": out_r, "err": err_r, "res": res_r}, limits)
    factor = job.get("starved_factor")  # the host's harness.STARVED_LIMIT_FACTOR, so both agree
    status, timed_out, cpu = harness.wait_child(pid, capture, start, timeout, factor)
    duration = time.monotonic() - start
    clean = kill_others(keep | {os.getpid()})
    if timed_out:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
    capture.drain(0.5)
    clean = wipe() and clean
    return {
        "type": "result",
        "id": job["id"],
        "results": harness.verdicts(bytes(capture.data["res"]), n, nonce, status, bool(timed_out)),
        "starved": timed_out == harness.STARVED,  # no verdict: the host runs the job again
        "stdout": capture.data["out"].decode("utf-8", "replace"),
        "stderr": capture.data["err"].decode("utf-8", "replace"),
        "duration": duration,
        "cpu": cpu,
        "dirty": not clean,
    }


def child(job, nonce, out_w, err_w, res_w, timeout):
    """Runs in the forked job process; never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(res_w, 3)
        os.closerange(4, 1 << 16)
        harness.reset_signals()
        os.setpriority(os.PRIO_PROCESS, 0, 19)  # only the worker competes in this container: it must win
        os.chdir("/tmp")
        harness.apply_limits(harness.job_limits(timeout, job.get("memory_mb")))
    except BaseException:
        os._exit(71)
    harness.run_job(job["code"], job["tests"], 3, nonce, job.get("setup", ""))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


def _running_pids(keep):
    """Pids in this container other than ``keep`` that are not zombies."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in keep:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            alive.append(int(entry))
    return alive


def kill_others(keep, budget=3.0):
    """SIGKILL every process but ``keep`` until none is left (a fork bomb needs a few rounds)."""
    end = time.monotonic() + budget
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        alive = _running_pids(keep)
        if not alive:
            return True
        if time.monotonic() > end:
            return False
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)


def _force_writable(func, path, _exc):
    try:
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700)
    except OSError:
        pass
    func(path)


def wipe():
    """Empty the writable directories; False if anything is left."""
    clean = True
    for top in WIPE_DIRS:
        try:
            os.chmod(top, 0o1777)
        except OSError:
            pass
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, onerror=_force_writable)
                else:
                    os.unlink(entry.path)
            except Exception:
                clean = False
        try:
            clean = clean and not os.listdir(top)
        except OSError:
            clean = False
    return clean


# ---------------------------------------------------------------- main


def main():
    set_nondumpable()
    for sig in IGNORED:  # init forwards signals to us; only SIGKILL may end the worker
        signal.signal(sig, signal.SIG_IGN)
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    jobs_r, jobs_w = os.pipe()
    answers_r, answers_w = os.pipe()
    signer_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        for fd in (proto_in, proto_out, jobs_w, answers_r):
            os.close(fd)
        try:
            executor(jobs_r, answers_w, keep={1, signer_pid})
        finally:
            os._exit(0)
    os.close(jobs_r)
    os.close(answers_w)
    try:
        signer(proto_in, proto_out, jobs_w, answers_r, pid)
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
