"""Ray executor: the sandbox jobs of one command spread over the nodes of an existing Ray cluster.

``--ray ADDRESS`` connects to a running cluster (``HOST:PORT`` of its head, ``auto`` on a node of it, or
``ray://HOST:PORT`` with ``ray[client]``) and starts one actor per node alive at the start that has CPUs,
pinned there (nodes joining later are not used by this executor). Each actor holds
that node's own executor (Docker or process, per ``--sandbox``; ``--sandbox-workers`` per node, default the
node's CPUs) and runs the chunks of jobs the driver hands it; results come back to the driver, which keeps
the execution cache, so each distinct job still runs once.

Verdicts do not depend on the node: the harness times jobs by CPU time, every node runs the same harness
(the driver ships its ``agentbench`` package to the nodes through ``runtime_env={"py_modules": ...}``) and
the same image tag (computed on the driver), and the run stops with a one-line error if two nodes report
different sandbox settings (:meth:`Executor.config_key`). The executor's own ``config_key`` is that of the
nodes' executors, so a run on the cluster shares cache entries with the same sandbox run locally.

Fault tolerance: a node (or its actor) lost mid-run has its unfinished chunks handed to the other nodes; a
result is accepted once per job (the first to arrive) and counted once in the progress, so nothing is lost
or counted twice. Only when every node is gone does the run stop, with the reason.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SandboxError
from .base import ExecResult, Executor, Job, ProgressCallback, check_sandbox_kind

__all__ = ["RayExecutor", "NodeWorker", "check_address"]

logger = logging.getLogger(__name__)

START_TIMEOUT = 300.0  # seconds for every node's actor to start (first use installs the shipped package)
CONNECT_TIMEOUT = 5.0
DEPTH = 2  # chunks in flight per node, so a node never idles between two chunks
CHUNK_PER_WORKER = 4
FIX = (
    "start one with `ray start --head` and pass its address (HOST:PORT of the head, or auto on a node of it)"
)
# Shipped to the nodes with the package: nothing a worker needs lives in these.
EXCLUDES = ["__pycache__", "*.pyc", "pools/core/pool/", "pools/core/sources/", "analysis/templates/"]


def check_address(address: str) -> str:
    """The address, stripped, or a ConfigError for one Ray cannot use."""
    address = address.strip()
    if not address:
        raise ConfigError(f"--ray needs a cluster address: {FIX}")
    if address == "auto":
        return address
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--ray {address!r} is not HOST:PORT, ray://HOST:PORT or auto: {FIX}")
    return address


def _reachable(address: str) -> None:
    """Fail fast (in seconds, not Ray's minute of retries) when nothing listens at the address."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise SandboxError(f"no Ray cluster at {address} ({exc.strerror or exc}): {FIX}") from exc


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--ray needs the `ray` package: pip install 'agentbench[ray]'") from exc
    return ray


def _runtime_env(ship_package: bool) -> dict | None:
    """The driver's ``agentbench`` package, shipped to every node for this job (Ray caches it by hash).

    Ray ships a local directory only with the job (``ray.init``): a caller that connected to Ray itself
    passes this runtime_env to its own ``ray.init`` or installs agentbench on the nodes."""
    if not ship_package:
        return None
    package = Path(__file__).resolve().parents[1]
    return {"py_modules": [str(package)], "excludes": EXCLUDES}


class NodeWorker:
    """Runs on one node as a Ray actor: that node's executor, built on first use."""

    def __init__(self) -> None:
        self.executor: Executor | None = None

    def start(self, kind: str, workers: int, image: str | None) -> dict:
        """Build the executor; its identity, or the one-line reason it cannot run here."""
        import ray

        node = {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}
        try:
            self.executor = _node_executor(kind, workers, image)
        except Exception as exc:  # SandboxError, or anything else that stops this node's sandbox
            return {**node, "error": str(exc) or type(exc).__name__}
        return {**node, "config": self.executor.config_key(), "describe": self.executor.describe()}

    def run(self, jobs: list[Job]) -> list[ExecResult]:
        if self.executor is None:
            raise SandboxError("the node's executor was not started")
        return self.executor.run(jobs)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()


def _node_executor(kind: str, workers: int, image: str | None) -> Executor:
    """The executor a node runs: ``auto`` picks Docker when the engine and image are there."""
    from .process import ProcessExecutor

    if kind == "process":
        return ProcessExecutor(workers=workers)
    from .container import DockerExecutor

    try:
        return DockerExecutor(workers=workers, image=image)
    except SandboxError:
        if kind == "docker":
            raise
        return ProcessExecutor(workers=workers)


@dataclass
class _Node:
    """The driver's view of one node's actor."""

    actor: Any
    node_id: str
    host: str
    workers: int
    inflight: int = 0
    done: int = 0
    lost: str | None = None
    info: dict = field(default_factory=dict)

    @property
    def chunk(self) -> int:
        return max(1, self.workers) * CHUNK_PER_WORKER


class RayExecutor(Executor):
    """Runs jobs on every alive node of a Ray cluster; see the module docstring."""

    name = "ray"

    def __init__(
        self,
        address: str,
        kind: str = "auto",
        workers: int | None = None,
        ship_package: bool = True,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.address = check_address(address)
        self.kind = check_sandbox_kind(kind)
        ray = self._ray = _ray()
        self._own_connection = False
        if not ray.is_initialized():
            _reachable(self.address)
            try:
                ray.init(
                    address=self.address,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                    runtime_env=_runtime_env(ship_package),
                )
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError... from Ray
                first = " ".join(str(exc).split())[:300]
                raise SandboxError(
                    f"cannot connect to the Ray cluster at {self.address}: {first}: {FIX}"
                ) from exc
            self._own_connection = True
        self.nodes: list[_Node] = []
        self.lost_nodes: list[_Node] = []
        self._all_nodes: list[_Node] = []
        self.resubmitted = 0
        """Jobs handed to another node because theirs was lost (a job may have run twice; it counts once)."""
        try:
            self._start_nodes(workers, start_timeout)
        except BaseException:
            self.close()
            raise
        configs = {n.info["config"] for n in self.nodes}
        if len(configs) > 1:
            detail = "; ".join(f"{n.host} {n.node_id[:8]}: {n.info['config']}" for n in self.nodes)
            self.close()
            raise SandboxError(
                f"the Ray nodes disagree on the sandbox ({detail}): pass --sandbox docker or process and "
                "install the same agentbench and sandbox image on every node"
            )
        self._config = configs.pop()
        self._describe = (
            f"ray executor at {self.address}, {len(self.nodes)} node(s): {self.nodes[0].info['describe']}"
        )

    # -- setup --------------------------------------------------------------------------------------

    def _image(self) -> str | None:
        if self.kind == "process":
            return None
        from .engine import image_tag

        try:
            return image_tag()  # the driver's files decide, so every node runs the same image
        except SandboxError:
            if self.kind == "docker":
                raise
            return None

    def _start_nodes(self, workers: int | None, start_timeout: float) -> None:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # A node started with --num-cpus=0 (a head kept free of work, say) gets no jobs.
        alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not alive:
            raise SandboxError(
                f"the Ray cluster at {self.address} has no alive node with CPUs: add one with "
                "`ray start --address=...` (without --num-cpus=0)"
            )
        image = self._image()
        remote = ray.remote(NodeWorker)
        pending = []
        for n in alive:
            count = workers or max(1, int(n["Resources"]["CPU"]))
            actor = remote.options(
                num_cpus=0,
                max_restarts=0,
                max_concurrency=DEPTH + 1,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote()
            node = _Node(actor, n["NodeID"], n.get("NodeManagerAddress", "?"), count)
            self.nodes.append(node)
            self._all_nodes.append(node)
            pending.append(actor.start.remote(self.kind, count, image))
        try:
            infos = ray.get(pending, timeout=start_timeout)
        except ray.exceptions.GetTimeoutError as exc:
            raise SandboxError(
                f"the Ray nodes did not start their sandbox within {start_timeout:g} s: check `ray status` "
                "and the nodes' logs (runtime_env_setup-*.log)"
            ) from exc
        except ray.exceptions.RayError as exc:
            first = " ".join(str(exc).split())[:300]
            raise SandboxError(f"starting the sandbox on the Ray nodes failed: {first}") from exc
        for node, info in zip(self.nodes, infos, strict=True):
            node.info = info
            if "error" in info:
                raise SandboxError(f"Ray node {node.host} ({node.node_id[:8]}): {info['error']}")
        logger.info(
            "ray: %d node(s) at %s: %s",
            len(self.nodes),
            self.address,
            "; ".join(f"{n.host} {n.node_id[:8]} {n.info['describe']}" for n in self.nodes),
        )

    # -- Executor -----------------------------------------------------------------------------------

    def config_key(self) -> str:
        return self._config

    def describe(self) -> str:
        return self._describe

    def jobs_per_node(self) -> dict[str, int]:
        """Jobs whose accepted result each node produced, by node id (lost nodes included)."""
        return {n.node_id: n.done for n in self._all_nodes}

    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        ray = self._ray
        results: list[ExecResult | None] = [None] * len(jobs)
        todo: deque[list[int]] = deque()
        inflight: dict[Any, tuple[_Node, list[int]]] = {}
        next_index = 0

        def take(node: _Node) -> list[int] | None:
            nonlocal next_index
            if todo:
                return todo.popleft()
            if next_index >= len(jobs):
                return None
            chunk = list(range(next_index, min(next_index + node.chunk, len(jobs))))
            next_index = chunk[-1] + 1
            return chunk

        while True:
            for node in list(self.nodes):
                while node.inflight < DEPTH:
                    idx = take(node)
                    if idx is None:
                        break
                    idx = [i for i in idx if results[i] is None]
                    if not idx:
                        continue
                    inflight[node.actor.run.remote([jobs[i] for i in idx])] = (node, idx)
                    node.inflight += 1
            if not inflight:
                if todo or next_index < len(jobs):
                    reasons = "; ".join(f"{n.host}: {n.lost}" for n in self.lost_nodes[-3:])
                    raise SandboxError(f"every Ray node was lost ({reasons}): check `ray status`")
                break
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                if ref not in inflight:  # its node was lost meanwhile: the chunk is queued again
                    continue
                node, idx = inflight.pop(ref)
                node.inflight -= 1
                try:
                    out = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError) as exc:
                    todo.append(idx)
                    self.resubmitted += len(idx)
                    self._lose(node, type(exc).__name__, inflight, todo)
                    continue
                except ray.exceptions.RayError as exc:  # the node's sandbox failed (engine gone, ...)
                    todo.append(idx)
                    self.resubmitted += len(idx)
                    self._lose(node, " ".join(str(exc).split())[-200:], inflight, todo)
                    continue
                fresh = 0
                for i, res in zip(idx, out, strict=True):
                    if results[i] is None:
                        results[i] = res
                        fresh += 1
                node.done += fresh
                if progress and fresh:
                    progress(fresh)
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:  # pragma: no cover - the loop above only ends when every chunk came back
            raise SandboxError(f"{len(missing)} job(s) got no result from the Ray cluster")
        return results  # type: ignore[return-value]

    def _lose(
        self, node: _Node, reason: str, inflight: dict[Any, tuple[_Node, list[int]]], todo: deque[list[int]]
    ) -> None:
        """Drop a node: its chunks in flight go back on ``todo`` for the other nodes."""
        node.lost = reason
        self.nodes.remove(node)
        self.lost_nodes.append(node)
        for ref, (owner, idx) in list(inflight.items()):
            if owner is node:
                del inflight[ref]
                todo.append(idx)
                self.resubmitted += len(idx)
        try:
            self._ray.kill(node.actor, no_restart=True)
        except Exception:  # already gone
            pass
        logger.warning(
            "ray: lost node %s (%s): %s; its jobs run on the %d other node(s)",
            node.host,
            node.node_id[:8],
            reason,
            len(self.nodes),
        )

    def close(self) -> None:
        ray = getattr(self, "_ray", None)
        if ray is None:
            return
        nodes, self.nodes = getattr(self, "nodes", []), []
        if nodes and ray.is_initialized():
            try:
                ray.get([n.actor.close.remote() for n in nodes], timeout=30)
            except Exception:  # a node already gone: its containers end with their attach socket
                pass
            for n in nodes:
                try:
                    ray.kill(n.actor, no_restart=True)
                except Exception:
                    pass
        lost, self.lost_nodes = getattr(self, "lost_nodes", []), []
        if nodes or lost:
            counts = ", ".join(f"{n.host} {n.node_id[:8]}: {n.done}" for n in [*nodes, *lost])
            logger.info("ray: jobs per node: %s%s", counts, f" ({len(lost)} node(s) lost)" if lost else "")
        if self._own_connection and ray.is_initialized():
            ray.shutdown()
            self._own_connection = False
