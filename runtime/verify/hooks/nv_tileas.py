"""Custom verifiers of the nv_tileas async layer (seed 001; spec/ops/nv_tileas/pipeline.yaml).

Seed 001's rules, each with its own message (tests/test_nv_tileas_async.py asserts every one):

* iterators agree with their pipeline on stage count, stride and payload; producer-side
  iterators live in the pipeline's memory space, consumer-side ones may move it (rule 1);
* a stage reduction's factor divides the iterator's stage count, and the result has
  ``count / factor`` stages (rule 2);
* an ``scf.if`` yields the same iterator type from both arms (rule 3);
* an ``scf.for`` carries an iterator unchanged through its iter-arg (rule 4);
* agents: warp counts agree within a ``num_agents_per_group`` group, the resolved counts fit
  the CTA's warps, register budgets are legal ``setmaxnreg`` values, fit the register file and
  come in whole warp groups.

Also the token discipline (a producer token committed once, a consumer token released once),
the payload of ``producer_write`` / ``consumer_read``, and the shared memory of a pipeline.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseArrayAttr, IntegerAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import (
    STORAGE_WIDTHS,
    FloatType,
    IntegerType,
    PipelineIteratorType,
    PipelineType,
    TileType,
    Type,
)
from tilegen.runtime.targets import shared_optin
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.nv_tileaa import target_compute_capability
from tilegen.runtime.verify.types import format_type

PREFIX = "nv_tileas.async.pipeline."
#: 32-bit registers of one SM (every target tilegen supports)
REGISTER_FILE = 65536
#: setmaxnreg's legal range (PTX ISA: multiples of 8 in [24, 256])
MAX_REGS_RANGE = (24, 256)
#: warps of one warp group (setmaxnreg acts on whole warp groups)
WARP_GROUP = 4
#: ``num_warps`` of an agent that inherits its warps
INHERIT = -1


def _t(t: Type) -> str:
    return format_type(t)


def _ts(types) -> str:
    return ", ".join(_t(t) for t in types)


def _int(a) -> Optional[int]:
    return a.value if isinstance(a, IntegerAttr) else None


def element_bytes(t: Type) -> float:
    """Bytes of one element (sub-byte types give fractions)."""
    if isinstance(t, FloatType):
        return STORAGE_WIDTHS[t.name] / 8
    if isinstance(t, IntegerType):
        return t.width / 8
    return 8.0


def payload_bytes(payload) -> int:
    """Bytes of one stage: every payload tile stored densely."""
    total = 0.0
    for t in payload:
        if isinstance(t, TileType):
            total += t.num_elements * element_bytes(t.element)
    return int(total + 0.999)


def same_tile(a: Type, b: Type) -> bool:
    """Equal shape and element type (layouts may differ: a stage buffer has its own)."""
    if isinstance(a, TileType) and isinstance(b, TileType):
        return a.shape == b.shape and a.element == b.element
    return a == b


def same_payload(a, b) -> bool:
    return len(a) == len(b) and all(same_tile(x, y) for x, y in zip(a, b))


# --------------------------------------------------------------------------- pipelines


@hook("nv_tileas_create_pipeline")
def _create_pipeline(op: Operation, ctx: VerifyContext) -> None:
    t = op.results[0].type
    if t.stages < 1:
        ctx.error(f"a pipeline needs at least one stage, but has {t.stages}")
        return
    if not t.payload:
        ctx.error("a pipeline needs at least one payload type")
        return
    for i, p in enumerate(t.payload):
        if not isinstance(p, TileType):
            ctx.error(f"payload #{i} must be a tile, but is {_t(p)}")
            return
    for name in ("producer_arrivals", "consumer_arrivals"):
        n = _int(ctx.attr(name))
        if n is not None and n < 1:
            ctx.error(f"'{name}' must be at least 1, but is {n}")
            return
    if t.space == "shared":
        cc = target_compute_capability(op)
        stage = payload_bytes(t.payload)
        limit = shared_optin(cc)
        if t.stages * stage > limit:
            target = f"sm_{cc}" if cc is not None else "the default target"
            ctx.error(
                f"pipeline stages need {t.stages * stage} bytes of shared memory ({t.stages} x "
                f"{stage}), more than the {limit} of {target}"
            )


def _iterator_matches(ctx: VerifyContext, pipe: PipelineType, it: PipelineIteratorType) -> bool:
    """Rule 1: an iterator keeps its pipeline's stage count, stride and payload."""
    if it.count != pipe.stages:
        ctx.error(f"iterator stage count {it.count} does not match the pipeline's {pipe.stages}")
        return False
    if it.stride != 1:
        ctx.error(f"iterator stride {it.stride} does not match the pipeline's stride 1")
        return False
    if not same_payload(it.payload, pipe.payload):
        ctx.error(
            f"iterator element types ({_ts(it.payload)}) do not match the pipeline payload "
            f"({_ts(pipe.payload)})"
        )
        return False
    if it.kind == "producer" and it.space != pipe.space:
        ctx.error(
            f"a producer iterator must stay in the pipeline's memory space ({pipe.space}), "
            f"but is in {it.space}"
        )
        return False
    return True


@hook("nv_tileas_create_iterator")
def _create_iterator(op: Operation, ctx: VerifyContext) -> None:
    _iterator_matches(ctx, op.operands[0].type, op.results[0].type)


@hook("nv_tileas_stage_access")
def _stage_access(op: Operation, ctx: VerifyContext) -> None:
    """acquire/write/commit take a producer iterator, wait/read/release a consumer one."""
    pipe, it = ctx.type("pipeline"), ctx.type("iterator")
    side = ctx.rule.get("side")
    if it.kind != side:
        ctx.error(f"expects a {side} iterator, but got a {it.kind} iterator")
        return
    _iterator_matches(ctx, pipe, it)


@hook("nv_tileas_token_once")
def _token_once(op: Operation, ctx: VerifyContext) -> None:
    """The stage token is handed back exactly once (by commit / release)."""
    closer = ctx.rule["by"]
    n = sum(1 for user, _ in op.results[0].uses if user.name == closer)
    if n != 1:
        what = closer[len(PREFIX) :]
        kind = "producer" if "producer" in closer else "consumer"
        ctx.error(f"{kind} token must reach exactly one {what}, but reaches {n}")


def _region_yield(op: Operation) -> Optional[Operation]:
    region = op.regions[0]
    if not region.blocks or not region.blocks[0].ops:
        return None
    last = region.blocks[0].ops[-1]
    return last if last.name == PREFIX + "yield" else None


@hook("nv_tileas_producer_write")
def _producer_write(op: Operation, ctx: VerifyContext) -> None:
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if body is not None and body.args:
        ctx.error(f"the producer region takes no arguments, but has {len(body.args)}")


@hook("nv_tileas_consumer_read")
def _consumer_read(op: Operation, ctx: VerifyContext) -> None:
    pipe = ctx.type("pipeline")
    got = [r.type for r in op.results]
    if len(got) != len(pipe.payload):
        ctx.error(f"reads {len(got)} values, but the pipeline payload has {len(pipe.payload)}")
        return
    for i, (g, w) in enumerate(zip(got, pipe.payload)):
        if not same_tile(g, w):
            ctx.error(f"result #{i} has type {_t(g)}, but pipeline payload #{i} is {_t(w)}")
            return


@hook("nv_tileas_reduce_stages")
def _reduce_stages(op: Operation, ctx: VerifyContext) -> None:
    """Rule 2: a reduction over stages divides the stage count by its factor."""
    it, res = op.operands[0].type, op.results[0].type
    factor = _int(ctx.attr("factor"))
    if factor is None or factor < 1:
        ctx.error(f"reduction factor must be positive, but is {factor}")
        return
    if it.count % factor:
        ctx.error(
            f"reduction factor {factor} does not divide the iterator's stage count {it.count}"
        )
        return
    want = PipelineIteratorType(it.kind, it.count // factor, it.space, it.payload, it.stride)
    if res != want:
        ctx.error(f"result must be {_t(want)} ({it.count} stages / {factor}), but is {_t(res)}")


# --------------------------------------------------------------------------- agents


def cta_num_warps(op: Operation) -> int:
    """The CTA's warps: ``nv_tileas.num_warps`` on the enclosing function (set by the pipeline
    pass when it adds warp groups), else its kernel_spec's / ``tt.num_warps``, else 4."""
    from tilegen.runtime.layouts.kernel import enclosing_int_attr, kernel_num_warps

    n = enclosing_int_attr(op, "nv_tileas.num_warps")
    if n is not None:
        return n
    func = op.parent_op
    while func is not None and func.name != "nv_tileaa.func":
        func = func.parent_op
    return kernel_num_warps(func) if func is not None else 4


def agents_of(switch: Operation) -> list[Operation]:
    body = switch.regions[0].blocks[0] if switch.regions[0].blocks else None
    return [o for o in (body.ops if body is not None else []) if o.name == PREFIX + "agent"]


def resolved_warps(switch: Operation, budget: int) -> tuple[list[int], Optional[str]]:
    """Each agent's warps, inheriting ones sharing what the explicit ones leave; or an error."""
    agents = agents_of(switch)
    counts = [_int(a.attributes.get("num_warps")) for a in agents]
    inherit = [i for i, n in enumerate(counts) if n == INHERIT]
    if inherit:
        left = budget - sum(n for n in counts if n != INHERIT)
        if left <= 0 or left % len(inherit):
            return counts, (
                f"{len(inherit)} agent(s) inheriting their warp count cannot share the {left} "
                f"warp(s) the other agents leave of the CTA's {budget}"
            )
        for i in inherit:
            counts[i] = left // len(inherit)
    return counts, None


@hook("nv_tileas_agent")
def _agent(op: Operation, ctx: VerifyContext) -> None:
    n = _int(ctx.attr("num_warps"))
    if n is None or (n < 1 and n != INHERIT):
        ctx.error(f"num_warps must be positive or -1 (inherit), but is {n}")
        return
    regs = _int(ctx.attr("max_regs"))
    lo, hi = MAX_REGS_RANGE
    if regs is not None and (regs % 8 or not lo <= regs <= hi):
        ctx.error(f"max_regs {regs} must be a multiple of 8 in [{lo}, {hi}] (setmaxnreg)")


@hook("nv_tileas_agent_switch", regions=True)
def _agent_switch(op: Operation, ctx: VerifyContext) -> None:
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    ops = body.ops if body is not None else []
    for o in ops[:-1]:
        if o.name != PREFIX + "agent":
            ctx.error(f"the region may only hold {PREFIX}agent ops, but holds '{o.name}'")
            return
    agents = agents_of(op)
    if not agents:
        ctx.error("needs at least one agent")
        return
    groups_attr = ctx.attr("num_agents_per_group")
    groups = [int(v) for v in groups_attr.values] if isinstance(groups_attr, DenseArrayAttr) else []
    for g in groups:
        if g <= 0:
            ctx.error(f"elements of num_agents_per_group must be greater than 0, but got {g}")
            return
    if groups and sum(groups) != len(agents):
        ctx.error(
            f"num_agents_per_group sums to {sum(groups)}, but the agent_switch has "
            f"{len(agents)} agents"
        )
        return
    budget = cta_num_warps(op)
    if budget < 1:  # (an attribute's value: the register budget below divides by it)
        ctx.error(f"the CTA must have at least one warp, but has {budget}")
        return
    counts, why = resolved_warps(op, budget)
    if why:
        ctx.error(why)
        return
    start = 0
    for gi, g in enumerate(groups):
        members = counts[start : start + g]
        if len(set(members)) > 1:
            ctx.error(
                f"agents of group #{gi} must agree on their warp count, but have "
                f"{', '.join(map(str, members))}"
            )
            return
        start += g
    if sum(counts) > budget:
        ctx.error(
            f"agents need {sum(counts)} warps ({' + '.join(map(str, counts))}), more than the "
            f"{budget} warps of the CTA"
        )
        return
    regs = [_int(a.attributes.get("max_regs")) for a in agents]
    if any(r is not None for r in regs):
        for i, (n, r) in enumerate(zip(counts, regs)):
            if n % WARP_GROUP:
                ctx.error(
                    f"agent #{i} has {n} warp(s); register budgets (setmaxnreg) need every agent "
                    f"to be whole warp groups of {WARP_GROUP} warps"
                )
                return
        default = REGISTER_FILE // (32 * budget)
        used = sum(n * 32 * (r if r is not None else default) for n, r in zip(counts, regs))
        if used > REGISTER_FILE:
            ctx.error(
                f"agents need {used} registers (max_regs x threads), more than the "
                f"{REGISTER_FILE} of an SM"
            )


@hook("nv_tileas_yield")
def _yield(op: Operation, ctx: VerifyContext) -> None:
    parent = op.parent_op
    got = [v.type for v in op.operands]
    if parent.name == PREFIX + "producer_write":
        want = list(parent.operands[0].type.payload)
        if not same_payload(got, want):
            ctx.error(
                f"the producer region yields ({_ts(got)}), but the pipeline payload is "
                f"({_ts(want)})"
            )
        return
    want = [r.type for r in parent.results]
    if got != want:
        ctx.error(
            f"operand types ({_ts(got)}) do not match the results of the parent "
            f"'{parent.name}' ({_ts(want)})"
        )


@hook("nv_tileas_async_wait")
def _async_wait(op: Operation, ctx: VerifyContext) -> None:
    n = _int(ctx.attr("num_pending"))
    if n is not None and n < 0:
        ctx.error(f"num_pending must be non-negative, but is {n}")


# --------------------------------------------------------------------------- control flow


@hook("nv_tileas_iterator_carry", regions=True)
def _iterator_carry(op: Operation, ctx: VerifyContext) -> None:
    """Rules 3 and 4 on the upstream scf ops: iterators merge only with equal iterators."""
    if op.name == "scf.if":
        if len(op.regions) < 2 or not op.regions[1].blocks:
            return
        then_y = op.regions[0].blocks[0].ops[-1] if op.regions[0].blocks else None
        else_y = op.regions[1].blocks[0].ops[-1]
        if then_y is None:
            return
        for i, r in enumerate(op.results):
            if not isinstance(r.type, PipelineIteratorType):
                continue
            a = then_y.operands[i].type if i < len(then_y.operands) else None
            b = else_y.operands[i].type if i < len(else_y.operands) else None
            if a != b or a != r.type:
                ctx.error(
                    f"pipeline iterator yields in then and else block must be the same, but "
                    f"result #{i} gets {_t(a) if a else 'nothing'} and {_t(b) if b else 'nothing'}"
                )
                return
    elif op.name == "scf.for":
        body = op.regions[0].blocks[0] if op.regions[0].blocks else None
        if body is None or not body.ops:
            return
        inits = op.operands[3:]
        yielded = body.ops[-1].operands
        for i, init in enumerate(inits):
            t = init.type
            if not isinstance(t, PipelineIteratorType):
                continue
            got = [
                x.type
                for x in (
                    body.args[i + 1] if i + 1 < len(body.args) else None,
                    yielded[i] if i < len(yielded) else None,
                    op.results[i] if i < len(op.results) else None,
                )
                if x is not None
            ]
            for g in got:
                if g != t:
                    ctx.error(
                        f"loop-carried pipeline iterator #{i} must stay unchanged, but "
                        f"{_t(t)} becomes {_t(g)}"
                    )
                    return
