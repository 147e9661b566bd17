"""Pools stage: ExecRetrieval-format task pools, validation, mutation and building."""

from .build import BuildReport, SourceTask, build_pool, read_sources
from .io import CORE_POOL_DIR, Problem, load_pool, resolve_pool_path, scan_pool, write_pool
from .models import BUG_TYPES, DOMAINS, DistractorMeta, ExecCacheRow, Pool, Query, Snippet
from .mutate import Mutant, find_mutants
from .replicate import replicate_pool
from .stats import pool_stats
from .validate import execution_problems, spec_problems, structural_problems, structural_warnings

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
