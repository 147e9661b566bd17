"""Sandbox throughput on a Ray cluster of two nodes vs the same executor locally, on one fixed job set.

Starts its own cluster on this machine (``ray start --head`` plus a second ``ray start --address=...``, one
CPU each, on loopback addresses 127.0.0.2/127.0.0.3, in a private temp dir; only those processes are
stopped at the end), then runs the jobs (each snippet of the first ``--queries`` core queries against its
query's asserts, no execution cache) ``--rounds`` times each way, interleaved: locally with ``--sandbox`` and
``workers`` = 2, and through ``RayExecutor`` (one worker on each node); the best round of each counts.
Both are warmed up first (containers started, the package shipped to the nodes); the cluster's start-up
is reported on its own line.

On one 2-core machine the two nodes share the cores the local run has, so a ratio near 1 (a little below:
Ray's per-chunk round trips) is what to expect; the point of the cluster here is correctness. Ends with
``ray_2node_vs_local=<ray jobs/s / local jobs/s>``.

    .venv/bin/python bench/ray_sandbox.py [--queries 40] [--sandbox docker|process] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentbench.execution import Job
from agentbench.execution.cluster import RayExecutor
from agentbench.execution.container import DockerExecutor
from agentbench.execution.process import ProcessExecutor
from agentbench.pools import load_pool

RAY = str(Path(sys.executable).with_name("ray"))
HEAD_IP, NODE2_IP = "127.0.0.2", "127.0.0.3"


def jobs_for(n_queries: int) -> list[Job]:
    core = load_pool("core")
    code = {s.corpus_id: s.code for s in core.corpus}
    return [
        Job(code[cid], tuple(q.test_suite))
        for q in core.queries[:n_queries]
        for cid in (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids)
    ]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def own_pids(marks: list[str]) -> list[int]:
    roots = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            except OSError:
                continue
            if any(m in cmd for m in marks):
                roots.append(int(entry))
    return with_descendants(roots)


def with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process below them (read from /proc), to stop a Ray node and all it started."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, stack = [], list(pids)
    while stack:
        pid = stack.pop()
        if pid not in out:
            out.append(pid)
            stack.extend(kids.get(pid, []))
    return out


def start_cluster(temp: str) -> str:
    port = free_port(HEAD_IP)
    address = f"{HEAD_IP}:{port}"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=1", f"--object-store-memory={200 << 20}", "--disable-usage-stats"]
    head = [
        "--head",
        f"--node-ip-address={HEAD_IP}",
        f"--port={port}",
        f"--temp-dir={temp}",
        "--include-dashboard=false",
        f"--ray-client-server-port={free_port(HEAD_IP)}",
    ]
    with open(Path(temp) / "start.log", "a") as log:
        for args in (head, [f"--address={address}", f"--node-ip-address={NODE2_IP}"]):
            subprocess.run(
                [RAY, "start", *args, *common],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=env,
                check=True,
            )
    return address


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--sandbox", choices=("docker", "process"), default="docker")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    jobs = jobs_for(args.queries)
    print(f"jobs={len(jobs)} sandbox={args.sandbox} cores={os.cpu_count()} load={os.getloadavg()[0]:.2f}")
    local_cls = DockerExecutor if args.sandbox == "docker" else ProcessExecutor
    temp = tempfile.mkdtemp(prefix="abray")
    address = ""
    try:
        t0 = time.perf_counter()
        address = start_cluster(temp)
        started = time.perf_counter()
        with local_cls(workers=2) as local, RayExecutor(address, args.sandbox) as remote:
            connected = time.perf_counter()
            print(
                f"cluster: ray start x2 {started - t0:.1f} s, connect + node executors {connected - started:.1f} s"
            )
            local.run(jobs[:8])  # warm: containers up, imports done, the package on the nodes
            remote.run(jobs[:8])
            warm = remote.jobs_per_node()
            times: dict[str, list[float]] = {"local": [], "ray": []}
            verdicts: dict[str, list] = {}
            for _ in range(args.rounds):  # interleaved, so a change in the machine's load hits both
                for name, executor in (("local", local), ("ray", remote)):
                    start = time.perf_counter()
                    results = executor.run(jobs)
                    times[name].append(time.perf_counter() - start)
                    verdicts.setdefault(name, [r.results for r in results])
            per_node = {k[:8]: v - warm.get(k, 0) for k, v in remote.jobs_per_node().items()}
            print(f"local: {local.describe()}; ray: {remote.describe()}")
        for name, ts in times.items():
            best = min(ts)
            print(
                f"{name}: best of {len(ts)} {best:.2f} s ({', '.join(f'{t:.2f}' for t in ts)}), {len(jobs) / best:.1f} jobs/s"
            )
        print(f"ray jobs per node over {args.rounds} round(s): {json.dumps(per_node)}")
        same = verdicts["ray"] == verdicts["local"]
        print(f"verdicts identical: {same}; load average now {os.getloadavg()[0]:.2f}")
        if not same:
            sys.exit("verdicts differ between the cluster and the local run")
        print(f"ray_2node_vs_local={min(times['local']) / min(times['ray']):.3f}")
    finally:
        for pid in own_pids([temp, *([f"--address={address}"] if address else [])]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(1)
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
