"""MLIR-syntax printer: the Python counterpart of MLIR's OpAsmPrinter.

Prints what ``cuda-tile-opt`` prints: custom syntax (declarative formats via ``format.py``,
custom hooks via ``custom_ops.PRINTERS``) or the generic form, SSA names numbered as MLIR's
SSANameState does (breadth-first per region, name hints with ``_N`` conflict suffixes, result
groups ``%0:2`` / ``%0#1``), and with ``debuginfo`` locations as ``loc(#locN)`` aliases.
"""

from __future__ import annotations

import codecs
import zlib
from typing import Callable, Iterable, Iterator, Optional

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
#: Characters of text a spooled printout gives back at a time
_PIECE = 1 << 18


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


class _RegionState:
    """What numbering one region leaves behind: the counters after its values (where the
    regions nested in it start), its name scope, and the table entries it made."""

    __slots__ = ("next_value", "next_arg", "next_conflict", "scope", "owned", "complete")

    def __init__(self, outer: Optional["_RegionState"]):
        if outer is None:
            self.next_value = self.next_arg = self.next_conflict = 0
            self.scope = _NameScope(None)
        else:
            self.next_value = outer.next_value
            self.next_arg = outer.next_arg
            self.next_conflict = outer.next_conflict
            self.scope = _NameScope(outer.scope)
        #: values whose entries this region's numbering made (dropped with the region)
        self.owned: list[Value] = []
        #: every ``%N`` result of the region has its entry (see SSANames._complete)
        self.complete = False


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
    """Value and block names for everything nested under one op (MLIR's SSANameState).

    MLIR numbers a region's block arguments and results, then each region nested in it,
    starting from the counters the enclosing region ended with. ``SSANames(top, generic)``
    numbers everything up front. The printer passes ``lazy=True`` and numbers as it prints, so
    that the table holds the values still to be printed rather than every value:

    * a region is numbered (block names, names from the hooks, block arguments, and the
      counters its nested regions start from) when it is entered (:meth:`enter`) or when a name
      in it is first asked for; its entries go when it has been printed (:meth:`leave`);
    * a result printed as ``%N`` gets its entry when the printer reaches its op
      (:meth:`OpPrinter._print_ops`) and loses it once its uses have been printed.

    A name asked for out of that order (a use before its definition in a graph region or an
    earlier block, or a name asked for again after its last use) numbers the rest of its
    region at once (:meth:`_complete`): the names are always those of the up-front numbering.
    """

    def __init__(self, top: Operation, generic: bool, lazy: bool = False):
        self.generic = generic
        #: value -> its number N (printed ``%N``) or its whole name (``%arg0``, ``%cst``): the
        #: group leader or single value, keyed by the Value object itself (values hash by
        #: identity). A number costs an int where ``"%N"`` cost a 55-byte string.
        self.ids: dict[Value, "int | str"] = {}
        self.groups: dict[int, list[int]] = {}  # id(op) -> sorted result group starts
        self.block_ids: dict[int, str] = {}
        #: id(block) -> the number of the first result its ops define
        self.block_start: dict[int, int] = {}
        #: value -> its uses not yet printed, for the ``%N`` entries the printer made
        self.live: dict[Value, int] = {}
        self._top = top
        self._states: dict[Region, _RegionState] = {}
        self._result_names, self._arg_names = _name_hooks() if not generic else ({}, {})
        if not lazy:
            stack = list(top.regions)
            while stack:
                region = stack.pop()
                self._complete(region, self._state(region))
                for block in region.blocks:
                    for op in block.ops:
                        stack.extend(op.regions)

    # ------------------------------------------------------------------ numbering
    def enter(self, region: Region) -> Optional[_RegionState]:
        """Number ``region`` (if not yet done) before its blocks are printed."""
        return self._state(region)

    def leave(self, region: Region) -> None:
        """``region`` is printed: drop its entries (asked for again, they are made again)."""
        st = self._states.pop(region, None)
        if st is not None:
            ids = self.ids
            for v in st.owned:
                ids.pop(v, None)

    def _state(self, region: Region) -> Optional[_RegionState]:
        """The numbering of ``region`` and of the regions around it (made now if needed), or
        None for a region outside the top op."""
        st = self._states.get(region)
        if st is not None:
            return st
        path = [region]
        while True:
            op = path[-1].parent
            if op is None:
                return None
            if op is self._top:
                break
            block = op.parent
            outer = block.parent if block is not None else None
            if outer is None:
                return None
            st = self._states.get(outer)
            if st is not None:
                break
            path.append(outer)
        for r in reversed(path):
            st = self._number_region(r, st)
        return st

    def _unique(self, st: _RegionState, name: str) -> str:
        name = sanitize_identifier(name)
        scope = st.scope
        if name in scope:
            while True:
                probe = f"{name}_{st.next_conflict}"
                st.next_conflict += 1
                if probe not in scope:
                    name = probe
                    break
        scope.names.add(name)
        return name

    def _number_region(self, region: Region, outer: Optional[_RegionState]) -> _RegionState:
        """Name ``region``'s blocks, block arguments and hook-named results, and count the
        results printed as ``%N`` (their entries come later: :meth:`_complete`)."""
        st = self._states[region] = _RegionState(outer)
        ids, owned = self.ids, st.owned
        preset: set[int] = set()
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
                    if name and id(arg) not in preset:
                        ids[arg] = "%" + self._unique(st, name)
                        owned.append(arg)
                        preset.add(id(arg))
        result_names = self._result_names
        for bi, block in enumerate(region.blocks):
            self.block_ids[id(block)] = f"^bb{bi}"
            for arg in block.args:
                if preset and id(arg) in preset:
                    continue
                if bi == 0:
                    ids[arg] = f"%arg{st.next_arg}"
                    st.next_arg += 1
                else:
                    ids[arg] = st.next_value
                    st.next_value += 1
                owned.append(arg)
            n = self.block_start[id(block)] = st.next_value
            for op in block.ops:
                r = op._results  # the result itself, or a tuple (ir.Operation.results)
                if r.__class__ is tuple and not r:
                    continue
                hook = result_names.get(op.name)
                if hook is None:
                    n += 1
                    continue
                results = op.results
                try:
                    names = hook(op) or []
                except Exception:
                    names = []
                groups = [0]
                numbered = True
                for i, name in enumerate(names[: len(results)]):
                    if name:
                        v = results[i]
                        ids[v] = "%" + self._unique(st, name)
                        owned.append(v)
                        if i:
                            groups.append(i)
                        else:
                            numbered = False
                if numbered:
                    n += 1
                if len(groups) > 1:
                    self.groups[id(op)] = sorted(groups)
            st.next_value = n
        return st

    def _complete(self, region: Region, st: Optional[_RegionState]) -> None:
        """Give every ``%N`` result of ``region`` its entry, kept until the region is left."""
        if st is None or st.complete:
            return
        st.complete = True
        ids, live, owned, starts = self.ids, self.live, st.owned, self.block_start
        for block in region.blocks:
            n = starts.get(id(block), 0)
            for op in block.ops:
                r0 = op._results  # the result itself, or a tuple (ir.Operation.results)
                if r0.__class__ is tuple:
                    if not r0:
                        continue
                    r0 = r0[0]
                e = ids.get(r0)
                if e is None:
                    ids[r0] = n
                    owned.append(r0)
                    n += 1
                elif e.__class__ is int:
                    if live.pop(r0, None) is not None:
                        owned.append(r0)
                    n = e + 1

    # ------------------------------------------------------------------ lookup
    def lookup(self, v: Value) -> "int | str":
        """``v``'s entry (number or name), made now if needed; the unknown-value text for a
        value defined outside the top op."""
        e = self.ids.get(v)
        if e is not None:
            return e
        block = v.op.parent if isinstance(v, OpResult) else getattr(v, "block", None)
        region = block.parent if block is not None else None
        st = self._state(region) if region is not None else None
        if st is None:
            self.ids[v] = _UNKNOWN
            return _UNKNOWN
        e = self.ids.get(v)
        if e is None:
            self._complete(region, st)
            e = self.ids.get(v)
        return _UNKNOWN if e is None else e

    def _groups(self, op: Operation) -> list[int]:
        block = op.parent
        if block is not None and block.parent is not None:
            self._state(block.parent)  # the hooks that split results into groups have run
        return self.groups.get(id(op), [0])

    def name(self, v: Value) -> str:
        """``%name``, ``%N`` or ``%N#k`` for a result inside a group."""
        if isinstance(v, OpResult) and v.op._results.__class__ is tuple:
            # MLIR prints '#k' whenever the value's result group has more than one member.
            op = v.op
            starts = self._groups(op)
            i = len([s for s in starts if s <= v.index]) - 1
            start = starts[i]
            end = starts[i + 1] if i + 1 < len(starts) else len(op.results)
            leader = _text(self.lookup(op.results[start]))
            return leader if end - start == 1 else f"{leader}#{v.index - start}"
        e = self.ids.get(v)
        return _text(e if e is not None else self.lookup(v))

    def result_groups(self, op: Operation) -> list[tuple[int, int]]:
        """(start, count) of each result group of ``op``."""
        n = len(op.results)
        starts = self._groups(op)
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
        #: the pieces written and not yet spooled (cleared in place: format.py holds it)
        self._out: list[str] = []
        #: _out[:_joined] holds no run of pieces worth joining (see _join_tail)
        self._joined = 0
        #: where finished text goes as it is printed (print_spooled), and how many pieces
        #: went there (``mark()`` counts them)
        self._spool: Optional[_Spool] = None
        self._spooled = 0
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
        return self._spool.last_char if self._spool is not None else ""

    def mark(self) -> int:
        """The position after what is written so far, for :meth:`rollback`."""
        return self._spooled + len(self._out)

    def rollback(self, mark: int) -> None:
        """Take back what was written since ``mark`` (a hook abandoning its custom syntax)."""
        i = mark - self._spooled
        if i < 0:  # already spooled: print_spooled starts over, holding the text in memory
            raise _Spooled
        del self._out[i:]

    def unwrite(self) -> None:
        """Take back the last piece written (the op name, when a hook prints the op in the
        generic form instead)."""
        if not self._out:
            raise _Spooled
        self._out.pop()

    def _spill(self) -> None:
        """Send the pieces written so far to the spool (text that nothing can take back)."""
        out = self._out
        self._spooled += len(out)
        self._spool.write("".join(out))
        del out[:]
        self._joined = 0

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
        elif (vs.__class__ is list or vs.__class__ is tuple) and len(vs) == 1:
            v = vs[0]
            e = names.ids.get(v)
            if e is None or (v.__class__ is OpResult and v.op._results.__class__ is tuple):
                self._out.append(names.name(v))  # not numbered yet, or in a result group
            else:
                self._out.append(e if e.__class__ is str else f"%{e}")
        else:
            name = names.name
            self.write(sep.join([name(v) for v in vs]))

    def block_name(self, b: Block) -> str:
        names = self._names
        text = names.block_ids.get(id(b))
        if text is None:
            if b.parent is not None:
                names.enter(b.parent)  # a block of a region not printed yet
            text = names.block_ids.get(id(b), "^INVALIDBLOCK")
        return text

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
        if not attrs or _all_elided(attrs, elided):
            return
        text = self._format_attr_dict(attrs, set(elided))
        if text:
            self.write(" " + text)

    def print_optional_attr_dict_with_keyword(self, op_or_attrs, elided=()) -> None:
        attrs = op_or_attrs.attributes if isinstance(op_or_attrs, Operation) else op_or_attrs
        if not attrs or _all_elided(attrs, elided):
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
        names = self._names
        st = names.enter(region) if names is not None else None
        if blocks:
            entry = blocks[0]
            print_label = (print_entry_block_args and entry.args) or (
                print_empty_block and not entry.ops
            )
            last = len(blocks) - 1
            for bi, block in enumerate(blocks):
                if bi > 0 or print_label:
                    self._print_block_header(block, print_entry_block_args or bi > 0)
                ops = block.ops
                elide = (
                    not print_block_terminators
                    and bi == last
                    and ops
                    and _is_elidable_terminator(ops[-1])
                )
                self._print_ops(block, st, _newline(self._indent), False, elide)
        if names is not None:
            names.leave(region)
        self._indent -= 1
        self.short_types = saved_short
        if pushed:
            self._default_dialect.pop()
        self.newline()
        self.write("}")

    def _print_ops(
        self, block: Block, st: Optional[_RegionState], sep: str, first: bool, elide: bool
    ) -> None:
        """The ops of ``block``, each after ``sep`` (but the first when ``first``), without
        the last when ``elide``. Numbers each ``%N`` result as its op comes, and drops a
        number once the ops using it are printed (:class:`SSANames`)."""
        out = self._out
        if st is not None:
            names = self._names
            ids, live = names.ids, names.live
            n = names.block_start.get(id(block), 0)
            keep = st.complete
        else:  # no numbering (a region outside the printed op): names print as unknown
            ids, live, n, keep = {}, {}, 0, True
        spool = self._spool is not None
        mark = 0 if spool else len(out)
        ops = block.ops
        stop = len(ops) - 1 if elide else len(ops)
        for i, child in enumerate(ops):
            dead = None
            r0 = child._results  # the result itself, or a tuple (ir.Operation.results)
            group = r0.__class__ is tuple
            if group:
                r0 = r0[0] if r0 else None
            if r0 is not None and st is not None:
                e = ids.get(r0)
                if e is None:
                    ids[r0] = n
                    n += 1
                    if group:
                        st.owned.append(r0)  # the group's members print with it: kept
                    else:
                        users = r0._users
                        if not users:
                            dead = r0
                        else:
                            live[r0] = len(users) if users.__class__ is list else 1
                elif e.__class__ is int:
                    n = e + 1
            if i < stop:
                if first:
                    first = False
                else:
                    out.append(sep)
                self.print_operation(child)
                if len(out) - mark >= _CHUNK:
                    if spool:
                        self._spill()
                    else:
                        self._join_tail(mark)
            for v in child.operands:
                left = live.get(v)
                if left is not None:
                    if left > 1:
                        live[v] = left - 1
                    else:
                        del live[v]
                        ids.pop(v, None)
            if dead is not None and not (keep or st.complete):
                ids.pop(dead, None)

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
        results = op._results  # the result itself, or a tuple (ir.Operation.results)
        if results.__class__ is not tuple or results:
            names = self._names
            if results.__class__ is not tuple:
                e = names.ids.get(results)
                self._out.append(_text(e if e is not None else names.lookup(results)))
            else:
                parts = []
                for start, count in names.result_groups(op):
                    text = _text(names.lookup(results[start]))
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
        head, out, tail = self._print(op, body_only, default_dialect)
        out.insert(0, head)
        out.append("\n")
        out.append(tail)
        return out

    def print_spooled(
        self, op: Operation, *, body_only: bool = False, default_dialect: str = ""
    ) -> "Printout":
        """The printout, its finished text compressed in memory as it is printed (about a
        tenth of its size) rather than held as pieces. Raises :class:`_Spooled` when a hook
        takes back text already spooled (malformed IR): see :func:`print_spooled`."""
        self._spool = _Spool()
        head, out, tail = self._print(op, body_only, default_dialect)
        out.append("\n")
        out.append(tail)
        return Printout(head, self._spool, out)

    def _print(self, op: Operation, body_only: bool, default_dialect: str):
        """(alias definitions, the pieces not spooled, deferred alias definitions)."""
        if default_dialect:
            self._default_dialect.append(default_dialect)
        if self.debuginfo:
            # MLIR names aliases from a dummy printing pass: only what is printed gets one.
            self.aliases.collecting = True
            spool = self._spool
            if spool is not None:
                self._spool = _Spool(keep=False)
            self._names = SSANames(op, self.generic, lazy=True)
            self._print_body(op, body_only)
            del self._out[:]
            self._spool, self._spooled, self._joined = spool, 0, 0
            self.aliases.assign()
        self._names = SSANames(op, self.generic, lazy=True)
        self._print_body(op, body_only)
        head, tail = self.aliases.render(self, all_after=body_only)
        self._names = None  # the name table goes before the caller writes the pieces
        out, self._out = self._out, []
        return head, out, tail

    def _print_body(self, op: Operation, body_only: bool) -> None:
        if body_only:
            names = self._names
            first = True
            for region in op.regions:
                st = names.enter(region)
                for block in region.blocks:
                    if block.ops:
                        self._print_ops(block, st, "\n", first, False)
                        first = False
                names.leave(region)
        else:
            self.print_operation(op)


class _Spooled(Exception):
    """A hook took back text that was already spooled (see OpPrinter.rollback)."""


class _Spool:
    """Printed text, compressed as it comes, given back in pieces by iterating. zlib's fastest
    level with a 4 KB window and a smaller hash: printouts are repetitive (100,000 ops: 4.4 MB
    of text in 0.44 MB, plus 0.1 MB of zlib state, where the defaults take 0.5 + 0.3 MB)."""

    __slots__ = ("_zip", "_chunks", "last_char")

    def __init__(self, keep: bool = True):
        #: the compressed text (``keep=False``: thrown away, as in the alias-collecting pass)
        self._chunks: list[bytes] = []
        self._zip = zlib.compressobj(1, zlib.DEFLATED, 12, 6) if keep else None
        self.last_char = ""

    def write(self, text: str) -> None:
        if text:
            self.last_char = text[-1]
            if self._zip is not None:
                data = self._zip.compress(text.encode("utf-8", "surrogatepass"))
                if data:
                    self._chunks.append(data)

    def close(self) -> None:
        if self._zip is not None:
            self._chunks.append(self._zip.flush())
            self._zip = None

    def __iter__(self) -> Iterator[str]:
        self.close()
        unzip = zlib.decompressobj()
        decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        for data in self._chunks:
            while data:
                text = decoder.decode(unzip.decompress(data, _PIECE))
                if text:
                    yield text
                data = unzip.unconsumed_tail
        text = decoder.decode(unzip.flush(), final=True)
        if text:
            yield text


class Printout:
    """A printout from :func:`print_spooled`: iterate over it for its text, in pieces."""

    def __init__(self, head: str, spool: Optional[_Spool], pieces: list[str]):
        self._head, self._spool, self._pieces = head, spool, pieces

    def __iter__(self) -> Iterator[str]:
        if self._head:
            yield self._head
        if self._spool is not None:
            yield from self._spool
        yield from self._pieces

    @property
    def last_char(self) -> str:
        for s in reversed(self._pieces):
            if s:
                return s[-1]
        if self._spool is not None and self._spool.last_char:
            return self._spool.last_char
        return self._head[-1:]

    def append(self, text: str) -> None:
        self._pieces.append(text)


def print_spooled(
    op: Operation,
    *,
    generic: bool = False,
    debuginfo: bool = False,
    body_only: bool = False,
    default_dialect: str = "",
    alias_mnemonics: bool = False,
) -> Printout:
    """``print_module``'s text, held compressed while the module is printed (for a writer
    that writes it out piece by piece). The same text as ``print_module``: when a hook takes
    back text already spooled (malformed IR it falls back to the generic form for), the module
    is printed again with every piece held in memory."""
    from tilegen.runtime.limits import deep_stack

    def printer() -> OpPrinter:
        return OpPrinter(generic=generic, debuginfo=debuginfo, alias_mnemonics=alias_mnemonics)

    kw = {"body_only": body_only, "default_dialect": default_dialect}
    try:
        return deep_stack(printer().print_spooled, op, **kw)
    except _Spooled:
        head, out, tail = deep_stack(printer()._print, op, body_only, default_dialect)
        out.append("\n")
        out.append(tail)
        return Printout(head, None, out)


def _all_elided(attrs, elided) -> bool:
    """Whether every attribute is in ``elided`` (most ops: the format prints them all)."""
    if not elided:
        return False
    for name in attrs:
        if name not in elided:
            return False
    return True


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
