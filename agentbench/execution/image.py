"""Building the sandbox image, online (FROM python:3.11-slim) or offline (no registry at all).

Offline, the base is Debian bookworm made with ``debootstrap --variant=minbase --include=python3`` from the
mirror in the machine's apt sources, then ``docker import``ed as ``agentbench-sandbox-base:bookworm``.
The rootfs tarball is cached under the agentbench cache directory, so a second build (even after the
base image was deleted) takes seconds instead of minutes.

Run as ``agentbench sandbox build [--offline]`` or ``python -m agentbench.execution.image [--offline]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from .cache import default_cache_dir
from .engine import HARNESS, SANDBOX_DIR, connect, image_present, image_tag, sandbox_error

__all__ = ["build_image", "apt_mirror", "OFFLINE_BASE", "ONLINE_BASE"]

ONLINE_BASE = "python:3.11-slim"
OFFLINE_BASE = "agentbench-sandbox-base:bookworm"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info")

Log = Callable[[str], None]

logger = logging.getLogger(__name__)


def apt_mirror(apt: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses for bookworm (env AGENTBENCH_DEBIAN_MIRROR overrides)."""
    if os.environ.get("AGENTBENCH_DEBIAN_MIRROR"):
        return os.environ["AGENTBENCH_DEBIAN_MIRROR"]
    for path in sorted(apt.glob("sources.list.d/*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and SUITE in fields.get("Suites", "").split():
                uris = fields.get("URIs", "").split()
                if uris:
                    return uris[0]
    for path in [apt / "sources.list", *sorted(apt.glob("sources.list.d/*.list"))]:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            parts = re.sub(r"\[[^\]]*\]", "", line.split("#")[0]).split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return DEFAULT_MIRROR


def _debootstrap(tarball: Path, log: Log) -> None:
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise SandboxError(
            "the offline build runs debootstrap, which needs root: run it as root or with sudo"
        )
    mirror = apt_mirror()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=tarball.parent))
    logfile = tarball.parent / "debootstrap.log"
    log(f"debootstrap {SUITE} (minbase + python3) from {mirror}; takes about 2 minutes; log: {logfile}")
    try:
        with open(logfile, "wb") as out:
            cmd = [
                "debootstrap",
                "--variant=minbase",
                "--include=python3",
                SUITE,
                str(work / "rootfs"),
                mirror,
            ]
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise SandboxError(f"debootstrap failed: see {logfile}")
        for rel in TRIM:
            target = work / "rootfs" / rel
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(work / "rootfs"), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)
    except subprocess.CalledProcessError as exc:
        raise SandboxError(f"packing the rootfs failed: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _offline_base(client, log: Log, refresh: bool) -> str:
    if image_present(client, OFFLINE_BASE) and not refresh:
        return OFFLINE_BASE
    tarball = default_cache_dir() / "sandbox" / f"{SUITE}-minbase-python3.tar"
    if refresh or not tarball.is_file():
        _debootstrap(tarball, log)
    else:
        log(f"using cached rootfs {tarball}")
    repo, tag = OFFLINE_BASE.split(":")
    try:
        client.api.import_image(src=str(tarball), repository=repo, tag=tag)
    except Exception as exc:
        raise sandbox_error(f"importing {tarball}", exc) from exc
    return OFFLINE_BASE


def build_image(
    offline: bool = False, force: bool = False, refresh_base: bool = False, log: Log | None = None
) -> str:
    """Build the sandbox image unless it is already present; returns its tag. Progress goes to ``log``
    (default: this module's logger at INFO level)."""
    client = connect(timeout=900)
    try:
        return _build(client, offline, force, refresh_base, log or logger.info)
    finally:
        client.close()


def _build(client: Any, offline: bool, force: bool, refresh_base: bool, log: Log) -> str:
    from docker.errors import BuildError

    tag = image_tag()
    if image_present(client, tag) and not (force or refresh_base):
        log(f"{tag} is already present")
        return tag
    base = _offline_base(client, log, refresh_base) if offline else ONLINE_BASE
    log(f"building {tag} from {base}")
    with tempfile.TemporaryDirectory(prefix="agentbench-image-") as ctx:
        for src in (SANDBOX_DIR / "Dockerfile", SANDBOX_DIR / "worker.py", HARNESS):
            shutil.copy(src, Path(ctx) / src.name)
        try:
            client.images.build(
                path=ctx,
                tag=tag,
                buildargs={"BASE": base},
                labels={"agentbench.flavor": "offline" if offline else "online"},
                rm=True,
                forcerm=True,
                pull=False,
            )
        except BuildError as exc:
            hint = "" if offline else " (no access to Docker Hub? use --offline)"
            raise SandboxError(f"building {tag} failed: {' '.join(str(exc).split())[:300]}{hint}") from exc
        except Exception as exc:  # DockerException or a requests error
            raise sandbox_error(f"building {tag}", exc) from exc
    log(f"built {tag}")
    return tag


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m agentbench.execution.image``: progress on stderr, the tag on stdout."""
    parser = argparse.ArgumentParser(prog="python -m agentbench.execution.image", description=__doc__)
    parser.add_argument("--offline", action="store_true", help="debootstrap the base instead of pulling it")
    parser.add_argument("--force", action="store_true", help="rebuild even if the image is present")
    args = parser.parse_args(argv)
    try:
        print(build_image(offline=args.offline, force=args.force, log=_say))
    except SandboxError as exc:
        print(f"agentbench: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
