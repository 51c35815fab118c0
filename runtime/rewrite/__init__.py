"""The rewrite engine: patterns, a rewriter, a greedy driver, declared and custom patterns."""

from tilegen.runtime.rewrite.driver import (
    GreedyConfig,
    GreedyResult,
    apply_pattern_groups,
    apply_patterns_greedily,
)
from tilegen.runtime.rewrite.pattern import IN_PLACE, Pattern, PatternSet
from tilegen.runtime.rewrite.rewriter import PatternRewriter

__all__ = [
    "GreedyConfig",
    "GreedyResult",
    "IN_PLACE",
    "Pattern",
    "PatternRewriter",
    "PatternSet",
    "apply_pattern_groups",
    "apply_patterns_greedily",
]
