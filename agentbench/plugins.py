"""Loading user plug-ins named ``module:attr`` (``--retriever``, ``--agent``).

The current directory is importable, as for ``python -m``, so ``examples.hybrid:retriever`` works from a
checkout and ``mypkg.agent:agent`` from a user's project. Import problems become one-line ConfigErrors
before any work starts; the user's traceback is not shown (its last line is kept in the message).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from .errors import ConfigError

__all__ = ["load_spec", "describe", "accepts"]


def load_spec(spec: str, what: str) -> Any:
    """The object named by ``spec`` (``package.module:attr``, ``attr`` may be dotted)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--{what} {spec!r}: expected module:attr, e.g. examples.hybrid:retriever")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(
                f"--{what} {spec!r}: no module named {exc.name!r}; run from the directory that contains "
                "it or install it"
            ) from None
        raise ConfigError(f"--{what} {spec!r}: importing {module_name} failed: {exc}") from None
    except Exception as exc:  # the user's module raised while importing
        raise ConfigError(
            f"--{what} {spec!r}: importing {module_name} raised {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"--{what} {spec!r}: {module_name} has no attribute {attr!r}") from None
    return obj


def describe(obj: Any) -> str:
    """A stable name for a plug-in object passed through the Python API (used in configs and reports)."""
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    module = getattr(target, "__module__", "?")
    name = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
    return f"{module}:{name}"


def accepts(fn: Any, n_args: int) -> bool:
    """Whether ``fn`` can be called with ``n_args`` positional arguments (False if uninspectable)."""
    try:
        inspect.signature(fn).bind(*range(n_args))
    except TypeError:
        return False
    except ValueError:  # builtins without a signature: assume yes, errors surface per call
        return True
    return True
