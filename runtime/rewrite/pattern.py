"""Rewrite patterns: match by root op name, rewrite through a :class:`PatternRewriter`."""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.records import dataclass, field
from tilegen.runtime.rewrite.rewriter import PatternRewriter

#: ``fn(op, rewriter) -> bool``: True when the IR was changed.
RewriteFn = Callable[[Operation, PatternRewriter], bool]
#: ``fn(op) -> None | list[Value] | IN_PLACE``: the op's replacement values, or an in-place change.
FoldFn = Callable[[Operation], object]

IN_PLACE = object()


@dataclass
class Pattern:
    """One rewrite: ``root`` is a full op name (``cuda_tile.addf``)."""

    name: str
    root: str
    fn: RewriteFn
    benefit: int = 1

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        return bool(self.fn(op, rewriter))


@dataclass
class PatternSet:
    """Patterns indexed by root op name (declaration order kept), plus folders by op name."""

    patterns: dict[str, list[Pattern]] = field(default_factory=dict)
    folders: dict[str, FoldFn] = field(default_factory=dict)

    def add(self, pattern: Pattern) -> None:
        group = self.patterns.setdefault(pattern.root, [])
        group.append(pattern)
        group.sort(key=lambda p: -p.benefit)  # stable: declaration order within a benefit

    def extend(self, patterns: Iterable[Pattern]) -> None:
        for p in patterns:
            self.add(p)

    def for_op(self, name: str) -> list[Pattern]:
        return self.patterns.get(name, [])

    def folder(self, name: str) -> Optional[FoldFn]:
        return self.folders.get(name)

    def __len__(self) -> int:
        return sum(len(v) for v in self.patterns.values())


def replace_values(op: Operation, values: list[Value]) -> list[Value]:
    """Identity helper to make folder results explicit."""
    assert len(values) == len(op.results)
    return values
