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
        self.failed = False
        #: The spec rule being run (``{custom: NAME, ...extra keys}`` for hooks).
        self.rule: dict = {}

    # ----- diagnostics
    def error(self, msg: str) -> Diagnostic:
        """Emit ``'cuda_tile.X' op MSG`` at the op's location."""
        return self.error_at(self.op.loc, msg)

    def error_at(self, loc: Optional[Location], msg: str, op_prefix: bool = True) -> Diagnostic:
        self.failed = True
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.error(text, loc or self.op.loc)

    def warning(self, msg: str, op_prefix: bool = True) -> Diagnostic:
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.warning(text, self.op.loc)

    def remark(self, msg: str, op_prefix: bool = True) -> Diagnostic:
        text = op_error_prefix(self.op.name) + msg if op_prefix else msg
        return self.diag.emit("remark", text, self.op.loc)

    # ----- named operands, results and attributes (segment-aware through the OpDef)
    def operands(self, name: str) -> list[Value]:
        return self.opdef.operand_group(self.op, name)

    def operand(self, name: str) -> Optional[Value]:
        group = self.operands(name)
        return group[0] if group else None

    def results(self, name: str) -> list[Value]:
        return self.opdef.result_group(self.op, name)

    def result(self, name: str) -> Optional[Value]:
        group = self.results(name)
        return group[0] if group else None

    def values(self, name: str) -> list[Value]:
        """The operand group or result group called ``name`` (operands searched first)."""
        if any(o.name == name for o in self.opdef.operands):
            return self.operands(name)
        if any(r.name == name for r in self.opdef.results):
            return self.results(name)
        raise KeyError(f"{self.op.name} has no operand or result named {name!r}")

    def types(self, name: str) -> list[Type]:
        return [v.type for v in self.values(name)]

    def type(self, name: str) -> Optional[Type]:
        vals = self.values(name)
        return vals[0].type if vals else None

    def attr(self, name: str) -> Optional[Attribute]:
        return self.op.attributes.get(name, self.op.properties.get(name))
