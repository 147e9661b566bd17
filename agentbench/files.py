"""Writing files so that a reader sees the old content or the new, never half of one.

Every file agentbench writes whole (run directories, results files, pools, reports, markers) goes through
:func:`atomic_write_text`: a temporary file in the same directory, then ``os.replace``. A crash or Ctrl-C
mid-write leaves the previous file intact and no temporary behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["atomic_write_text", "atomic_write_json", "read_json_object", "slug"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_DEFAULT_MODE = 0o666 & ~_umask()
"""What ``open(path, "w")`` would create: mkstemp's 0600 would hide results from the user's group."""


def atomic_write_text(path: str | Path, text: str, *, mode: int | None = None) -> Path:
    """Replace ``path`` with ``text`` atomically; ``mode`` sets the file's permission bits (default: as
    a newly created file under the process's umask)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, _DEFAULT_MODE if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, data: Any, *, indent: int = 2) -> Path:
    """``data`` as JSON (UTF-8, not ASCII-escaped, trailing newline), written atomically."""
    return atomic_write_text(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")


def slug(text: str, max_len: int = 40) -> str:
    """A file-name-safe form of a model or retriever name; a long one keeps its tail and a short hash,
    so two long local paths that share a prefix still get different names."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("._-") or "x"
    if len(base) > max_len:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        base = base[-(max_len - 9) :].strip("._-") + "-" + digest
    return base


def read_json_object(path: str | Path) -> dict:
    """A JSON file holding an object; anything else is a one-line ConfigError naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); is the run complete?") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object")
    return data
