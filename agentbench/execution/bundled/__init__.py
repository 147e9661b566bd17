"""Sandbox verdicts shipped with the package for the bundled pools, served when the cache has none.

Why: with the shipped vectors (:mod:`agentbench.retrieval.bundled`) a first ``agentbench retrieve`` on
core still spent most of its time executing the 10,110 retrieved snippets in the sandbox (866 of 909 s on
a busy machine, against 24 s warm). Those verdicts are the same on every machine with the same sandbox, so
the package ships them, per bundled pool, for the pairs a default run executes: every query's own
snippets (canonicals and distractors) and the top 10 of minilm and bm25, each against that query's tests.

One file per pool, ``<pool>.npz`` next to this module (``np.savez_compressed``, no pickles):

- ``config``: the job config the verdicts were made under (:func:`..cache.job_config`: the executor's
  ``config_key()`` plus ``;timeout=10``), a 0-d string;
- ``codes`` (m, 32) and ``tests`` (t, 32) uint8: the distinct sha256 digests of the code and of the tests
  (:meth:`..base.Job.key`); ``code_row`` and ``tests_row`` (n,) uint32: each pair's rows in them;
- ``outcome_names``: the distinct per-assert outcomes (``pass``, ``FAIL``, ``TIMEOUT``, ``ERROR:<Name>``);
  ``outcomes`` (total,) uint8 indexes into them, pair ``i``'s asserts at ``offsets[i]:offsets[i + 1]``;
- ``duration`` and ``cpu`` (n,) float32: as the cache stores them (NaN: CPU time unknown);
- ``meta``: JSON: the pool, the executor config and timeout, what the pairs cover, and ``data_sha256``,
  the sha256 of every other array (:func:`data_sha256`, so the config is covered too).

:func:`serve` is what :func:`..cache.run_cached` asks for the jobs its :class:`..cache.ExecCache` misses. A
verdict is served only under exactly the config it was made under: another executor, image, memory limit,
CPU share or timeout executes as before. Served results look like cache hits (``extra`` has ``cached`` and
``shipped``; stdout and stderr are not shipped) and are not copied into the cache: the package holds them.
With no cache at all (``cache=None``: every job executes) nothing is served, and
``AGENTBENCH_SHIPPED_VERDICTS=0`` switches serving off. A file that cannot be read or whose
``data_sha256`` does not match is ignored with one warning, and every job executes as without it. Files
are read lazily, once per process and file version, only when a job misses the cache.

Which executor: the shipped config is the Docker executor's with its defaults, which ``--sandbox auto``
(the default of ``run`` and ``retrieve``) picks wherever the engine and image are there. Its key holds the
image tag, a hash of the worker, the harness and the Dockerfile (:func:`..engine.image_tag`), so it is the
same on every machine with the same agentbench release (whether the image was built online or offline).
The process executor's key holds the isolation it got on this machine (user namespaces, a dropped uid),
which differs between machines and users: its verdicts are not shipped, and it still executes.

Regenerate after a pool, retriever or sandbox change with ``python -m agentbench.retrieval.verdicts`` (a
test fails, naming that command, when a shipped file does not cover what a default run needs).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..base import ExecResult

__all__ = [
    "BUNDLED_DIR",
    "REGENERATE",
    "ShippedVerdicts",
    "data_sha256",
    "load",
    "serve",
    "shipped_path",
]

log = logging.getLogger("agentbench.execution.bundled")

BUNDLED_DIR = Path(__file__).parent
REGENERATE = "python -m agentbench.retrieval.verdicts"
FORMAT = 1
ENV_SWITCH = "AGENTBENCH_SHIPPED_VERDICTS"
ARRAYS = (
    "config",
    "codes",
    "tests",
    "code_row",
    "tests_row",
    "outcome_names",
    "outcomes",
    "offsets",
    "duration",
    "cpu",
)
_WARNED: set[str] = set()
_LOADED: dict[tuple[str, int, int], ShippedVerdicts | None] = {}

Key = tuple[str, str, str]


def shipped_path(pool_name: str) -> Path:
    """Where the shipped verdicts of bundled pool ``pool_name`` live."""
    return BUNDLED_DIR / f"{pool_name}.npz"


def data_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """The checksum ``meta`` records: each array's name, dtype, shape and bytes, by name."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        data = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{data.dtype.str}:{data.shape}\n".encode())
        digest.update(data.tobytes())
    return digest.hexdigest()


class ShippedVerdicts:
    """One verified shipped file: per-assert outcomes by (code sha256, tests sha256) under one config."""

    def __init__(self, meta: dict[str, Any], arrays: Mapping[str, np.ndarray], path: Path) -> None:
        self.meta = meta
        self.path = path
        self.config = str(arrays["config"])
        self._names = [str(n) for n in arrays["outcome_names"]]
        self._outcomes = arrays["outcomes"]
        self._offsets = arrays["offsets"]
        self._duration = arrays["duration"]
        self._cpu = arrays["cpu"]
        codes = [bytes(c) for c in arrays["codes"]]
        tests = [bytes(t) for t in arrays["tests"]]
        self.rows = {
            (codes[c], tests[t]): i
            for i, (c, t) in enumerate(zip(arrays["code_row"], arrays["tests_row"], strict=True))
        }

    def __len__(self) -> int:
        return len(self.rows)

    def keys(self) -> Iterable[Key]:
        """Every shipped pair as an execution-cache key (hex digests and the config)."""
        return ((code.hex(), tests.hex(), self.config) for code, tests in self.rows)

    def get(self, code_sha: str, tests_sha: str) -> ExecResult | None:
        """The shipped result of a pair (hex digests), served like a cache hit; None when not shipped."""
        try:
            row = self.rows.get((bytes.fromhex(code_sha), bytes.fromhex(tests_sha)))
        except ValueError:
            return None
        if row is None:
            return None
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        cpu = float(self._cpu[row])
        return ExecResult(
            [self._names[o] for o in self._outcomes[start:end]],
            duration=float(self._duration[row]),
            extra={"cached": True, "shipped": True},
            cpu_seconds=None if np.isnan(cpu) else cpu,
        )


def _warn_corrupt(path: Path, reason: str) -> None:
    if str(path) in _WARNED:
        return
    _WARNED.add(str(path))
    log.warning(
        "the shipped sandbox verdicts %s are corrupt (%s): ignored, every job is executed "
        "(reinstall agentbench, or regenerate them: %s)",
        path,
        reason,
        REGENERATE,
    )


def load(path: Path) -> ShippedVerdicts | None:
    """The verified verdicts in ``path``; None when it is absent, or corrupt (then with one warning per
    file and process). Read once per file version."""
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = _read(path)
    return _LOADED[key]


def _read(path: Path) -> ShippedVerdicts | None:
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            arrays = {name: npz[name] for name in ARRAYS}
        expected = meta["data_sha256"]
        n = len(arrays["code_row"])
        ok = (
            arrays["codes"].shape[1:] == (32,)
            and arrays["tests"].shape[1:] == (32,)
            and len(arrays["tests_row"]) == len(arrays["duration"]) == len(arrays["cpu"]) == n
            and len(arrays["offsets"]) == n + 1
        )
    except Exception as exc:  # any failure to decode the file (zip, CRC, JSON, keys) is a corrupt file
        _warn_corrupt(path, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        return None
    if not ok or data_sha256(arrays) != expected:
        _warn_corrupt(path, "their sha256 does not match the one recorded in the file")
        return None
    return ShippedVerdicts(meta, arrays, path)


def enabled() -> bool:
    """False when ``AGENTBENCH_SHIPPED_VERDICTS`` is ``0`` (or ``off``/``false``/``no``)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


def shipped() -> list[ShippedVerdicts]:
    """Every bundled pool's verified file (corrupt ones left out, with their warning)."""
    return [found for path in sorted(BUNDLED_DIR.glob("*.npz")) if (found := load(path)) is not None]


def serve(keys: Iterable[Key]) -> dict[Key, ExecResult]:
    """The shipped results of the execution-cache ``keys`` whose pair is shipped under exactly the key's
    config; every other key is absent (it is executed)."""
    keys = list(keys)
    if not keys or not enabled():
        return {}
    files = shipped()
    found: dict[Key, ExecResult] = {}
    for key in keys:
        code_sha, tests_sha, config = key
        for part in files:
            if part.config == config and (result := part.get(code_sha, tests_sha)) is not None:
                found[key] = result
                break
    return found
