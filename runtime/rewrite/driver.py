"""Greedy pattern driver (MLIR's applyPatternsAndFoldGreedily, simplified).

Each iteration walks the ops under ``root`` pre-order into a worklist, uniquing constants per
isolated scope and hoisting them to the front of the scope's entry block (MLIR's
OperationFolder), then pops ops in program order: a trivially dead op is erased; otherwise its
folder runs, then its patterns (by benefit, then declaration order) until one applies. Every
change pushes the affected ops (new ops, users, operand producers) back on the worklist.
Iterations repeat until nothing changes or ``max_iterations`` is reached.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Block, Operation, Region, Value
from tilegen.runtime.records import dataclass
from tilegen.runtime.rewrite.pattern import IN_PLACE, PatternSet
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.rewrite import ir_utils as U


@dataclass
class GreedyConfig:
    max_iterations: int = 10
    max_rewrites_per_iteration: int = 100_000
    fold: bool = True
    cse_constants: bool = True


@dataclass
class GreedyResult:
    converged: bool
    changed: bool
    iterations: int


class _Driver:
    def __init__(self, patterns: PatternSet, config: GreedyConfig):
        self.patterns = patterns
        self.config = config
        self.worklist: list[Operation] = []
        self.queued: set[int] = set()
        self.erased: set[int] = set()
        self.rewriter = PatternRewriter(self)
        self.constants: dict[int, dict[tuple, Operation]] = {}
        self.const_keys: dict[int, tuple[int, tuple]] = {}  # id(constant) -> (scope, key)
        self.owned: set[int] = set()

    # ----- listener
    def push(self, op: Optional[Operation]) -> None:
        if op is not None and id(op) not in self.queued and id(op) not in self.erased:
            self.queued.add(id(op))
            self.worklist.append(op)

    def op_inserted(self, op: Operation) -> None:
        self.erased.discard(id(op))
        self.push(op)

    def op_erased(self, op: Operation) -> None:
        self.erased.add(id(op))
        self.owned.discard(id(op))
        for v in op.operands:
            d = U.defining_op(v)
            if d is not None:
                self.push(d)
        where = self.const_keys.pop(id(op), None)
        if where is not None and self.constants[where[0]].get(where[1]) is op:
            del self.constants[where[0]][where[1]]

    def op_modified(self, op: Operation) -> None:
        self.push(op)
        parent = op.parent_op
        if parent is not None:
            self.push(parent)

    def value_replaced(self, value: Value) -> None:
        for user, _ in value.uses:
            self.push(user)
        d = U.defining_op(value)
        if d is not None:
            self.push(d)

    # ----- constants (OperationFolder)
    def _insert_known_constant(self, op: Operation) -> bool:
        """False when ``op`` was replaced by an existing equal constant."""
        scope = U.isolated_region(op)
        if scope is None or not scope.blocks:
            return True
        entry = scope.blocks[0]
        if id(op) in self.owned:
            return True
        key = U.constant_key(op)
        table = self.constants.setdefault(id(scope), {})
        existing = table.get(key)
        if existing is not None and existing is not op and id(existing) not in self.erased:
            self.rewriter.replace_op(op, existing.results)
            return False
        block = op.parent
        idx = block.ops.index(op)
        prev_owned = idx > 0 and id(block.ops[idx - 1]) in self.owned
        if block is not entry or (idx != 0 and not prev_owned):
            block.ops.remove(op)
            entry.insert(0, op)
        table[key] = op
        self.const_keys[id(op)] = (id(scope), key)
        self.owned.add(id(op))
        return True

    # ----- driver
    def _populate(self, roots: list[Region]) -> None:
        self.constants.clear()
        self.const_keys.clear()
        self.owned.clear()
        order: list[Operation] = []

        def visit(op: Operation) -> None:
            if op.name == "cuda_tile.constant" and self.config.cse_constants:
                if not self._insert_known_constant(op):
                    return
            order.append(op)
            for region in op.regions:
                for block in region.blocks:
                    for child in list(block.ops):
                        visit(child)

        for region in roots:
            for block in region.blocks:
                for op in list(block.ops):
                    visit(op)
        self.worklist = list(reversed(order))
        self.queued = {id(o) for o in order}
        self.erased.clear()

    def _process(self) -> bool:
        changed = False
        budget = self.config.max_rewrites_per_iteration
        effects: dict = {}  # is_effect_free answers, valid until the next rewrite
        while self.worklist and budget > 0:
            op = self.worklist.pop()
            self.queued.discard(id(op))
            if id(op) in self.erased or op.parent is None:
                continue
            if U.is_trivially_dead(op, effects):
                self.rewriter.erase_op(op)
                changed = True
                effects.clear()
                continue
            if self.config.fold and not U.has_trait(op, "ConstantLike"):
                folder = self.patterns.folder(op.name)
                if folder is not None:
                    before = [U.defining_op(v) for v in op.operands]
                    res = folder(op)
                    if res is IN_PLACE:
                        self.op_modified(op)
                        for d in before:
                            self.push(d)
                        changed, budget = True, budget - 1
                        effects.clear()
                        continue
                    if res is not None:
                        self.rewriter.replace_op(op, list(res))
                        changed, budget = True, budget - 1
                        effects.clear()
                        continue
            for pattern in self.patterns.for_op(op.name):
                if pattern.match_and_rewrite(op, self.rewriter):
                    changed, budget = True, budget - 1
                    effects.clear()
                    break
        return changed


def apply_patterns_greedily(
    root: Operation, patterns: PatternSet, config: Optional[GreedyConfig] = None
) -> GreedyResult:
    """Rewrite every op nested under ``root`` (not ``root`` itself) to a fixpoint."""
    config = config or GreedyConfig()
    driver = _Driver(patterns, config)
    any_change = False
    for it in range(1, config.max_iterations + 1):
        driver._populate(root.regions)
        changed = driver._process()
        any_change |= changed
        if not changed:
            return GreedyResult(True, any_change, it)
    return GreedyResult(False, any_change, config.max_iterations)


def apply_pattern_groups(
    root: Operation, groups: list[tuple[str, PatternSet]], config: Optional[GreedyConfig] = None
) -> list[tuple[str, GreedyResult]]:
    """Run each group to its own fixpoint, one after another in the declared order."""
    return [(name, apply_patterns_greedily(root, ps, config)) for name, ps in groups]
