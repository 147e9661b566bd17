"""Pools stage: ExecRetrieval-format task pools, validation, mutation and building.

Names load on first use (PEP 562), so that reading a pool's models or the bundled pools' names does not
import the builder and the executors it drives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "BuildReport": "build",
    "SourceTask": "build",
    "build_pool": "build",
    "read_sources": "build",
    "CORE_POOL_DIR": "io",
    "Problem": "io",
    "load_pool": "io",
    "resolve_pool_path": "io",
    "scan_pool": "io",
    "write_pool": "io",
    "BUG_TYPES": "models",
    "DOMAINS": "models",
    "DistractorMeta": "models",
    "ExecCacheRow": "models",
    "Pool": "models",
    "Query": "models",
    "Snippet": "models",
    "Mutant": "mutate",
    "find_mutants": "mutate",
    "replicate_pool": "replicate",
    "pool_stats": "stats",
    "execution_problems": "validate",
    "spec_problems": "validate",
    "structural_problems": "validate",
    "structural_warnings": "validate",
}

__all__ = [
    "BUG_TYPES",
    "CORE_POOL_DIR",
    "DOMAINS",
    "BuildReport",
    "DistractorMeta",
    "ExecCacheRow",
    "Mutant",
    "Pool",
    "Problem",
    "Query",
    "Snippet",
    "SourceTask",
    "build_pool",
    "execution_problems",
    "find_mutants",
    "load_pool",
    "pool_stats",
    "read_sources",
    "replicate_pool",
    "resolve_pool_path",
    "scan_pool",
    "spec_problems",
    "structural_problems",
    "structural_warnings",
    "write_pool",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .build import BuildReport, SourceTask, build_pool, read_sources
    from .io import (
        CORE_POOL_DIR,
        Problem,
        load_pool,
        resolve_pool_path,
        scan_pool,
        write_pool,
    )
    from .models import (
        BUG_TYPES,
        DOMAINS,
        DistractorMeta,
        ExecCacheRow,
        Pool,
        Query,
        Snippet,
    )
    from .mutate import Mutant, find_mutants
    from .replicate import replicate_pool
    from .stats import pool_stats
    from .validate import (
        execution_problems,
        spec_problems,
        structural_problems,
        structural_warnings,
    )
