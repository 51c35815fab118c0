"""The IR core: operations, values, blocks, regions, symbol tables.

Mirrors MLIR's structure closely enough that the printer and verifier can reproduce its behaviour:

* an :class:`Operation` has a name (``cuda_tile.addf``), operands, results, an ordered attribute
  dictionary (inherent attributes and discardable ones alike; the op definition says which is
  which), regions and a location;
* values keep use-lists so rewrites can replace all uses in O(uses);
* an operation finds its definition (:class:`tilegen.runtime.opdef.OpDef`) through the registry.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterator, Optional

from tilegen.runtime.attributes import UNKNOWN_LOC, Attribute, Location
from tilegen.runtime.opdef import OpDef, lookup_opdef
from tilegen.runtime.types import Type

#: Shared, immutable stand-ins for an op's empty properties, regions and successors: most ops
#: have none, and three empty containers per op are a sixth of a parsed op's memory.
_NO_PROPERTIES: "MappingProxyType[str, Attribute]" = MappingProxyType({})
#: ... and of an op with no attributes: write through :meth:`Operation.set_attr`.
_NO_ATTRIBUTES: "MappingProxyType[str, Attribute]" = MappingProxyType({})
_NO_REGIONS: tuple = ()
_NO_SUCCESSORS: tuple = ()


class Value:
    """An SSA value: an operation result or a block argument.

    Uses are kept compactly in ``_users``: an empty tuple (no use), the one using op itself, or
    a list holding each using op once per operand slot that reads this value. :attr:`uses`
    rebuilds the ``(op, operand index)`` pairs from the users' operand lists on demand. Most
    values have one use, which then costs nothing beyond the slot (a list plus a tuple per use
    was ~150 bytes).
    """

    __slots__ = ("type", "_users")

    #: a block argument's location (``BlockArgument`` keeps one per argument); results have none
    loc: Optional[Location] = None

    def __init__(self, type: Type):
        self.type = type
        self._users: "Operation | list[Operation] | tuple" = ()

    # ----- use-list maintenance
    def _add_use(self, op: "Operation", index: int) -> None:
        users = self._users
        if not users:
            self._users = op
        elif type(users) is list:
            users.append(op)
        else:
            self._users = [users, op]

    def _remove_use(self, op: "Operation", index: int) -> None:
        users = self._users
        if users is op:
            self._users = ()
        elif type(users) is list:
            for i in range(len(users) - 1, -1, -1):  # rewrites mostly drop the latest use
                if users[i] is op:
                    del users[i]
                    return

    @property
    def uses(self) -> list[tuple["Operation", int]]:
        """``(op, operand index)`` for every use, in the order the uses were made."""
        users = self._users
        if not users:
            return []
        if type(users) is not list:
            return [(users, i) for i, o in enumerate(users.operands) if o is self]
        out: list[tuple[Operation, int]] = []
        seen: set[int] = set()
        for op in users:
            if id(op) not in seen:
                seen.add(id(op))
                out.extend((op, i) for i, o in enumerate(op.operands) if o is self)
        return out

    @property
    def users(self) -> list["Operation"]:
        """The ops that use this value (an op once per operand slot it reads it in)."""
        users = self._users
        return list(users) if type(users) is list else [users] if users else []

    @property
    def num_uses(self) -> int:
        users = self._users
        return len(users) if type(users) is list else 1 if users else 0

    @property
    def has_uses(self) -> bool:
        return bool(self._users)

    def replace_all_uses_with(self, other: "Value") -> None:
        for op, idx in self.uses:
            op.set_operand(idx, other)

    @property
    def owner(self):  # pragma: no cover - overridden
        raise NotImplementedError


class OpResult(Value):
    __slots__ = ("op",)

    def __init__(self, type: Type, op: "Operation", index: int = 0):
        """``index`` is not stored: :attr:`index` finds the result among ``op``'s."""
        super().__init__(type)
        self.op = op

    @property
    def index(self) -> int:
        """The result's position among its op's results (found there: no slot per result)."""
        r = self.op._results
        return r.index(self) if r.__class__ is tuple else 0

    @property
    def owner(self) -> "Operation":
        return self.op

    def __repr__(self) -> str:
        return f"<OpResult #{self.index} of {self.op.name}: {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index", "loc")

    def __init__(self, type: Type, block: "Block", index: int, loc: Optional[Location] = None):
        super().__init__(type)
        self.block = block
        self.index = index
        self.loc = loc

    @property
    def owner(self) -> "Block":
        return self.block

    def __repr__(self) -> str:
        return f"<BlockArgument #{self.index}: {self.type}>"


class Operation:
    """A generic operation. Op-specific accessors come from generated classes (see ``OpView``)."""

    __slots__ = (
        "name",
        "operands",
        "_results",
        "attributes",
        "properties",
        "regions",
        "loc",
        "parent",
        "opdef",
        "successors",
    )

    def __init__(
        self,
        name: str,
        operands: Optional[list[Value]] = None,
        result_types: Optional[list[Type]] = None,
        attributes: Optional[dict[str, Attribute]] = None,
        regions: int | list["Region"] = 0,
        loc: Optional[Location] = None,
        opdef: Optional["OpDef"] = None,
        properties: Optional[dict[str, Attribute]] = None,
    ):
        self.name = name
        self.operands: list[Value] = list(operands) if operands else []  # exact size
        for i, v in enumerate(self.operands):
            v._add_use(self, i)
        #: the one result itself, else a tuple (one shared ``()`` for ops without any): see
        #: :attr:`results`
        self._results: "OpResult | tuple[OpResult, ...]" = (
            ()
            if not result_types
            else (
                OpResult(result_types[0], self, 0)
                if len(result_types) == 1
                else tuple([OpResult(t, self, i) for i, t in enumerate(result_types)])
            )
        )
        #: a dict, or a read-only map shared between ops (empty, or one a reader interned):
        #: change attributes with set_attr / remove_attr, which copy a shared map first
        self.attributes: dict[str, Attribute] = (
            _NO_ATTRIBUTES  # type: ignore[assignment]
            if not attributes
            else attributes if type(attributes) is MappingProxyType else dict(attributes)
        )
        #: Properties of ops with no definition (parsed from ``<{...}>``); registered ops keep
        #: their inherent attributes in ``attributes`` and the printer splits them by OpDef.
        self.properties = dict(properties) if properties else _NO_PROPERTIES
        self.regions: list[Region] = _NO_REGIONS  # a list from the first add_region on
        if isinstance(regions, int):
            for _ in range(regions):
                self.add_region(Region())
        else:
            for r in regions:
                self.add_region(r)
        self.loc: Location = loc or UNKNOWN_LOC
        self.parent: Optional[Block] = None
        self.successors: list[Block] = _NO_SUCCESSORS  # replaced, never appended to
        if opdef is None:
            opdef = lookup_opdef(name)
        self.opdef = opdef

    # ----- operands
    def _append_operand(self, v: Value) -> None:
        self.operands.append(v)
        v._add_use(self, len(self.operands) - 1)

    def set_operand(self, index: int, v: Value) -> None:
        self.operands[index]._remove_use(self, index)
        self.operands[index] = v
        v._add_use(self, index)

    def set_operands(self, values: list[Value]) -> None:
        for i, old in enumerate(self.operands):
            old._remove_use(self, i)
        self.operands = list(values)
        for i, v in enumerate(self.operands):
            v._add_use(self, i)

    def drop_all_uses_of_operands(self) -> None:
        for i, v in enumerate(self.operands):
            v._remove_use(self, i)

    # ----- regions and structure
    def add_region(self, region: "Region") -> "Region":
        region.parent = self
        if self.regions is _NO_REGIONS:
            self.regions = []
        self.regions.append(region)
        return region

    @property
    def results(self) -> tuple[OpResult, ...]:
        """The results, a tuple (they never change once the op exists). An op with one result
        keeps the result itself, not a one-element tuple (48 bytes an op): code on hot paths
        may read ``_results`` and test ``.__class__ is tuple``."""
        r = self._results
        return r if r.__class__ is tuple else (r,)

    @property
    def result(self) -> Value:
        r = self._results
        if r.__class__ is tuple:
            assert len(r) == 1, f"{self.name} has {len(r)} results"
            return r[0]
        return r

    @property
    def parent_op(self) -> Optional["Operation"]:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def walk(self) -> Iterator["Operation"]:
        """Pre-order walk over this op and every op nested in its regions."""
        stack = [self]
        while stack:
            op = stack.pop()
            yield op
            for region in reversed(op.regions):
                for block in reversed(region.blocks):
                    stack.extend(reversed(block.ops))

    def erase(self) -> None:
        """Remove from the parent block and drop operand uses (results must be unused)."""
        self.drop_all_uses_of_operands()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0] if "." in self.name else ""

    @property
    def mnemonic(self) -> str:
        return self.name.split(".", 1)[1] if "." in self.name else self.name

    def get_attr(self, name: str, default=None):
        return self.attributes.get(name, default)

    def set_attr(self, name: str, value: Attribute) -> None:
        """Set attribute ``name`` (copying a shared read-only map first)."""
        if type(self.attributes) is not dict:
            self.attributes = dict(self.attributes)
        self.attributes[name] = value

    def set_default_attr(self, name: str, value: Attribute) -> Attribute:
        """``attributes.setdefault`` that works on an op without attributes."""
        if name not in self.attributes:
            self.set_attr(name, value)
        return self.attributes[name]

    def remove_attr(self, name: str) -> Optional[Attribute]:
        """Remove attribute ``name``; its value, or None when it was not set."""
        if name not in self.attributes:
            return None
        if type(self.attributes) is not dict:
            self.attributes = dict(self.attributes)
        return self.attributes.pop(name)

    def __repr__(self) -> str:
        return f"<Operation {self.name}>"


class Block:
    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Optional[list[Type]] = None):
        self.args: list[BlockArgument] = [
            BlockArgument(t, self, i) for i, t in enumerate(arg_types or ())
        ]
        self.ops: list[Operation] = []
        self.parent: Optional[Region] = None

    def add_argument(self, type: Type, loc: Optional[Location] = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), loc)
        self.args.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    @property
    def terminator(self) -> Optional[Operation]:
        return self.ops[-1] if self.ops else None

    @property
    def parent_op(self) -> Optional[Operation]:
        return self.parent.parent if self.parent is not None else None


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Optional[list[Block]] = None):
        self.blocks: list[Block] = []
        self.parent: Optional[Operation] = None
        for b in blocks or ():
            self.append(b)

    def append(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def empty(self) -> bool:
        return not self.blocks

    @property
    def block(self) -> Block:
        """The single block of a SizedRegion<1> (created on demand)."""
        if not self.blocks:
            self.append(Block())
        return self.blocks[0]


class SymbolTable:
    """Symbols (``sym_name``) defined directly in an op's single-block region."""

    def __init__(self, op: Operation):
        self.op = op
        self.symbols: dict[str, Operation] = {}
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    name = child.attributes.get("sym_name")
                    if name is not None and hasattr(name, "value"):
                        self.symbols.setdefault(name.value, child)

    def lookup(self, name: str) -> Optional[Operation]:
        return self.symbols.get(name)


def nearest_symbol_table(op: Operation) -> Optional[Operation]:
    """The closest ancestor that holds symbols (``cuda_tile.module`` / ``builtin.module``)."""
    cur = op.parent_op
    while cur is not None:
        if cur.name in ("cuda_tile.module", "builtin.module"):
            return cur
        cur = cur.parent_op
    return None
