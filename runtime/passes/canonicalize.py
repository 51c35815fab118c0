"""``canonicalize`` and ``fuse-fma``: the greedy driver over declared pattern sets."""

from __future__ import annotations

from functools import lru_cache

from tilegen.runtime.ir import Operation
from tilegen.runtime.passes.registry import FUNCTIONS, parse_bool, register
from tilegen.runtime.rewrite import GreedyConfig, PatternSet, apply_patterns_greedily
from tilegen.runtime.rewrite.declared import load_patterns


@lru_cache(maxsize=None)
def pattern_set(name: str) -> PatternSet:
    return load_patterns(name)


@register(
    "canonicalize",
    options={"max-iterations": (int, 10), "fold": (parse_bool, True)},
    summary="fold and apply the canonicalization patterns to a fixpoint",
)
def canonicalize(op: Operation, options: dict) -> None:
    config = GreedyConfig(max_iterations=options["max-iterations"], fold=options["fold"])
    apply_patterns_greedily(op, pattern_set("canonicalize"), config)


@register(
    "fuse-fma",
    anchors=FUNCTIONS,
    summary="fuse mulf feeding addf/subf into fma (not numerics-preserving)",
)
def fuse_fma(op: Operation, options: dict) -> None:
    patterns = pattern_set("fuse_fma")
    no_folders = PatternSet(patterns.patterns, {})
    apply_patterns_greedily(op, no_folders, GreedyConfig(fold=False))
