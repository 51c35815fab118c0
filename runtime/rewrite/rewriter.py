"""``PatternRewriter``: every IR mutation a pattern makes goes through here so the driver can
keep its worklist up to date (new ops, users of replaced values, operands of erased ops)."""

from __future__ import annotations

from typing import Optional, Protocol, Sequence

from tilegen.runtime.attributes import Attribute, Location
from tilegen.runtime.ir import Block, Operation, Region, Value
from tilegen.runtime.types import Type


class Listener(Protocol):
    def op_inserted(self, op: Operation) -> None: ...
    def op_erased(self, op: Operation) -> None: ...
    def op_modified(self, op: Operation) -> None: ...
    def value_replaced(self, value: Value) -> None: ...


class PatternRewriter:
    """Creates, replaces, erases and moves ops at an insertion point, notifying a listener."""

    def __init__(self, listener: Optional[Listener] = None):
        self.listener = listener
        self._block: Optional[Block] = None
        self._before: Optional[Operation] = None  # None: append at the end of _block

    # ----- insertion point
    def set_insertion_point(self, op: Operation) -> None:
        """Insert before ``op``."""
        self._block, self._before = op.parent, op

    def set_insertion_point_after(self, op: Operation) -> None:
        block = op.parent
        idx = block.ops.index(op)
        self._block = block
        self._before = block.ops[idx + 1] if idx + 1 < len(block.ops) else None

    def set_insertion_point_to_end(self, block: Block) -> None:
        self._block, self._before = block, None

    def set_insertion_point_to_start(self, block: Block) -> None:
        self._block, self._before = block, (block.ops[0] if block.ops else None)

    def insert(self, op: Operation) -> Operation:
        assert self._block is not None, "no insertion point"
        if self._before is None:
            self._block.append(op)
        else:
            self._block.insert(self._block.ops.index(self._before), op)
        if self.listener:
            for nested in op.walk():
                self.listener.op_inserted(nested)
        return op

    def create(
        self,
        name: str,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: Optional[dict[str, Attribute]] = None,
        loc: Optional[Location] = None,
        regions: int = 0,
    ) -> Operation:
        op = Operation(name, list(operands), list(result_types), attributes, regions, loc)
        return self.insert(op)

    # ----- replacement and erasure
    def replace_all_uses_with(self, old: Value, new: Value) -> None:
        if old is new:
            return
        users = [u for u, _ in old.uses]
        old.replace_all_uses_with(new)
        if self.listener:
            for u in users:
                self.listener.op_modified(u)
            self.listener.value_replaced(new)

    def replace_op(self, op: Operation, values: Sequence[Value]) -> None:
        """Replace every result of ``op`` by ``values`` and erase ``op``."""
        assert len(values) == len(op.results), f"{op.name}: {len(values)} replacement values"
        for old, new in zip(op.results, values):
            self.replace_all_uses_with(old, new)
        self.erase_op(op)

    def replace_op_with_new(
        self,
        op: Operation,
        name: str,
        operands: Sequence[Value],
        attributes: Optional[dict] = None,
        result_types: Optional[Sequence[Type]] = None,
    ) -> Operation:
        self.set_insertion_point(op)
        types = [r.type for r in op.results] if result_types is None else result_types
        new = self.create(name, operands, types, attributes, op.loc)
        self.replace_op(op, new.results)
        return new

    def erase_op(self, op: Operation) -> None:
        """Erase ``op`` and everything nested in it (results may still have uses only from
        ops nested in it)."""
        nested = list(op.walk())
        for inner in reversed(nested):
            if self.listener:
                self.listener.op_erased(inner)
            inner.drop_all_uses_of_operands()
        if op.parent is not None:
            op.parent.ops.remove(op)
            op.parent = None

    def erase_block_ops_after(self, op: Operation) -> None:
        """Erase every op after ``op`` in its block (unreachable code), last first."""
        block = op.parent
        idx = block.ops.index(op)
        for later in reversed(block.ops[idx + 1 :]):
            for r in later.results:
                for user, i in list(r.uses):
                    # uses can only be in the erased tail; detach them first
                    user.operands[i]._remove_use(user, i)
            self.erase_op(later)

    def modify_in_place(self, op: Operation) -> None:
        """Tell the driver ``op`` was changed in place (operands, attributes, regions)."""
        if self.listener:
            self.listener.op_modified(op)

    # ----- moving code
    def move_op_before(self, op: Operation, before: Operation) -> None:
        op.parent.ops.remove(op)
        before.parent.insert(before.parent.ops.index(before), op)
        self.modify_in_place(op)

    def inline_block_before(
        self, block: Block, before: Operation, args: Sequence[Value] = ()
    ) -> None:
        """Move every op of ``block`` before ``before``; block args are replaced by ``args``."""
        for arg, v in zip(block.args, args):
            self.replace_all_uses_with(arg, v)
        dest = before.parent
        for op in list(block.ops):
            block.ops.remove(op)
            dest.insert(dest.ops.index(before), op)
            self.modify_in_place(op)

    def inline_block_at_end(self, block: Block, dest: Block) -> None:
        for op in list(block.ops):
            block.ops.remove(op)
            dest.append(op)
            self.modify_in_place(op)

    def take_region(self, src: Region, dst: Region) -> None:
        """Move the blocks of ``src`` into the empty region ``dst``."""
        for b in list(src.blocks):
            dst.append(b)
        src.blocks.clear()
