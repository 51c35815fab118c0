"""MLIR-syntax printer: the Python counterpart of MLIR's OpAsmPrinter.

Prints what ``cuda-tile-opt`` prints: custom syntax (declarative formats via ``format.py``,
custom hooks via ``custom_ops.PRINTERS``) or the generic form, SSA names numbered as MLIR's
SSANameState does (breadth-first per region, name hints with ``_N`` conflict suffixes, result
groups ``%0:2`` / ``%0#1``), and with ``debuginfo`` locations as ``loc(#locN)`` aliases.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from tilegen.runtime.attributes import (
    Attribute,
    Location,
)
from tilegen.runtime.ir import Block, Operation, OpResult, Region, Value
from tilegen.runtime.types import Type
from tilegen.runtime.asm.parser import default_dialect

_UNKNOWN = "<<UNKNOWN SSA VALUE>>"
#: "\n" plus the indentation of each nesting depth (extended on demand)
_NEWLINES: list[str] = ["\n" + "  " * i for i in range(32)]
#: Output pieces print_region lets accumulate before joining them into one string: the printout
#: of a long block is then held as a few thousand chunks, not ~10 small strings per op.
_CHUNK = 2048
#: Entries OpPrinter's type-text memo holds before it starts over (types parsed from text are
#: shared objects, so it stays small; this bounds it when they are not).
_TYPE_MEMO_MAX = 4096


def _newline(indent: int) -> str:
    if indent < len(_NEWLINES):
        return _NEWLINES[indent]
    return "\n" + "  " * indent


class _NameScope:
    __slots__ = ("names", "parent")

    def __init__(self, parent: Optional["_NameScope"]):
        self.names: set[str] = set()
        self.parent = parent

    def __contains__(self, name: str) -> bool:
        s = self
        while s is not None:
            if name in s.names:
                return True
            s = s.parent
        return False


def sanitize_identifier(name: str) -> str:
    """MLIR's sanitizeIdentifier for SSA name hints."""

    def valid(ch: str) -> bool:
        return (ch.isascii() and ch.isalnum()) or ch in "$._-"

    def copy() -> str:
        out = []
        for ch in name:
            if valid(ch):
                out.append(ch)
            elif ch == " ":
                out.append("_")
            else:
                out.extend("%X" % b for b in ch.encode("utf-8"))
        return "".join(out)

    if name[0].isdigit():
        return "_" + copy()
    if all(valid(ch) for ch in name):
        return name
    return copy()


class SSANames:
    """Value and block names for everything nested under one op (MLIR's SSANameState)."""

    def __init__(self, top: Operation, generic: bool):
        self.generic = generic
        #: value -> its number N (printed ``%N``) or its whole name (``%arg0``, ``%cst``): the
        #: group leader or single value, keyed by the Value object itself (values hash by
        #: identity). A number costs an int where ``"%N"`` cost a 55-byte string.
        self.ids: dict[Value, "int | str"] = {}
        self.groups: dict[int, list[int]] = {}  # id(op) -> sorted result group starts
        self.block_ids: dict[int, str] = {}
        self._next_value = 0
        self._next_arg = 0
        self._next_conflict = 0
        self._result_names, self._arg_names = _name_hooks() if not generic else ({}, {})
        stack = [(r, 0, 0, 0, None) for r in top.regions]
        while stack:
            region, self._next_value, self._next_arg, self._next_conflict, parent = stack.pop()
            scope = _NameScope(parent)
            self._scope = scope
            self._number_region(region)
            for block in region.blocks:
                for op in block.ops:
                    for sub in op.regions:
                        stack.append(
                            (sub, self._next_value, self._next_arg, self._next_conflict, scope)
                        )

    def _unique(self, name: str) -> str:
        name = sanitize_identifier(name)
        if name in self._scope:
            while True:
                probe = f"{name}_{self._next_conflict}"
                self._next_conflict += 1
                if probe not in self._scope:
                    name = probe
                    break
        self._scope.names.add(name)
        return name

    def _set_name(self, v: Value, name: Optional[str]) -> None:
        if not name:
            self.ids[v] = self._next_value
            self._next_value += 1
        else:
            self.ids[v] = "%" + self._unique(name)

    def _number_region(self, region: Region) -> None:
        parent = region.parent
        if parent is not None and not self.generic:
            hook = self._arg_names.get(parent.name)
            if hook is not None and region.blocks:
                try:
                    idx = next(i for i, r in enumerate(parent.regions) if r is region)
                    names = hook(parent, idx) or []
                except Exception:  # a hook still being written must not break printing
                    names = []
                for arg, name in zip(region.blocks[0].args, names):
                    if name and arg not in self.ids:
                        self._set_name(arg, name)
        for bi, block in enumerate(region.blocks):
            self.block_ids[id(block)] = f"^bb{bi}"
            entry = bi == 0
            for arg in block.args:
                if arg in self.ids:
                    continue
                if entry:
                    self.ids[arg] = f"%arg{self._next_arg}"
                    self._next_arg += 1
                else:
                    self._set_name(arg, None)
            for op in block.ops:
                self._number_op(op)

    def _number_op(self, op: Operation) -> None:
        if not op.results:
            return
        groups = [0]
        hook = self._result_names.get(op.name)
        if hook is not None:
            try:
                names = hook(op) or []
            except Exception:
                names = []
            for i, name in enumerate(names[: len(op.results)]):
                if name:
                    self._set_name(op.results[i], name)
                    if i:
                        groups.append(i)
        first = op.results[0]
        if first not in self.ids:
            self._set_name(first, None)
        if len(groups) > 1:
            self.groups[id(op)] = sorted(groups)

    def name(self, v: Value) -> str:
        """``%name``, ``%N`` or ``%N#k`` for a result inside a group."""
        if isinstance(v, OpResult) and len(v.op.results) > 1:
            # MLIR prints '#k' whenever the value's result group has more than one member.
            op = v.op
            starts = self.groups.get(id(op), [0])
            i = len([s for s in starts if s <= v.index]) - 1
            start = starts[i]
            end = starts[i + 1] if i + 1 < len(starts) else len(op.results)
            leader = _text(self.ids.get(op.results[start], _UNKNOWN))
            return leader if end - start == 1 else f"{leader}#{v.index - start}"
        return _text(self.ids.get(v, _UNKNOWN))

    def result_groups(self, op: Operation) -> list[tuple[int, int]]:
        """(start, count) of each result group of ``op``."""
        n = len(op.results)
        starts = self.groups.get(id(op), [0])
        return [
            (s, (starts[i + 1] if i + 1 < len(starts) else n) - s) for i, s in enumerate(starts)
        ]


def _text(name: "int | str") -> str:
    """The printed form of an :attr:`SSANames.ids` entry."""
    return name if name.__class__ is str else f"%{name}"


def _name_hooks() -> tuple[dict, dict]:
    try:
        from tilegen.runtime.asm import result_names
    except ImportError:
        return {}, {}
    return getattr(result_names, "RESULT_NAMES", {}), getattr(result_names, "BLOCK_ARG_NAMES", {})


def _custom_printer(name: str) -> Optional[Callable]:
    global _CUSTOM_OPS
    custom_ops = _CUSTOM_OPS
    if custom_ops is None:
        try:
            from tilegen.runtime.asm import custom_ops
        except ImportError:
            return None
        _CUSTOM_OPS = custom_ops
    return getattr(custom_ops, "PRINTERS", {}).get(name)


_CUSTOM_OPS = None


class OpPrinter:
    """Writes ops as text; format programs and custom hooks call its methods."""

    def __init__(
        self, *, generic: bool = False, debuginfo: bool = False, alias_mnemonics: bool = False
    ):
        self.generic = generic
        self.debuginfo = debuginfo
        #: print ops under their spec text alias (``pow`` as ``fpowf``), as tileirdisasm 13.5 does
        self.alias_mnemonics = alias_mnemonics
        self._out: list[str] = []
        #: _out[:_joined] holds no run of pieces worth joining (see _join_tail)
        self._joined = 0
        self._indent = 0
        self._names: Optional[SSANames] = None
        self._default_dialect: list[str] = [""]
        #: True while printing inside cuda_tile custom syntax (types print in short form).
        self.short_types = False
        #: id(type) -> (type, text), for the short and the long form (see format_type)
        self._type_text: tuple[dict, dict] = ({}, {})
        #: (default dialect, op name) -> the op name as printed
        self._op_names: dict[tuple[str, str], str] = {}
        from tilegen.runtime.asm.attr_syntax import AliasTable

        self.aliases = AliasTable()

    # ------------------------------------------------------------------ raw output
    def write(self, s: str) -> None:
        """Append raw text."""
        self._out.append(s)

    def newline(self) -> None:
        self._out.append(_newline(self._indent))

    def getvalue(self) -> str:
        return "".join(self._out)

    @property
    def last_char(self) -> str:
        for s in reversed(self._out):
            if s:
                return s[-1]
        return ""

    # ------------------------------------------------------------------ values
    def value_name(self, v: Value) -> str:
        """The printed SSA name of ``v`` (``%0``, ``%arg1``, ``%cst_0``, ``%0#1``)."""
        return self._names.name(v) if self._names is not None else "<<UNKNOWN SSA VALUE>>"

    def print_operand(self, v: Value) -> None:
        self.write(self.value_name(v))

    def print_operands(self, vs: Iterable[Value], sep: str = ", ") -> None:
        names = self._names
        if names is None:
            self.write(sep.join(["<<UNKNOWN SSA VALUE>>" for _ in vs]))
        elif vs.__class__ is list and len(vs) == 1:
            self._out.append(names.name(vs[0]))
        else:
            name = names.name
            self.write(sep.join([name(v) for v in vs]))

    def block_name(self, b: Block) -> str:
        return self._names.block_ids.get(id(b), "^INVALIDBLOCK")

    def print_successor(self, b: Block) -> None:
        self.write(self.block_name(b))

    # ------------------------------------------------------------------ types / attributes
    def format_type(self, t: Type) -> str:
        """The text of ``t`` in the current (short or long) form; memoised per type object
        (types are immutable), so a type used by 100k ops is formatted, and stored, once."""
        memo = self._type_text[1] if self.short_types else self._type_text[0]
        hit = memo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        from tilegen.runtime.asm.type_syntax import format_type

        text = format_type(t, short=self.short_types, aliases=self.aliases)
        if len(memo) >= _TYPE_MEMO_MAX:
            memo.clear()
        memo[id(t)] = (t, text)  # holding t keeps its id from being reused
        return text

    def print_type(self, t: Type) -> None:
        """A type: short cuda_tile form inside cuda_tile custom syntax, long form otherwise."""
        self.write(self.format_type(t))

    def print_types(self, ts: Iterable[Type], sep: str = ", ") -> None:
        if ts.__class__ is list and len(ts) == 1:
            self._out.append(self.format_type(ts[0]))
        else:
            fmt = self.format_type
            self.write(sep.join([fmt(t) for t in ts]))

    def print_function_type(self, inputs, results) -> None:
        from tilegen.runtime.asm.type_syntax import format_function_type

        self.write(format_function_type(list(inputs), list(results), short=self.short_types))

    def format_attribute(self, a: Attribute, elide_type: bool = False) -> str:
        from tilegen.runtime.asm.attr_syntax import format_attribute

        return format_attribute(a, self.aliases, elide_type=elide_type)

    def print_attribute(self, a: Attribute) -> None:
        """An attribute in MLIR's full syntax (types inside attributes print in long form)."""
        self.write(self.format_attribute(a))

    def print_attribute_without_type(self, a: Attribute) -> None:
        self.write(self.format_attribute(a, elide_type=True))

    def _format_attr_dict(self, attrs: dict, elided) -> str:
        from tilegen.runtime.asm.attr_syntax import format_dict_entries

        items = [(k, v) for k, v in attrs.items() if k not in elided]
        if not items:
            return ""
        return "{" + format_dict_entries(items, self.aliases) + "}"

    def print_optional_attr_dict(self, op_or_attrs, elided=()) -> None:
        """`` {a = 1, b}`` for the attributes not in ``elided`` (nothing when none remain)."""
        attrs = op_or_attrs.attributes if isinstance(op_or_attrs, Operation) else op_or_attrs
        if not attrs:
            return
        text = self._format_attr_dict(attrs, set(elided))
        if text:
            self.write(" " + text)

    def print_optional_attr_dict_with_keyword(self, op_or_attrs, elided=()) -> None:
        attrs = op_or_attrs.attributes if isinstance(op_or_attrs, Operation) else op_or_attrs
        if not attrs:
            return
        text = self._format_attr_dict(attrs, set(elided))
        if text:
            self.write(" attributes " + text)

    def print_symbol_name(self, s: str) -> None:
        from tilegen.runtime.asm.attr_syntax import format_symbol

        self.write(format_symbol(s))

    def print_optional_location(self, loc: Optional[Location]) -> None:
        """`` loc(...)`` when printing debug info (nothing otherwise)."""
        if self.debuginfo and loc is not None:
            self.write(" " + self.format_location(loc))

    def format_location(self, loc: Location) -> str:
        from tilegen.runtime.asm.attr_syntax import format_location_ref

        return format_location_ref(loc, self.aliases)

    # ------------------------------------------------------------------ regions
    def print_region(
        self,
        region: Region,
        print_entry_block_args: bool = True,
        print_empty_block: bool = False,
        print_block_terminators: bool = True,
    ) -> None:
        """``{`` blocks ``}`` with ops indented two spaces deeper than the current line."""
        self.write("{")
        op = region.parent
        dd = default_dialect(op.name, op.opdef) if op is not None else None
        pushed = dd is not None
        if pushed:
            # builtin.module's default dialect is "builtin" (its prefix is always stripped).
            self._default_dialect.append("" if op.name == "builtin.module" else dd)
        saved_short = self.short_types
        self._indent += 1
        blocks = region.blocks
        out = self._out
        if blocks:
            entry = blocks[0]
            print_label = (print_entry_block_args and entry.args) or (
                print_empty_block and not entry.ops
            )
            for bi, block in enumerate(blocks):
                if bi > 0 or print_label:
                    self._print_block_header(block, print_entry_block_args or bi > 0)
                ops = block.ops
                if not print_block_terminators and ops and bi == len(blocks) - 1:
                    term = ops[-1]
                    if _is_elidable_terminator(term):
                        ops = ops[:-1]
                mark = len(out)
                for child in ops:
                    out.append(_newline(self._indent))
                    self.print_operation(child)
                    if len(out) - mark >= _CHUNK:
                        self._join_tail(mark)
        self._indent -= 1
        self.short_types = saved_short
        if pushed:
            self._default_dialect.pop()
        self.newline()
        self.write("}")

    def _join_tail(self, mark: int) -> None:
        """Join the pieces written since ``mark`` (and since the last join) into one string.

        Everything from ``mark`` on is the finished text of ops of the region being printed;
        marks that hooks took before that region still point before it. Pieces already joined
        (chunks of nested regions) are left alone, so no text is copied twice."""
        out = self._out
        start = max(mark, min(self._joined, len(out)))
        if len(out) - start >= _CHUNK:
            out[start:] = ["".join(out[start:])]
            self._joined = start + 1

    def _print_block_header(self, block: Block, with_args: bool) -> None:
        self._out.append("\n" + "  " * (self._indent - 1))
        self.write(self.block_name(block))
        if with_args and block.args:
            self.write("(")
            parts = []
            for a in block.args:
                text = f"{self.value_name(a)}: {self.format_type(a.type)}"
                if self.debuginfo and a.loc is not None:
                    text += " " + self.format_location(a.loc)
                parts.append(text)
            self.write(", ".join(parts))
            self.write(")")
        self.write(":")

    # ------------------------------------------------------------------ operations
    def print_op_name(self, op: Operation) -> None:
        name = op.name
        if self.alias_mnemonics and not self.generic and op.opdef is not None and op.opdef.aliases:
            name = f"{op.opdef.dialect}.{op.opdef.aliases[0]['mnemonic']}"
        dd = self._default_dialect[-1]
        key = (dd, name)
        text = self._op_names.get(key)
        if text is None:
            text = name
            if dd and name.startswith(dd + ".") and name.count(".") == 1:
                text = name[len(dd) + 1 :]
            elif name.startswith("builtin.") and name.count(".") == 1:
                text = name[len("builtin.") :]
            self._op_names[key] = text
        self.write(text)

    def print_operation(self, op: Operation) -> None:
        """One op (results, name, body, optional location) at the current position."""
        if self.aliases.collecting and self.debuginfo:
            self.aliases.visit_location(op.loc)  # MLIR visits an op's location before its body
        results = op.results
        if results:
            names = self._names
            if len(results) == 1:
                self._out.append(_text(names.ids.get(results[0], _UNKNOWN)))
            else:
                parts = []
                for start, count in names.result_groups(op):
                    text = _text(names.ids.get(results[start], _UNKNOWN))
                    if count > 1:
                        text += f":{count}"
                    parts.append(text)
                self._out.append(", ".join(parts))
            self._out.append(" = ")
        if self.generic or op.opdef is None and op.name != "builtin.module":
            self.print_generic_op(op)
        else:
            saved_short = self.short_types
            self.print_op_name(op)
            if op.name == "builtin.module":
                self._print_builtin_module(op)
            elif op.opdef.custom_format:
                hook = _custom_printer(op.opdef.name)
                if hook is None:
                    hook = _custom_printer(op.opdef.custom_format)
                if hook is None:
                    # No hook yet: fall back to the generic form for this op.
                    self._out.pop()
                    self.print_generic_op(op)
                else:
                    self.short_types = True
                    hook(self, op)
            else:
                self.short_types = True
                _format_printer()(self, op)
            self.short_types = saved_short
        self.print_optional_location(op.loc)

    def _print_builtin_module(self, op: Operation) -> None:
        sym = op.attributes.get("sym_name")
        if sym is not None:
            self.write(" ")
            self.print_symbol_name(sym.value)
        self.print_optional_attr_dict_with_keyword(op, elided=("sym_name",))
        self.write(" ")
        self.print_region(op.regions[0], print_entry_block_args=False)

    def print_generic_op(self, op: Operation) -> None:
        """``"name"(%a) [succ] <{props}> ({regions}) {attrs} : (T) -> R``."""
        from tilegen.runtime.asm.lexer import encode_string

        saved_short = self.short_types
        self.short_types = False
        self.write(encode_string(op.name))
        self.write("(")
        self.print_operands(op.operands)
        self.write(")")
        if op.successors:
            self.write("[" + ", ".join(self.block_name(b) for b in op.successors) + "]")
        props, attrs = split_properties(op)
        if props:
            self.write(" <" + self._format_attr_dict(props, ()) + ">")
        if op.regions:
            self.write(" (")
            self._default_dialect.append("")
            for i, r in enumerate(op.regions):
                if i:
                    self.write(", ")
                self.print_region(r, print_entry_block_args=True, print_empty_block=True)
            self._default_dialect.pop()
            self.write(")")
        text = self._format_attr_dict(attrs, ())
        if text:
            self.write(" " + text)
        self.write(" : ")
        self.print_function_type([v.type for v in op.operands], [r.type for r in op.results])
        self.short_types = saved_short

    # ------------------------------------------------------------------ top level
    def print_top(
        self, op: Operation, *, body_only: bool = False, default_dialect: str = ""
    ) -> str:
        return "".join(self.print_pieces(op, body_only=body_only, default_dialect=default_dialect))

    def print_pieces(
        self, op: Operation, *, body_only: bool = False, default_dialect: str = ""
    ) -> list[str]:
        """The printout as the pieces that make it up, in order: write them one by one to hold
        the text once (a join would hold it twice, and a text file's encoder a third time)."""
        self._names = SSANames(op, self.generic)
        if default_dialect:
            self._default_dialect.append(default_dialect)
        if self.debuginfo:
            # MLIR names aliases from a dummy printing pass: only what is printed gets one.
            self.aliases.collecting = True
            saved = len(self._out)
            self._print_body(op, body_only)
            del self._out[saved:]
            self._joined = min(self._joined, saved)
            self.aliases.assign()
        self._print_body(op, body_only)
        head, tail = self.aliases.render(self, all_after=body_only)
        self._names = None  # the name table goes before the caller writes the pieces
        out, self._out = self._out, []
        out.insert(0, head)
        out.append("\n")
        out.append(tail)
        return out

    def _print_body(self, op: Operation, body_only: bool) -> None:
        if body_only:
            first = True
            for region in op.regions:
                for block in region.blocks:
                    for child in block.ops:
                        if not first:
                            self.write("\n")
                        first = False
                        self.print_operation(child)
        else:
            self.print_operation(op)


def _format_printer() -> Callable:
    """format.print_with_format (imported on first use: format.py imports this module's users)."""
    global _PRINT_WITH_FORMAT
    if _PRINT_WITH_FORMAT is None:
        from tilegen.runtime.asm.format import print_with_format

        _PRINT_WITH_FORMAT = print_with_format
    return _PRINT_WITH_FORMAT


_PRINT_WITH_FORMAT: Optional[Callable] = None


def split_properties(op: Operation) -> tuple[dict, dict]:
    """(properties, discardable attributes) as the generic form prints them."""
    if op.opdef is None:
        return dict(op.properties), dict(op.attributes)
    inherent = op.opdef.attr_names | {"operandSegmentSizes", "resultSegmentSizes"}
    props = {k: v for k, v in op.attributes.items() if k in inherent}
    attrs = {k: v for k, v in op.attributes.items() if k not in inherent}
    props.update(op.properties)
    return props, attrs


def _is_elidable_terminator(op: Operation) -> bool:
    """A terminator (MLIR skips the block's last op when it has the IsTerminator trait)."""
    return op.opdef is not None and op.opdef.has_trait("Terminator")
