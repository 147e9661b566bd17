"""Talking to the Docker engine: connecting, naming the sandbox image, translating SDK errors.

Every Docker SDK exception that can reach a user goes through :func:`sandbox_error`, so the CLI prints
one line that names the likely cause and the fix.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SandboxError

if TYPE_CHECKING:
    import docker

__all__ = [
    "engine_version",
    "IMAGE_REPO",
    "SANDBOX_DIR",
    "HARNESS",
    "START_ENGINE_HINT",
    "BUILD_HINT",
    "connect",
    "image_tag",
    "image_present",
    "require_image",
    "sandbox_error",
]

IMAGE_REPO = "agentbench-sandbox"
IMAGE_FILES = ("Dockerfile", "worker.py")


def _sandbox_dir() -> Path:
    """``sandbox/`` of a source checkout, else the copy an installed package keeps under
    ``<sys.prefix>/share/agentbench/sandbox`` (pyproject's data-files)."""
    candidates = [
        Path(__file__).resolve().parents[2] / "sandbox",
        Path(sys.prefix) / "share" / "agentbench" / "sandbox",
    ]
    for candidate in candidates:
        if all((candidate / name).is_file() for name in IMAGE_FILES):
            return candidate
    return candidates[0]


SANDBOX_DIR = _sandbox_dir()
HARNESS = Path(__file__).with_name("harness.py")
START_ENGINE_HINT = "start it with `dockerd > /tmp/dockerd.log 2>&1 &` (or `sudo systemctl start docker`)"
BUILD_HINT = "run `agentbench sandbox build --offline` (or without --offline where Docker Hub is reachable)"


def sandbox_error(action: str, exc: BaseException) -> SandboxError:
    """A one-line SandboxError for a Docker SDK (or socket) failure during ``action``."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "..."
    return SandboxError(f"docker: {action} failed: {text}")


def connect(timeout: float = 60.0) -> docker.DockerClient:
    """A client for the engine configured by the environment (DOCKER_HOST etc.), checked with a ping."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError("the `docker` Python package is missing: pip install docker") from exc
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not os.path.exists(host[len("unix://") :]):
        raise SandboxError(f"the Docker engine is not reachable: {START_ENGINE_HINT} (no socket {host})")
    client = None
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except Exception as exc:  # DockerException, requests or socket errors
        if client is not None:
            client.close()
        raise SandboxError(f"the Docker engine is not reachable: {START_ENGINE_HINT}") from exc
    return client


def _files_digest() -> str:
    if not all((SANDBOX_DIR / name).is_file() for name in IMAGE_FILES):
        raise SandboxError(
            f"sandbox build files not found in {SANDBOX_DIR}: reinstall agentbench or use a source checkout"
        )
    digest = hashlib.sha256()
    for path in [HARNESS, *(SANDBOX_DIR / name for name in IMAGE_FILES)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_tag() -> str:
    """``agentbench-sandbox:<hash>``: the hash covers the worker, the harness and the Dockerfile, so a
    changed worker never runs against a stale image."""
    return f"{IMAGE_REPO}:{_files_digest()}"


def image_present(client: docker.DockerClient, tag: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    except Exception as exc:  # DockerException or a requests error
        raise sandbox_error(f"looking up image {tag}", exc) from exc
    return True


def require_image(client: docker.DockerClient, tag: str | None = None) -> str:
    """The sandbox image tag, or a SandboxError saying how to build it."""
    tag = tag or image_tag()
    if not image_present(client, tag):
        raise SandboxError(f"sandbox image {tag} is missing: {BUILD_HINT}")
    return tag


def engine_version(client: docker.DockerClient) -> dict[str, Any]:
    try:
        return client.version()
    except Exception as exc:
        raise sandbox_error("reading the engine version", exc) from exc
