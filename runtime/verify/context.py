"""The per-op view handed to verifier rules and hooks: operand access and located diagnostics."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import Attribute, Location
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticEngine, op_error_prefix
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.opdef import OpDef
from tilegen.runtime.records import dataclass
from tilegen.runtime.types import Type


@dataclass(frozen=True)
class VerifyOptions:
    """cuda-tile-opt's hint-verification flags (``-Wunsupported-hints`` / ``-Werr-hints``)."""

    unsupported_hints: bool = False
    err_hints: bool = False


class OpInfo:
    """Facts about one OpDef the verifier needs for every op of it, computed once.

    ``groups``: operand/result group name -> (``"operand"`` or ``"result"``, index of its def);
    ``simple_operands`` / ``simple_results``: every group is a single value (group ``i`` is
    ``values[i:i + 1]``, no segment computation needed); ``variadic``: names of variadic groups;
    ``required``: attributes that must be present, sorted by name (MLIR's check order);
    ``attr_names``: every declared attribute; ``fixed_*`` / ``variadic_*``: the number of
    single groups and whether any group is variadic or optional (count traits).
    """

    __slots__ = (
        "opdef",
        "groups",
        "simple_operands",
        "simple_results",
        "variadic",
        "required",
        "attr_names",
        "fixed_operands",
        "variadic_operands",
        "fixed_results",
        "variadic_results",
    )

    def __init__(self, opdef: OpDef):
        self.opdef = opdef  # keeps the OpDef alive: the cache below is keyed by its id
        results: dict = {}
        for i, r in enumerate(opdef.results):
            results.setdefault(r.name, ("result", i))
        operands: dict = {}
        for i, o in enumerate(opdef.operands):
            operands.setdefault(o.name, ("operand", i))
        self.groups = {**results, **operands}  # operands win, as in VerifyContext.values
        self.simple_operands = all(d.kind == "single" for d in opdef.operands) and not (
            opdef.has_trait("AttrSizedOperandSegments") or opdef.has_trait("TrailingTokenOperand")
        )
        self.simple_results = all(d.kind == "single" for d in opdef.results)
        self.variadic = frozenset(
            d.name for d in (*opdef.operands, *opdef.results) if d.kind == "variadic"
        )
        self.attr_names = frozenset(a.name for a in opdef.attributes)
        self.fixed_operands = sum(1 for d in opdef.operands if d.kind == "single")
        self.variadic_operands = any(d.kind != "single" for d in opdef.operands)
        self.fixed_results = sum(1 for d in opdef.results if d.kind == "single")
        self.variadic_results = any(d.kind != "single" for d in opdef.results)
        self.required = tuple(
            a.name
            for a in sorted(opdef.attributes, key=lambda a: a.name)
            if not a.optional
            and a.default is None
            and not a.is_unit
            and not a.constraint.startswith(("DefaultValuedAttr", "OptionalAttr"))
        )


_INFO: dict[int, OpInfo] = {}


def op_info(opdef: OpDef) -> OpInfo:
    """The (cached) :class:`OpInfo` of ``opdef``."""
    info = _INFO.get(id(opdef))
    if info is None or info.opdef is not opdef:
        info = _INFO[id(opdef)] = OpInfo(opdef)
    return info


def _sized(op: Operation, attr: str) -> bool:
    return attr in op.attributes or attr in op.properties


class VerifyContext:
    """What a rule or hook sees while verifying one op.

    Diagnostics go to the shared :class:`DiagnosticEngine`; ``failed`` becomes True once an
    error was emitted for this op, which stops the remaining checks of the op.
    """

    def __init__(
        self,
        op: Operation,
        diag: DiagnosticEngine,
        options: Optional[VerifyOptions] = None,
        opdef: Optional[OpDef] = None,
    ):
        self.op = op
        self.diag = diag
        self.options = options or VerifyOptions()
        self.opdef = opdef if opdef is not None else op.opdef
        self._info: Optional[OpInfo] = None
        self.failed = False
        #: Diagnostics emitted through this context (errors, warnings and remarks alike).
        self.emitted = 0
        #: The spec rule being run (``{custom: NAME, ...extra keys}`` for hooks).
        self.rule: dict = {}

    @property
    def info(self) -> OpInfo:
        """The :class:`OpInfo` of the op's definition."""
        info = self._info
        if info is None or info.opdef is not self.opdef:
            info = self._info = op_info(self.opdef)
        return info

    # ----- diagnostics
    def error(self, msg: str) -> Diagnostic:
        """Emit ``'cuda_tile.X' op MSG`` at the op's location."""
        return self.error_at(self.op.loc, msg)

    def error_at(self, loc: Optional[Location], msg: str, op_prefix: bool = True) -> Diagnostic:
        self.failed = True
        self.emitted += 1
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.error(text, loc or self.op.loc)

    def warning(self, msg: str, op_prefix: bool = True) -> Diagnostic:
        self.emitted += 1
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.warning(text, self.op.loc)

    def remark(self, msg: str, op_prefix: bool = True) -> Diagnostic:
        self.emitted += 1
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.emit("remark", text, self.op.loc)

    # ----- named operands, results and attributes (segment-aware through the OpDef)
    def operands(self, name: str) -> list[Value]:
        got = self._direct(name, "operand")
        return got if got is not None else self.opdef.operand_group(self.op, name)

    def operand(self, name: str) -> Optional[Value]:
        group = self.operands(name)
        return group[0] if group else None

    def results(self, name: str) -> list[Value]:
        got = self._direct(name, "result")
        return got if got is not None else self.opdef.result_group(self.op, name)

    def _direct(self, name: str, kind: str) -> Optional[list[Value]]:
        """Group ``name`` of ``kind`` (operand / result) read straight off the op when every
        group of that kind is one value and no segment sizes say otherwise; else None."""
        info, op = self.info, self.op
        if kind == "operand":
            simple, values, sizes = info.simple_operands, op.operands, "operandSegmentSizes"
        else:
            simple, values, sizes = info.simple_results, op.results, "resultSegmentSizes"
        if not simple or _sized(op, sizes):
            return None
        where = info.groups.get(name)
        if where is None or where[0] != kind:
            return None
        return values[where[1] : where[1] + 1]

    def result(self, name: str) -> Optional[Value]:
        group = self.results(name)
        return group[0] if group else None

    def values(self, name: str) -> list[Value]:
        """The operand group or result group called ``name`` (operands searched first)."""
        where = self.info.groups.get(name)
        if where is not None:
            return self.operands(name) if where[0] == "operand" else self.results(name)
        raise KeyError(f"{self.op.name} has no operand or result named {name!r}")

    def types(self, name: str) -> list[Type]:
        return [v.type for v in self.values(name)]

    def type(self, name: str) -> Optional[Type]:
        vals = self.values(name)
        return vals[0].type if vals else None

    def attr(self, name: str) -> Optional[Attribute]:
        return self.op.attributes.get(name, self.op.properties.get(name))
