"""The one place that imports LiteLLM: offline defaults first, then the ``local`` provider registration.

LiteLLM takes seconds to import, so callers import it lazily through :func:`litellm_module`.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

__all__ = ["in_process_provider", "litellm_module", "offline_defaults", "plain_litellm", "register_provider"]

_local_registered = False


def offline_defaults() -> None:
    """No network at import: LiteLLM's bundled cost map, Hugging Face offline (unless the user set them)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _import() -> ModuleType:
    offline_defaults()
    # LiteLLM's TypedDicts make pydantic warn on every schema build; it is noise for our users
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def plain_litellm() -> ModuleType:
    """LiteLLM with the offline defaults, without registering the ``local`` provider (worker processes
    of :mod:`.llm_processes` serve API models only)."""
    return _import()


def in_process_provider(model: str) -> bool:
    """Whether ``model`` is served by a handler registered in this process (``local/``, a test's
    scripted provider): worker processes would not know it."""
    provider = model.split("/", 1)[0]
    if provider == "local":
        return True
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
