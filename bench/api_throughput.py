"""API throughput of `agentbench run` against a local OpenAI-compatible server with latency and 429s.

    python bench/api_throughput.py [--concurrency 64] [--latency 0.5] [--every 50] [--retry-after 0.5]
                                   [--conditions closed_book] [--limit N] [--skip-cli] [--skip-kept]
                                   [--cli-llm-processes N]

The server is ``bench/stub_llm.py`` (a subprocess): every completion takes ``--latency`` seconds and every
``--every``-th request is refused with a 429 and ``Retry-After``. The run goes through LiteLLM as a user's
would: ``--llm openai/stub --api-base http://127.0.0.1:<port>/v1``. The ideal wall time is
``completions x latency / concurrency`` (429s are answered at once and cost no latency). Three runs of the
same configuration on the core pool, in a fresh ``AGENTBENCH_CACHE_DIR`` seeded with a copy of your
embedding and execution caches (so retrieval scoring is warm) and an empty LLM-response cache each time:

1. ``cold``: ``agentbench run`` as a subprocess (with Python's bytecode cache on, as by default, even
   where ``PYTHONDONTWRITEBYTECODE`` is set); builds the Chroma collection and executes the generated
   code for the first time;
2. ``warm``: the same command again (executions and the Chroma collection now cached, LLM calls not);
   then twice more with LiteLLM workers kept between runs (``AGENTBENCH_KEEP_WORKERS``, a server of the
   bench's own, stopped at the end): ``kept_first`` finds no server and starts one as it ends, ``kept``
   uses it once it listens (skip with ``--skip-kept``);
3. ``stage``: ``evaluate_config`` in this process with the same settings, timing the generation stage
   (``generate_and_execute``: LLM calls with their retries, executions of the generations, record writes)
   apart from the set-up before it (imports, pool, retrieval scoring, context verdicts), which does not
   depend on the API. The LiteLLM calls go to worker processes as ``--llm-processes`` (default 2
   here; a run's default is one per 32 of ``--concurrency``, at most one per core, so the CLI runs at 64
   on two cores use 2 as well) says;
4. ``inproc``: the same stage with ``--llm-processes 0`` (every call in this process), for comparison.

Then a baseline in the same run: the raw OpenAI SDK (``AsyncOpenAI``, the same concurrency, its own
Retry-After handling) sending as many distinct requests to the same server, which shows what this machine
allows a plain async client.

Prints ``api_run_vs_ideal=<stage / ideal>`` (target <= 1.25, exit code 1 when missed),
``api_whole_run_vs_ideal=<warm CLI wall / ideal>``, ``api_cold_run_vs_ideal``,
``api_whole_run_kept_workers_vs_ideal``, ``raw_client_vs_ideal`` and
``api_run_vs_raw_client=<stage / raw client wall>``, with the calls, 429s, retries, walls, the ideal, this
process's CPU time per completion (stage and raw client), the whole machine's CPU time in the stage (and the
stub server's share of it) and the load average. Each run also checks that records.jsonl holds exactly one
record per (query, condition) and no llm_error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_llm import RunningStub, running_stub  # noqa: E402

from agentbench.llm.kept import KEEP_ENV  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.25


def seed_cache(cache: Path) -> None:
    """A fresh cache directory holding a copy of the user's embedding and execution stores."""
    from agentbench.cache import EMBEDDINGS, EXECUTIONS, JSONCache, cache_dir

    source = cache_dir()
    for name in (EMBEDDINGS, EXECUTIONS):
        if (source / name).is_dir():  # entry by entry: safe while other processes write to the store
            with JSONCache(source / name) as src, JSONCache(cache / name) as dst:
                dst.set_many(src.items())


def clear_llm_cache(cache: Path) -> None:
    from agentbench.cache import LLM_RESPONSES

    shutil.rmtree(cache / LLM_RESPONSES, ignore_errors=True)


def check_records(run_dir: Path, expected: int) -> dict[str, int]:
    """One record per (query, condition), none an llm_error."""
    keys = []
    statuses: dict[str, int] = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        keys.append((rec["query_id"], rec["condition"]))
        statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
    problems = []
    if len(keys) != len(set(keys)):
        problems.append(f"{len(keys) - len(set(keys))} duplicated records")
    if len(set(keys)) != expected:
        problems.append(f"{len(set(keys))} records, expected {expected}")
    if statuses.get("llm_error"):
        problems.append(f"{statuses['llm_error']} llm_error records")
    if problems:
        raise SystemExit(f"{run_dir}: " + "; ".join(problems))
    return statuses


def run_args(args: argparse.Namespace, url: str, run_dir: Path, store_dir: Path) -> list[str]:
    out = ["--llm", args.llm, "--api-base", url, "--pool", args.pool, "--conditions", args.conditions]
    out += ["--concurrency", str(args.concurrency), "--embedder", args.embedder, "--sandbox", args.sandbox]
    out += ["--run-dir", str(run_dir), "--store-dir", str(store_dir)]
    if args.limit:
        out += ["--limit", str(args.limit)]
    if args.cli_llm_processes is not None:
        out += ["--llm-processes", str(args.cli_llm_processes)]
    return out


def cli_run(
    args: argparse.Namespace, stub: RunningStub, root: Path, name: str, keep: bool = False
) -> dict[str, Any]:
    """``keep``: with LiteLLM workers kept between runs (a server of this bench's own)."""
    clear_llm_cache(root / "cache")
    stub.reset()
    run_dir = root / name
    command = [sys.executable, "-m", "agentbench", "run", *run_args(args, stub.url, run_dir, root / "stores")]
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(root / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop(KEEP_ENV, None)
    if keep:
        env.update({KEEP_ENV: "60", "XDG_RUNTIME_DIR": str(root / "runtime")})
    # a warm command reads agentbench's compiled modules from __pycache__, as a default Python writes
    # them; a machine that sets PYTHONDONTWRITEBYTECODE (some containers do) compiles them on every start
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"agentbench run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    stats = stub.stats()
    n_items = json.loads((run_dir / "summary.json").read_text())
    expected = sum(c["n"] + c["llm_errors"] + c["infra_errors"] for c in n_items["conditions"].values())
    statuses = check_records(run_dir, expected)
    return {"wall": wall, "stats": stats, "statuses": statuses, "records": expected}


def wait_for_server(runtime: Path, wait: float = 60.0) -> None:
    """The ``kept_first`` run started the server as it ended: the ``kept`` run must find it listening."""
    from agentbench.llm.kept import list_servers

    previous = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    deadline = time.monotonic() + wait
    try:
        while not any(server.pid for server in list_servers()):
            if time.monotonic() > deadline:
                logs = " ".join(p.read_text()[-500:] for p in runtime.glob("*/*.log"))
                raise SystemExit(f"no kept server listened within {wait:.0f} s: {logs or 'no log'}")
            time.sleep(0.05)
    finally:
        if previous is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = previous


def stop_kept(runtime: Path) -> None:
    """Stop the kept-workers server of the ``kept`` runs (it would otherwise idle for a minute)."""
    from agentbench.llm.kept import stop_server

    for socket_path in runtime.glob("*/*.sock"):
        stop_server(socket_path)


def process_cpu(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workers_cpu() -> float:
    """CPU seconds used so far by the LiteLLM worker processes of this process (0 if none)."""
    from agentbench.llm import processes as llm_processes

    return sum(
        process_cpu(w.pid) for w in (llm_processes._pool._workers if llm_processes._pool else []) if w.pid
    )


def machine_cpu() -> float:
    """CPU seconds all processes on this machine have used so far (every core's non-idle time)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def stage_run(
    args: argparse.Namespace, stub: RunningStub, root: Path, processes: int | None = None, name: str = "stage"
) -> dict[str, Any]:
    """evaluate_config in this process, timing the generation stage apart from the set-up; ``processes``
    is ``--llm-processes`` (None: the default)."""
    clear_llm_cache(root / "cache")
    stub.reset()
    os.environ["AGENTBENCH_CACHE_DIR"] = str(root / "cache")
    from agentbench.api import evaluate_config
    from agentbench.pipeline import RunConfig

    module = sys.modules["agentbench.pipeline.evaluate"]
    original = module.generate_and_execute
    spans: list[tuple[float, float]] = []

    async def timed(*a: Any, **kw: Any) -> Any:  # the chunked run stage of old called it per chunk
        started, cpu, workers = time.perf_counter(), time.process_time(), workers_cpu()
        server, machine = process_cpu(stub.process.pid), machine_cpu()
        try:
            return await original(*a, **kw)
        finally:
            spans.append(
                (
                    started,
                    time.perf_counter(),
                    time.process_time() - cpu,
                    workers_cpu() - workers,
                    process_cpu(stub.process.pid) - server,
                    machine_cpu() - machine,
                )
            )

    settings = dict(
        llm=args.llm,
        api_base=stub.url,
        pool=args.pool,
        conditions=args.conditions.split(","),
        concurrency=args.concurrency,
        embedder=args.embedder,
        sandbox=args.sandbox,
        run_dir=str(root / name),
        store_dir=str(root / "stores"),
        limit=args.limit,
        llm_processes=processes,
    )
    module.generate_and_execute = timed
    try:
        started, worker_cpu = time.perf_counter(), workers_cpu()
        result = evaluate_config(RunConfig(**settings), show_progress=False)
        wall, worker_cpu = time.perf_counter() - started, workers_cpu() - worker_cpu
    finally:
        module.generate_and_execute = original
    stats = stub.stats()
    statuses = check_records(root / name, len(result.records))
    stage = spans[-1][1] - spans[0][0]  # first start to last end
    cpu = sum(span[2] for span in spans)  # CPU between chunks (records, progress) is not counted
    stage_worker_cpu = sum(span[3] for span in spans)
    stub_cpu = sum(span[4] for span in spans)
    machine = sum(span[5] for span in spans)
    return {
        "wall": wall,
        "stage": stage,
        "cpu": cpu,
        "worker_cpu": worker_cpu,
        "stage_worker_cpu": stage_worker_cpu,
        "stub_cpu": stub_cpu,
        "machine_cpu": machine,
        "stats": stats,
        "statuses": statuses,
        "records": len(result.records),
        "client": result.llm_stats,
    }


def raw_client(stub: RunningStub, n: int, concurrency: int) -> dict[str, Any]:
    """The same number of distinct requests through the raw OpenAI SDK with the same concurrency."""
    import openai

    stub.reset()

    async def main() -> tuple[float, float]:
        client = openai.AsyncOpenAI(base_url=stub.url, api_key="stub", max_retries=8)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                prompt = f"request {i}\n```python\ndef f_{i}(x):\n```"
                await client.chat.completions.create(
                    model="stub", messages=[{"role": "user", "content": prompt}]
                )

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - started, time.process_time() - cpu

    wall, cpu = asyncio.run(main())
    return {"wall": wall, "cpu": cpu, "stats": stub.stats()}


def describe(name: str, run: dict[str, Any], ideal: float, latency: float, concurrency: int) -> None:
    s = run["stats"]
    server = (s["last_reply"] or 0) - (s["first_arrival"] or 0)
    print(
        f"{name:6s} wall {run['wall']:7.1f} s  ideal {ideal:5.1f} s  ratio {run['wall'] / ideal:5.2f}  "
        f"completions {s['completions']}  429s {s['rate_limited']}  retries {s['retries']}  "
        f"repeated {s['repeated_completions']}  peak in flight {s['peak_in_flight']}  "
        f"first request -> last reply {server:5.1f} s"
        + (f"  statuses {run['statuses']}" if "statuses" in run else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="core")
    parser.add_argument(
        "--llm",
        default="openai/stub",
        help="model name sent to the stub (which answers any): openai/stub is missing from LiteLLM's cost map, "
        "a provider's model such as openai/gpt-4o-mini is priced as a real run's calls are",
    )
    parser.add_argument("--conditions", default="closed_book")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--every", type=int, default=50, help="every K-th request gets a 429")
    parser.add_argument("--retry-after", type=float, default=0.5)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--skip-cli", action="store_true", help="only the in-process stage run")
    parser.add_argument(
        "--llm-processes", type=int, default=2, help="worker processes for the calls (default: 2)"
    )
    parser.add_argument(
        "--cli-llm-processes",
        type=int,
        default=None,
        help="--llm-processes of the cold and warm CLI runs (default: the run's own default)",
    )
    parser.add_argument(
        "--skip-in-process", action="store_true", help="no comparison stage with --llm-processes 0"
    )
    parser.add_argument("--skip-kept", action="store_true", help="no warm runs with kept LiteLLM workers")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    from agentbench._env import prepare_environment

    prepare_environment()
    os.environ.pop(KEEP_ENV, None)  # the stage runs in this process start their own workers, as a run does

    root = Path(tempfile.mkdtemp(prefix="api-throughput-"))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; scratch {root}")
    started = time.perf_counter()
    seed_cache(root / "cache")
    print(f"seeded the embedding and execution caches in {time.perf_counter() - started:.1f} s")
    per = dict(latency=args.latency, every=args.every, retry_after=args.retry_after)
    print(
        f"stub: {args.latency} s per completion, every {args.every}th request a 429 with Retry-After "
        f"{args.retry_after} s; --concurrency {args.concurrency}, conditions {args.conditions}"
    )
    try:
        with running_stub(**per) as stub:
            runs: dict[str, dict[str, Any]] = {}
            if not args.skip_cli:
                runs["cold"] = cli_run(args, stub, root, "cold")
                runs["warm"] = cli_run(args, stub, root, "warm")
                if not args.skip_kept:
                    (root / "runtime").mkdir(mode=0o700)
                    runs["kept_first"] = cli_run(args, stub, root, "kept_first", keep=True)
                    wait_for_server(root / "runtime")
                    runs["kept"] = cli_run(args, stub, root, "kept", keep=True)
            runs["stage"] = stage_run(args, stub, root, args.llm_processes)
            if not args.skip_in_process:
                runs["inproc"] = stage_run(args, stub, root, 0, "inproc")
            completions = runs["stage"]["stats"]["completions"]
            ideal = completions * args.latency / args.concurrency
            runs["raw"] = raw_client(stub, completions, args.concurrency)
        for name, run in runs.items():
            describe(name, run, ideal, args.latency, args.concurrency)
        stage, raw = runs["stage"], runs["raw"]
        print(
            f"stage: set-up before generation {stage['wall'] - stage['stage']:.1f} s, generation stage "
            f"{stage['stage']:.1f} s; client: {stage['client']}"
        )
        print(
            f"CPU of this process per completion: generation stage {stage['cpu'] / completions * 1000:.1f} ms "
            f"(the run stage, executions, records, and LiteLLM unless in workers) + LiteLLM worker processes "
            f"{stage['stage_worker_cpu'] / completions * 1000:.1f} ms in the stage "
            f"({stage['worker_cpu']:.1f} s in the whole run, starting them included), "
            f"raw OpenAI SDK {raw['cpu'] / completions * 1000:.1f} ms; "
            f"the ideal allows {args.latency / args.concurrency * 1000:.1f} ms of one core per completion"
        )
        print(
            f"CPU of the whole machine in the stage: {stage['machine_cpu'] / completions * 1000:.1f} ms per "
            f"completion ({stage['machine_cpu'] / stage['stage']:.2f} of {os.cpu_count()} cores busy), of which "
            f"the stub server {stage['stub_cpu'] / completions * 1000:.1f} ms; at the ideal pace the machine "
            f"has {os.cpu_count() * args.latency / args.concurrency * 1000:.1f} ms per completion"
        )
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        ratio = stage["stage"] / ideal
        print(f"calls={completions} retries={stage['stats']['retries']} ideal={ideal:.2f}")
        print(f"api_run_vs_ideal={ratio:.3f}")
        if "warm" in runs:
            print(f"api_whole_run_vs_ideal={runs['warm']['wall'] / ideal:.3f}")
            print(f"api_cold_run_vs_ideal={runs['cold']['wall'] / ideal:.3f}")
        if "kept" in runs:
            print(f"api_whole_run_kept_workers_vs_ideal={runs['kept']['wall'] / ideal:.3f}")
        if "inproc" in runs:
            inproc = runs["inproc"]
            print(
                f"in-process stage (--llm-processes 0): {inproc['stage']:.1f} s, CPU of this process per "
                f"completion {inproc['cpu'] / completions * 1000:.1f} ms"
            )
            print(f"api_run_in_process_vs_ideal={inproc['stage'] / ideal:.3f}")
        print(f"raw_client_vs_ideal={raw['wall'] / ideal:.3f}")
        print(f"api_run_vs_raw_client={stage['stage'] / raw['wall']:.3f}")
    finally:
        stop_kept(root / "runtime")
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    sys.exit(0 if ratio <= TARGET else 1)


if __name__ == "__main__":
    main()
