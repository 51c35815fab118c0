"""The verifier walk: MLIR's OperationVerifier order, driven by OpDefs.

Per registered op (``verify_invariants``), in the order MLIR's ODS-generated code runs:

1. count traits: regions, results, operands (``expected 2 operands, but found 3``);
2. ``verifyInvariantsImpl``: attribute presence and constraints, operand then result type
   constraints, ODS predicate rules (``same_type`` ...), region constraints;
3. native traits in spec order (``SameOperandsAndResultShape`` ...);
4. the op's ``verify()``: declarative rules of the verify phase and ``{custom: NAME}`` hooks.

Then blocks and nested ops, then region hooks. The first failure stops the walk of the tree it
belongs to; ops isolated from above are verified independently (MLIR verifies them in parallel).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Block, BlockArgument, OpResult, Operation
from tilegen.runtime.verify import constraints, rules, traits
from tilegen.runtime.verify.context import VerifyContext, VerifyOptions
from tilegen.runtime.verify.types import format_type


class _Failed(Exception):
    """Unwinds the walk of one isolated tree after its first error."""


def verify_module(
    op: Operation, diag: DiagnosticEngine, options: Optional[VerifyOptions] = None
) -> bool:
    """Verify ``op`` and everything nested; return True when no error was emitted."""
    from tilegen.runtime.limits import deep_stack  # deeply nested IR (runtime/limits.py)

    before = sum(1 for d in diag.diagnostics if d.severity == "error")
    deep_stack(_Walker(diag, options or VerifyOptions()).verify_isolated, op)
    after = sum(1 for d in diag.diagnostics if d.severity == "error")
    return after == before


def verify_op(
    op: Operation, diag: DiagnosticEngine, options: Optional[VerifyOptions] = None
) -> bool:
    """Verify only ``op``'s own invariants (no regions); True when it passed."""
    ctx = VerifyContext(op, diag, options)
    if op.opdef is not None:
        verify_invariants(ctx)
    return not ctx.failed


def verify_invariants(ctx: VerifyContext) -> None:
    """Steps 1-4 of the module docstring for one registered op; stops at the first error."""
    for step in _STEPS:
        step(ctx)
        if ctx.failed:
            return


# --------------------------------------------------------------------------- invariants


def _verify_attributes(ctx: VerifyContext) -> None:
    op, opdef = ctx.op, ctx.opdef
    attrs, props = op.attributes, op.properties
    for name in ctx.info.required:
        if attrs.get(name, props.get(name)) is None:
            ctx.error(f"requires attribute '{name}'")
            return
    if not attrs and not props:
        return
    for a in opdef.attributes:
        value = attrs.get(a.name, props.get(a.name))
        if value is None:
            continue
        summary = constraints.check_attribute(a, value)
        if summary is not None:
            ctx.error(f"attribute '{a.name}' failed to satisfy constraint: {summary}")
            return


def _verify_value_constraints(ctx: VerifyContext) -> None:
    op, opdef = ctx.op, ctx.opdef
    info = ctx.info
    check_type = constraints.check_type
    for kind, defs, simple, values in (
        ("operand", opdef.operands, info.simple_operands, op.operands),
        ("result", opdef.results, info.simple_results, op.results),
    ):
        if simple and not _sized(op, kind):  # every group is one value: group i is values[i]
            for i, d in enumerate(defs[: len(values)]):
                t = values[i].type
                if not check_type(d.type, t):
                    _type_error(ctx, kind, d, i, t)
                    return
            continue
        segments = opdef.operand_segments(op) if kind == "operand" else opdef.result_segments(op)
        for d, (start, n) in zip(defs, segments):
            if d.kind == "optional" and n > 1:
                ctx.error(
                    f"{kind} group starting at #{start} requires 0 or 1 element, but found {n}"
                )
                return
            for i in range(start, min(start + n, len(values))):
                t = values[i].type
                if not check_type(d.type, t):
                    _type_error(ctx, kind, d, i, t)
                    return


def _sized(op: Operation, kind: str) -> bool:
    """Whether ``op`` carries a segment-size attribute for its operands / results."""
    attr = "operandSegmentSizes" if kind == "operand" else "resultSegmentSizes"
    return attr in op.attributes or attr in op.properties


def _type_error(ctx: VerifyContext, kind: str, d, i: int, t) -> None:
    summary = constraints.summary(d.type)
    if d.kind == "variadic":
        summary = "variadic of " + summary
    ctx.error(f"{kind} #{i} must be {summary}, but got '{format_type(t)}'")


def _verify_region_constraints(ctx: VerifyContext) -> None:
    for i, (rdef, region) in enumerate(zip(ctx.opdef.regions, ctx.op.regions)):
        summary = constraints.check_region(rdef.constraint, region)
        if summary is not None:
            ctx.error(f"region #{i} ('{rdef.name}') failed to verify constraint: {summary}")
            return


def _run_invariant_rules(ctx: VerifyContext) -> None:
    rules.run_phase(ctx, "invariants")


def _run_verify_rules(ctx: VerifyContext) -> None:
    rules.run_phase(ctx, "verify")


#: verify_invariants' steps, in MLIR's order
_STEPS = (
    traits.verify_counts,
    _verify_attributes,
    _verify_value_constraints,
    _run_invariant_rules,
    _verify_region_constraints,
    traits.verify_native_traits,
    _run_verify_rules,
)


def memoable(opdef) -> bool:
    """Whether the invariants (steps 1-4) of ``opdef``'s ops may be memoised within one walk.

    The walk keeps the key (:meth:`_Walker._memo_key`: the definition, operand and result
    types, attributes, properties and successor count) of every op whose invariants passed
    without emitting any diagnostic, and skips later ops with an equal key. That is sound only
    when nothing else can change the verdict, i.e. when the definition has

    * no regions (region contents, block structure and region hooks are never memoised);
    * no ``{custom: NAME}`` rule: hooks receive the op itself and may look anywhere;
    * only declarative rule kinds registered as op-local (``rules.LOCAL_RULE_KINDS``: they
      read the op's types, attributes and counts only);
    * only native traits known to read nothing but the op's types and attributes
      (``traits.LOCAL_TRAITS``; parent, block position and region checks are not).

    Failed verifications, and any that emitted a diagnostic (``fatal: false`` rules), are never
    memoised: each such op reports its own diagnostics. Ops with an unhashable attribute are
    verified every time. Decided once per OpDef and walk.
    """
    if opdef.regions:
        return False
    for entry in opdef.verify or ():
        if "custom" in entry or len(entry) != 1:
            return False
        ((kind, _args),) = entry.items()
        if kind not in rules.LOCAL_RULE_KINDS:
            return False
    return traits.local_traits_only(opdef)


# --------------------------------------------------------------------------- the walk


class _Walker:
    def __init__(self, diag: DiagnosticEngine, options: VerifyOptions):
        self.diag = diag
        self.options = options
        #: id(OpDef) -> whether ops of that definition may use the memo (see :func:`memoable`);
        #: the ops of the walked tree keep their OpDefs alive, so the ids stay unique.
        self._memoable: dict[int, bool] = {}
        #: memo keys (:meth:`_memo_key`) of ops whose invariants verified without a diagnostic
        self._passed: set = set()

    def verify_isolated(self, op: Operation) -> bool:
        """MLIR's verifyOpAndDominance: the op tree, then SSA dominance if that passed."""
        try:
            self._verify(op)
            self._verify_dominance(op, {})
        except _Failed:
            return False
        return True

    def _verify_dominance(self, root: Operation, chain: dict) -> None:
        """Every operand dominates its use (nested isolated ops are checked on their own).

        ``chain`` maps each block enclosing the ops being checked (from the isolated root down)
        to its ops already passed whose results have uses not yet checked, each with the number
        of those uses: a value defined in one of those blocks dominates the use when its
        defining op is there (MLIR's same-block order test on the ancestor of the user in that
        block). An op leaves once its last use is checked, so the map holds the values still
        in use, not every op of a long block. Anything else, an op no longer there included,
        goes through :func:`_dominates`.
        """
        graph = root.opdef is not None and root.opdef.has_trait("GraphRegionNoTerminator")
        positions: dict = {}  # id(block) -> {id(op): index}: one pass per block, not per use
        get = chain.get
        for region in root.regions:
            for block in region.blocks:
                seen: dict = {}
                chain[block] = seen
                for op in block.ops:
                    if not graph:
                        for i, v in enumerate(op.operands):
                            if v.__class__ is OpResult:
                                definer = v.op
                                before = get(definer.parent)
                                if before is not None:
                                    left = before.get(definer)
                                    if left is not None:
                                        if left > 1:
                                            before[definer] = left - 1
                                        else:
                                            del before[definer]
                                        continue
                                    if _dominates(v, op, positions):
                                        continue
                                elif _dominates(v, op, positions):
                                    continue
                            elif v.__class__ is BlockArgument and v.block in chain:
                                continue
                            elif _dominates(v, op, positions):
                                continue
                            d = self.diag.error(f"operand #{i} does not dominate this use", op.loc)
                            _dominance_note(d, v, op)
                            raise _Failed
                    if op.regions and not _isolated(op):
                        self._verify_dominance(op, chain)
                    res = op._results  # the one result, or a tuple (ir.Operation.results)
                    uses = 0
                    for r in res if res.__class__ is tuple else (res,):
                        users = r._users
                        if users:
                            uses += len(users) if users.__class__ is list else 1
                    if uses:
                        seen[op] = uses
                del chain[block]

    def _memo_key(self, op: Operation, opdef) -> Optional[tuple]:
        """What the invariants of a memoable op depend on: definition, operand and result
        types, attributes, properties and successor count (None: not memoable).

        Types are keyed by identity (the parser shares one object per distinct type, and
        hashing a type by value costs more than verifying it): equal types that are distinct
        objects only miss the memo. The walked IR keeps those objects alive for the whole walk
        (the verifier does not mutate it), so their ids cannot be reused meanwhile."""
        ok = self._memoable.get(id(opdef))
        if ok is None:
            ok = self._memoable[id(opdef)] = memoable(opdef)
        if not ok:
            return None
        attrs, props = op.attributes, op.properties
        res = op._results  # the one result, or a tuple (ir.Operation.results)
        return (
            id(opdef),
            tuple([id(v.type) for v in op.operands]),
            tuple([id(v.type) for v in res]) if res.__class__ is tuple else (id(res.type),),
            tuple(attrs.items()) if attrs else (),
            tuple(props.items()) if props else (),
            len(op.successors),
        )

    def _verify(self, op: Operation) -> None:
        opdef = op.opdef
        if not op.regions:
            if opdef is None:
                return
            key = self._memo_key(op, opdef)
            if key is not None:
                try:
                    if key in self._passed:
                        return
                except TypeError:  # an unhashable attribute: no memo for this op
                    key = None
            ctx = VerifyContext(op, self.diag, self.options, opdef)
            verify_invariants(ctx)
            if ctx.failed:
                raise _Failed
            if key is not None and not ctx.emitted:
                self._passed.add(key)
            return
        ctx = VerifyContext(op, self.diag, self.options, opdef)
        if opdef is not None:
            verify_invariants(ctx)
            if ctx.failed:
                raise _Failed
        for region in op.regions:
            for block in region.blocks:
                self._verify_block_entry(op, block)
                for child in block.ops:
                    if child.regions and _isolated(child):
                        continue
                    self._verify(child)
                self._verify_block_exit(op, block)
        failed = False
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    if child.regions and _isolated(child) and not self.verify_isolated(child):
                        failed = True
        if failed:
            raise _Failed
        if opdef is not None:
            traits.verify_region_traits(ctx)
            if not ctx.failed:
                rules.run_phase(ctx, "regions")
            if ctx.failed:
                raise _Failed

    def _verify_block_entry(self, op: Operation, block: Block) -> None:
        if not block.ops:
            if _may_lack_terminator(op, block):
                return
            self.diag.error("empty block: expect at least a terminator", op.loc)
            raise _Failed
        for child in block.ops[:-1]:
            if child.successors:
                self.diag.error(
                    "operation with block successors must terminate its parent block", child.loc
                )
                raise _Failed

    def _verify_block_exit(self, op: Operation, block: Block) -> None:
        if not block.ops or _may_lack_terminator(op, block):
            return
        last = block.ops[-1]
        if last.opdef is not None and not traits.is_terminator(last.opdef):
            self.diag.error(f"block with no terminator, has {_op_text(last)}", last.loc)
            raise _Failed


def _ancestor_in(block: Block, op: Optional[Operation]) -> Optional[Operation]:
    """``op`` or its closest ancestor whose parent block is ``block``."""
    while op is not None and op.parent is not block:
        op = op.parent_op
    return op


def _dominates(value, user: Operation, positions: Optional[dict] = None) -> bool:
    """Whether ``value`` dominates ``user``; ``positions`` caches each block's op order."""
    if isinstance(value, OpResult):
        definer = value.op
        block = definer.parent
        if block is None:
            return True
        anchor = _ancestor_in(block, user)
        if anchor is None or anchor is definer:
            return False
        if positions is None:
            positions = {}
        order = positions.get(id(block))
        if order is None:
            order = positions[id(block)] = {id(o): i for i, o in enumerate(block.ops)}
        return order[id(definer)] < order[id(anchor)]
    if isinstance(value, BlockArgument):
        return _ancestor_in(value.block, user) is not None
    return True


def _dominance_note(diag, value, user: Operation) -> None:
    if isinstance(value, OpResult):
        definer = value.op
        b1, b2 = user.parent, definer.parent
        r1, r2 = b1.parent if b1 else None, b2.parent if b2 else None
        if b1 is b2:
            where = "op in the same block"
        elif r1 is r2:
            where = "op in the same region"
        elif _ancestor_in(b2, user) is not None:
            where = "op in a parent region"
        elif _ancestor_in(b1, definer) is not None:
            where = "op in a child region"
        else:
            where = "op is neither in a parent nor in a child region"
        diag.attach_note(f"operand defined here ({where})", definer.loc)
    elif isinstance(value, BlockArgument):
        region = value.block.parent
        index = region.blocks.index(value.block) if region is not None else 0
        diag.attach_note(f"operand defined as a block argument (block #{index} in a child region)")


def _isolated(op: Operation) -> bool:
    return op.opdef is not None and op.opdef.has_trait("IsolatedFromAbove")


def _may_lack_terminator(op: Operation, block: Block) -> bool:
    region = block.parent
    if region is None:
        return True
    if len(region.blocks) != 1:
        return False
    return op.opdef is None or traits.no_terminator(op.opdef)


def _op_text(op: Operation) -> str:
    """The op in generic form, as MLIR prints it in 'block with no terminator' errors."""
    try:
        from tilegen.runtime.asm import print_module

        return print_module(op, generic=True).rstrip("\n")
    except Exception:  # the printer is optional for the verifier
        return f'"{op.name}"(...)'
