"""`--ray ADDRESS`: sandbox jobs on a real two-node Ray cluster started on this machine.

The cluster is two `ray start` processes (a head and a second node, each with one CPU and a resource of its
own), on loopback addresses of their own (127.0.0.2 and 127.0.0.3: Ray resolves ``127.0.0.1`` to the host's
outward address, and a node IP given explicitly is used as is), with a private temp dir. Teardown kills
only the processes whose command line names that temp dir or that descend from them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from agentbench.execution import Job, ProcessExecutor

from .conftest import ROOT, core_subset, require_docker, run_cli

sys.path.insert(0, str(ROOT / "bench"))
from ray_sandbox import with_descendants  # noqa: E402  (the benchmark stops its cluster the same way)

ray = pytest.importorskip("ray", reason="the ray extra is part of `all`: pip install -e '.[all,test]'")

RAY = [str(Path(sys.executable).with_name("ray"))]
HEAD_IP = "127.0.0.2"
# Node loss is noticed after health_check_period_ms * failure_threshold (Ray's default is 15 s).
SYSTEM_CONFIG = json.dumps({"health_check_period_ms": 1000, "health_check_failure_threshold": 3})
OBJECT_STORE = 200 << 20  # bytes per node; results are small, Ray's default is 30% of the memory
NODE_LINE = re.compile(r"ray: jobs per node: (.*)")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class LocalCluster:
    """Real `ray start` processes on this machine; knows which processes are its own."""

    def __init__(self) -> None:
        self.temp = tempfile.mkdtemp(prefix="abray")  # short: Ray's unix socket paths live under it
        self.port = _free_port(HEAD_IP)
        self.address = f"{HEAD_IP}:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self.next_ip = 3
        self.node2_ip = ""

    def _ray(self, *args: str) -> None:
        log = Path(self.temp) / "start.log"
        with open(log, "a") as out:  # the daemons inherit it: never a pipe we would wait on
            proc = subprocess.run(
                [*RAY, *args], stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=self.env, timeout=180
            )
        if proc.returncode:
            pytest.fail(f"`ray {' '.join(args)}` failed:\n{log.read_text()[-3000:]}")

    def start(self) -> None:
        self._ray(
            "start",
            "--head",
            f"--node-ip-address={HEAD_IP}",
            f"--port={self.port}",
            "--num-cpus=1",
            f"--object-store-memory={OBJECT_STORE}",
            '--resources={"agentbench_head": 1}',
            f"--temp-dir={self.temp}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--ray-client-server-port={_free_port(HEAD_IP)}",
            f"--system-config={SYSTEM_CONFIG}",
        )
        self.add_node2()

    def add_node2(self) -> None:
        """The second node, on a loopback address of its own (a fresh one after a node was killed)."""
        self.node2_ip = f"127.0.0.{self.next_ip}"
        self.next_ip += 1
        self._ray(
            "start",
            f"--address={self.address}",
            f"--node-ip-address={self.node2_ip}",
            "--num-cpus=1",
            f"--object-store-memory={OBJECT_STORE}",
            '--resources={"node2": 1}',
            "--disable-usage-stats",
        )
        self.wait_for_nodes(2)

    def alive_nodes(self) -> dict[str, str]:
        """Node id -> IP of the alive nodes, read by the `ray` CLI's own client in a subprocess."""
        code = (
            "import json, sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps({n['NodeID']: n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']}))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, self.address],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    def wait_for_nodes(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.alive_nodes()) != count:
            if time.monotonic() > deadline:
                pytest.fail(f"the Ray cluster did not reach {count} alive nodes")
            time.sleep(1)

    def own_pids(self) -> list[int]:
        def ours(pid: int) -> bool:  # a daemon of this cluster: it names the temp dir or the head's address
            cmd = " ".join(_cmdline(pid))
            return pid != os.getpid() and (self.temp in cmd or f"--address={self.address}" in cmd)

        roots = [int(p) for p in os.listdir("/proc") if p.isdigit() and ours(int(p))]
        return with_descendants(roots)

    def kill_node2(self) -> list[int]:
        """SIGKILL the second node's raylet and everything under it (its workers and their jobs)."""
        flag = f"--node_ip_address={self.node2_ip}"
        raylets = [
            pid
            for pid in self.own_pids()
            if (cmd := _cmdline(pid)) and cmd[0].endswith("/raylet") and flag in cmd
        ]
        assert raylets, f"no raylet for {self.node2_ip}"
        victims = with_descendants(raylets)
        _kill(victims)
        return raylets

    def stop(self) -> None:
        _kill(self.own_pids())
        time.sleep(1)  # let the killed daemons go before their files do
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster():
    cluster = LocalCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _core_tasks(tmp_path: Path, n: int) -> Path:
    """The first ``n`` tasks of one core source file, as a source file of their own."""
    tasks = tomllib.loads((ROOT / "agentbench/pools/core/sources/bit_manipulation.toml").read_text())["task"]
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks[:n]))
    return src


def _per_node(stderr: str) -> dict[str, int]:
    match = NODE_LINE.search(stderr)
    assert match, stderr
    return {name.rsplit(" ", 1)[0]: int(n) for name, n in (p.rsplit(": ", 1) for p in match[1].split(", "))}


def _jobs(n_queries: int) -> list[Job]:
    """Every snippet of the first core queries against its query's asserts, with a CPU-bound setup so a
    chunk of jobs takes a while (the node is killed while it still has some)."""
    from agentbench.pools import load_pool

    core = load_pool("core")
    code = {s.corpus_id: s.code for s in core.corpus}
    jobs = []
    for q in core.queries[:n_queries]:
        for cid in (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids):
            burn = "\n_burn = sum(i * i for i in range(1_500_000))\n"
            jobs.append(Job(code[cid] + burn, tuple(q.test_suite), timeout=10))
    return jobs


@pytest.mark.slow
@pytest.mark.docker
def test_pool_build_on_the_cluster_is_byte_identical_and_uses_both_nodes(ray_cluster, tmp_path: Path) -> None:
    require_docker()
    src = _core_tasks(tmp_path, 2)
    outs = {}
    for name, extra in (("local", []), ("ray", ["--ray", ray_cluster.address])):
        out = tmp_path / name
        env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / f"cache-{name}"), "RAY_USAGE_STATS_ENABLED": "0"}
        proc = run_cli(
            "pool", "build", "--from", str(src), "--out", str(out), "--sandbox", "docker", *extra, env=env
        )
        assert proc.returncode == 0, proc.stderr
        outs[name] = proc
    files = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "ray").iterdir())
    for name in files:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    per_node = _per_node(outs["ray"].stderr)
    assert len(per_node) == 2 and all(n > 0 for n in per_node.values()), per_node
    assert {ip.split()[0] for ip in per_node} == {HEAD_IP, ray_cluster.node2_ip}
    assert "docker executor" in outs["ray"].stderr


@pytest.mark.slow
def test_a_node_lost_mid_run_has_its_jobs_rerun_elsewhere_once(ray_cluster) -> None:
    from agentbench.execution.cluster import RayExecutor

    jobs = _jobs(6)
    with ProcessExecutor(workers=2) as local:
        expected = [r.results for r in local.run(jobs)]
    assert any(r != ["pass"] * len(r) for r in expected) and any(r == ["pass"] * len(r) for r in expected)
    nodes = ray_cluster.alive_nodes()
    node2 = next(nid for nid, ip in nodes.items() if ip == ray_cluster.node2_ip)
    killed: list[int] = []
    ticks: list[int] = []
    try:
        with RayExecutor(ray_cluster.address, "process") as executor:

            def progress(n: int) -> None:
                ticks.append(n)
                if not killed and executor.jobs_per_node().get(node2, 0) > 0:
                    killed.extend(ray_cluster.kill_node2())  # node 2 has finished a chunk; more are queued

            results = executor.run(jobs, progress)
            per_node = executor.jobs_per_node()
            lost = [n.node_id for n in executor.lost_nodes]
            rerun = executor.resubmitted
    finally:
        ray_cluster.add_node2()  # the other tests get their two nodes back
    assert killed
    assert lost == [node2]
    assert rerun > 0  # node 2 still had jobs when it died; they ran on the head instead
    assert [r.results for r in results] == expected
    assert sum(ticks) == len(jobs)  # progress counted each job once
    assert sum(per_node.values()) == len(jobs) and per_node[node2] > 0


def test_a_bad_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    src = _core_tasks(tmp_path, 1)
    port = _free_port("127.0.0.9")  # nothing listens there once the probe socket is closed
    proc = run_cli(
        "pool", "build", "--from", str(src), "--out", str(tmp_path / "p"), "--sandbox", "process",
        "--ray", f"127.0.0.9:{port}", timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"agentbench: error: no Ray cluster at 127.0.0.9:{port}")
    assert "ray start --head" in lines[0]
    assert not (tmp_path / "p").exists()


def test_a_malformed_address_is_a_config_error(tmp_path: Path) -> None:
    proc = run_cli("retrieve", "--embedder", "bm25", "--limit", "1", "--ray", "nowhere", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "agentbench: error: --ray 'nowhere' is not HOST:PORT, ray://HOST:PORT or auto: start one with "
        "`ray start --head` and pass its address (HOST:PORT of the head, or auto on a node of it)"
    ]


VOLATILE = {"timing", "seconds", "sandbox_seconds", "created", "date", "timestamp"}


def _stable(value):
    """A result file without its wall-clock fields."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@pytest.mark.slow
def test_retrieval_scoring_and_reranking_on_the_cluster_match_a_local_run(
    ray_cluster, tmp_path: Path
) -> None:
    results = {}
    for name, extra in (("local", []), ("ray", ["--ray", ray_cluster.address])):
        out = tmp_path / name
        env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / f"cache-{name}"), "RAY_USAGE_STATS_ENABLED": "0"}
        proc = run_cli(
            "retrieve", "--embedder", "bm25", "--limit", "3", "--sandbox", "process",
            "--rerank", "exec-visible", "--rerank-k", "3", "--store-dir", str(tmp_path / f"stores-{name}"),
            "--out", str(out), *extra, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (path,) = out.glob("*.json")
        results[name] = (json.loads(path.read_text()), proc.stderr)
    local, ray_run = results["local"][0], results["ray"][0]
    assert _stable(ray_run) == _stable(local)
    assert ray_run["rerank"]["cost"]["executed_now"] > 0  # the reranker's executions ran on the cluster too
    per_node = _per_node(results["ray"][1])
    assert len(per_node) == 2 and all(n > 0 for n in per_node.values()), per_node


@pytest.mark.slow
def test_pool_validate_execute_on_the_cluster(ray_cluster, tmp_path: Path) -> None:
    pool = core_subset(2, tmp_path / "pool")
    outs = {}
    for name, extra in (("local", []), ("ray", ["--ray", ray_cluster.address])):
        env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / f"cache-{name}"), "RAY_USAGE_STATS_ENABLED": "0"}
        proc = run_cli("pool", "validate", str(pool), "--execute", "--sandbox", "process", *extra, env=env)
        assert proc.returncode == 0, proc.stderr
        outs[name] = proc
    assert outs["ray"].stdout == outs["local"].stdout
    assert "checked structure and execution" in outs["ray"].stdout
    per_node = _per_node(outs["ray"].stderr)
    assert len(per_node) == 2 and all(n > 0 for n in per_node.values()), per_node


@pytest.mark.slow
def test_a_run_on_the_cluster_matches_a_local_run(ray_cluster, tmp_path: Path) -> None:
    """`agentbench run --ray`: the conditions' code and the retrieval scoring execute on both nodes, and
    every record's verdict equals a local run's."""
    pool = core_subset(4, tmp_path / "pool")
    verdicts = {}
    for name, extra in (("local", []), ("ray", ["--ray", ray_cluster.address])):
        env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / f"cache-{name}"), "RAY_USAGE_STATS_ENABLED": "0"}
        proc = run_cli(
            "run", "--agent", "examples.simple_agent:agent", "--pool", str(pool), "--embedder", "bm25",
            "--conditions", "closed_book,oracle,distractor,rag", "--sandbox", "process",
            "--store-dir", str(tmp_path / f"stores-{name}"), "--run-dir", str(tmp_path / f"run-{name}"), *extra,
            env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = [
            json.loads(line) for line in (tmp_path / f"run-{name}" / "records.jsonl").read_text().splitlines()
        ]
        verdicts[name] = sorted(
            (r["query_id"], r["condition"], r["passed"], tuple(r["results"])) for r in records
        )
        if name == "ray":
            per_node = _per_node(proc.stderr)
            assert len(per_node) == 2 and all(n > 0 for n in per_node.values()), per_node
    assert len(verdicts["local"]) == 16
    assert verdicts["ray"] == verdicts["local"]
    assert any(passed for _, _, passed, _ in verdicts["local"]) and not all(
        p for _, _, p, _ in verdicts["local"]
    )
