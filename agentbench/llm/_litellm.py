"""LiteLLM, imported after the offline defaults (:mod:`agentbench._env`), with the ``local`` provider
registered.

LiteLLM takes seconds to import, so callers import it lazily through :func:`litellm_module`.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType

from .._env import prepare_environment
from ..heap import importing

__all__ = ["in_process_provider", "litellm_module", "plain_litellm", "register_provider"]

_local_registered = False


def _import() -> ModuleType:
    prepare_environment()  # no network at import: LiteLLM's bundled cost map, Hugging Face offline
    # LiteLLM's TypedDicts make pydantic warn on every schema build; it is noise for our users
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)
    if "litellm" in sys.modules:  # called for every request in this process: no freeze each time
        import litellm
    else:
        with importing():  # about a quarter faster without the collector
            import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def plain_litellm() -> ModuleType:
    """LiteLLM with the offline defaults, without registering the ``local`` provider (worker processes
    of :mod:`.processes` serve API models only)."""
    return _import()


def in_process_provider(model: str) -> bool:
    """Whether ``model`` is served by a handler registered in this process (``local/``, a test's
    scripted provider): worker processes would not know it."""
    provider = model.split("/", 1)[0]
    if provider == "local":
        return True
    if "litellm" not in sys.modules:
        return False  # registering a handler imports LiteLLM: none is registered yet
    litellm = _import()
    return any(p.get("provider") == provider for p in litellm.custom_provider_map)


def litellm_module() -> ModuleType:
    """Import LiteLLM with no network side effects and the ``local`` provider registered."""
    global _local_registered
    litellm = _import()
    if not _local_registered:
        from .local import LocalLLM

        register_provider("local", LocalLLM())
        _local_registered = True
    return litellm


def register_provider(name: str, handler: object) -> None:
    """Register (or replace) a ``litellm.CustomLLM`` handler serving ``name/...`` model strings."""
    litellm = _import()
    from litellm.utils import custom_llm_setup

    litellm.custom_provider_map = [p for p in litellm.custom_provider_map if p.get("provider") != name]
    litellm.custom_provider_map.append({"provider": name, "custom_handler": handler})
    custom_llm_setup()
