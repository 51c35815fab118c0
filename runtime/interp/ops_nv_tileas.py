"""Hand-written nv_tileas async ops (spec/ops/nv_tileas/pipeline.yaml; docs/pipelines.md).

The interpreter is sequential, so it gives the pipeline ops their meaning with unbounded
buffering: a pipeline keeps every committed stage, keyed by its position (the number of
``inc_iter`` steps from the start), until a consumer releases it; the ring of ``stages`` buffers
and its phases are the hardware's way of bounding that queue and do not change what a program
computes. Agents run one after the other in program order, so a producer agent placed before
its consumers never blocks. What the interpreter rejects is what no schedule could run: a
consumer waiting for a position no producer committed before it, a position written twice,
a stage read or released twice, a token used with another position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilegen.runtime.interp import mma as mma_mod
from tilegen.runtime.interp.executor import HANDLERS, Frame, Signal, attr, group
from tilegen.runtime.interp.values import TOKEN, InterpError, compute_dtype, element_of

PIPE = "nv_tileas.async.pipeline."


def tileas(*names: str):
    """Register a handler for ``nv_tileas.<name>``."""

    def deco(fn):
        for n in names:
            HANDLERS["nv_tileas." + n] = fn
        return fn

    return deco


@dataclass
class PipelineState:
    stages: int
    #: position -> payload values of a written stage
    data: dict = field(default_factory=dict)
    committed: set = field(default_factory=set)
    written: set = field(default_factory=set)


@dataclass(frozen=True)
class IteratorValue:
    position: int = 0
    step: int = 1


@dataclass(frozen=True)
class StageToken:
    position: int


@tileas("async.pipeline.create_pipeline")
def _create_pipeline(f: Frame, op):
    return [PipelineState(op.results[0].type.stages)]


@tileas("async.pipeline.create_iterator")
def _create_iterator(f: Frame, op):
    return [IteratorValue()]


@tileas("async.pipeline.inc_iter")
def _inc_iter(f: Frame, op):
    it = f.get(op.operands[0])
    return [IteratorValue(it.position + it.step, it.step)]


@tileas("async.pipeline.reduce_stages")
def _reduce_stages(f: Frame, op):
    it = f.get(op.operands[0])
    return [IteratorValue(it.position, it.step * attr(op, "factor"))]


def _stage(f: Frame, op) -> tuple[PipelineState, int]:
    return f.get(op.operands[0]), f.get(op.operands[1]).position


def _check_token(f: Frame, op, pos: int) -> None:
    tok = f.get(op.operands[2])
    if tok.position != pos:
        raise InterpError(f"token of stage position {tok.position} used at position {pos}")


@tileas("async.pipeline.producer_acquire")
def _acquire(f: Frame, op):
    pipe, pos = _stage(f, op)
    if pos in pipe.written:
        raise InterpError(f"stage position {pos} is acquired for writing twice")
    pipe.written.add(pos)
    return [StageToken(pos)]


@tileas("async.pipeline.producer_write")
def _write(f: Frame, op):
    pipe, pos = _stage(f, op)
    _check_token(f, op, pos)
    sig = f.run_region(op.regions[0], [])
    if sig.kind != "yield":
        return sig
    pipe.data[pos] = list(sig.values)
    return []


@tileas("async.pipeline.producer_commit")
def _commit(f: Frame, op):
    pipe, pos = _stage(f, op)
    _check_token(f, op, pos)
    if pos not in pipe.data:
        raise InterpError(f"stage position {pos} is committed but was never written")
    pipe.committed.add(pos)
    return []


@tileas("async.pipeline.consumer_wait")
def _wait(f: Frame, op):
    pipe, pos = _stage(f, op)
    if pos not in pipe.committed:
        raise InterpError(
            f"consumer waits for stage position {pos}, which no producer committed before it "
            "(agents run in program order here: producers first)"
        )
    return [StageToken(pos)]


@tileas("async.pipeline.consumer_read")
def _read(f: Frame, op):
    pipe, pos = _stage(f, op)
    _check_token(f, op, pos)
    if pos not in pipe.data:
        raise InterpError(f"stage position {pos} is read after its release")
    return list(pipe.data[pos])


@tileas("async.pipeline.consumer_release")
def _release(f: Frame, op):
    pipe, pos = _stage(f, op)
    _check_token(f, op, pos)
    if pos not in pipe.data:
        raise InterpError(f"stage position {pos} is released twice")
    del pipe.data[pos]
    pipe.committed.discard(pos)
    return []


@tileas("async.pipeline.agent_switch", "async.pipeline.agent")
def _agents(f: Frame, op):
    sig = f.run_region(op.regions[0], [])
    return sig if sig.kind != "yield" else list(sig.values)


@tileas("async.pipeline.yield")
def _yield(f: Frame, op):
    return Signal("yield", [f.get(v) for v in op.operands])


@tileas("async.dot")
def _async_dot(f: Frame, op):
    args = [f.get(v) for v in op.operands]
    types = [element_of(v.type) for v in op.operands[:3]]
    scales = [f.get(v) for v in group(op, "sfa") + group(op, "sfb")]
    signs = (attr(op, "signedness_a"), attr(op, "signedness_b"))
    return [mma_mod.dot(*args[:3], types, signs, scales or None), TOKEN]


@tileas("async.wait")
def _async_wait(f: Frame, op):
    return []


@tileas("cluster_cta_rank")
def _cluster_cta_rank(f: Frame, op):
    """The rank of the CTA this frame runs (``run_kernel`` runs a tile block once per CTA of
    its cluster)."""
    return [np.array(f.cluster_rank, dtype=compute_dtype(op.results[0].type))]
