"""Where the code to mine comes from: a directory, or an sdist archive unpacked safely.

An archive (``.tar.gz``, ``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.tar``, ``.zip``) is unpacked into a
temporary directory that is removed afterwards. Members with an absolute path or a ``..`` component make
the whole archive an error; links, devices and FIFOs are skipped (an sdist has no use for them), and the
unpacked size is capped. Nothing in the archive is ever run.
"""

from __future__ import annotations

import contextlib
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...errors import PoolError

__all__ = ["ARCHIVE_SUFFIXES", "ProjectFile", "open_source", "project_files"]

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip")
MAX_UNPACKED_BYTES = 512 << 20
MAX_FILE_BYTES = 4 << 20  # a .py file larger than this is generated data, not code to mine
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "env",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".eggs",
    ".mypy_cache",
    ".pytest_cache",
}
DOC_DIRS = {"docs", "doc"}
TEST_DIRS = {"test", "tests", "testing"}


@dataclass(frozen=True)
class ProjectFile:
    """One ``.py`` file of the project: its path relative to the root (POSIX) and its role."""

    rel: str
    path: Path
    is_test: bool


def _is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _check_member(archive: Path, name: str) -> PurePosixPath:
    member = PurePosixPath(name.replace("\\", "/"))
    if member.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise PoolError(f"archive {archive.name} has a member with an absolute path ({name!r}); refusing it")
    if ".." in member.parts:
        raise PoolError(
            f"archive {archive.name} has a member that escapes its directory ({name!r}); refusing it"
        )
    return member


def _unpack_tar(archive: Path, dest: Path) -> None:
    try:
        tar = tarfile.open(archive)
    except (tarfile.TarError, OSError) as exc:
        raise PoolError(f"cannot read archive {archive}: {exc}") from exc
    total = 0
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise PoolError(f"cannot read archive {archive}: {exc}") from exc
        for m in members:
            rel = _check_member(archive, m.name)
            if not (m.isreg() or m.isdir()) or not rel.parts:
                continue  # links, devices, FIFOs
            target = dest.joinpath(*rel.parts)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += m.size
            if total > MAX_UNPACKED_BYTES:
                raise PoolError(f"archive {archive.name} unpacks to more than {MAX_UNPACKED_BYTES >> 20} MB")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                continue
            with src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def _unpack_zip(archive: Path, dest: Path) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise PoolError(f"cannot read archive {archive}: {exc}") from exc
    total = 0
    with zf:
        for info in zf.infolist():
            rel = _check_member(archive, info.filename)
            if not rel.parts:
                continue
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                continue  # symlinks stored by Unix zip tools
            target = dest.joinpath(*rel.parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += info.file_size
            if total > MAX_UNPACKED_BYTES:
                raise PoolError(f"archive {archive.name} unpacks to more than {MAX_UNPACKED_BYTES >> 20} MB")
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def _single_top(root: Path) -> Path:
    """An sdist holds one ``name-version/`` directory: mine that, so reported paths do not carry it."""
    entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return root


@contextlib.contextmanager
def open_source(src: Path) -> Iterator[Path]:
    """The project root to mine: ``src`` itself, or an archive unpacked into a temporary directory."""
    if not src.exists():
        raise PoolError(f"{src} does not exist: pass a project directory or an sdist (.tar.gz/.zip)")
    if src.is_dir():
        yield src
        return
    if not _is_archive(src):
        raise PoolError(
            f"{src} is a file but not an sdist archive ({', '.join(ARCHIVE_SUFFIXES)}): "
            "pass a project directory or an sdist"
        )
    with tempfile.TemporaryDirectory(prefix="agentbench-mine-") as tmp:
        dest = Path(tmp)
        if src.name.lower().endswith(".zip"):
            _unpack_zip(src, dest)
        else:
            _unpack_tar(src, dest)
        yield _single_top(dest)


def _is_test_file(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    if name.startswith("test_") or name.endswith("_test.py") or name in ("tests.py", "conftest.py"):
        return True
    return any(p in TEST_DIRS for p in parts[:-1])


def project_files(root: Path) -> list[ProjectFile]:
    """Every ``.py`` file under ``root`` in sorted order, except tool and build directories, documentation,
    ``setup.py`` and files too large to be hand-written code."""
    out: list[ProjectFile] = []

    def walk(directory: Path, parts: tuple[str, ...]) -> None:
        try:
            entries = sorted(directory.iterdir(), key=lambda p: p.name)
        except OSError:
            return
        for p in entries:
            if p.is_symlink():
                continue
            if p.is_dir():
                if p.name in SKIP_DIRS or p.name.startswith(".") or p.name.endswith(".egg-info"):
                    continue
                if not parts and p.name in DOC_DIRS:
                    continue
                walk(p, (*parts, p.name))
            elif p.suffix == ".py" and p.is_file():
                rel = (*parts, p.name)
                if rel == ("setup.py",) or p.stat().st_size > MAX_FILE_BYTES:
                    continue
                out.append(ProjectFile("/".join(rel), p, _is_test_file(rel)))

    walk(root, ())
    return out
