"""The nv_tileas async layer (seed 001; spec/ops/nv_tileas/pipeline.yaml, docs/pipelines.md).

A small warp-specialized kernel (a producer agent filling a 3-stage pipeline with tiles, a
consumer agent summing them) parses, prints, re-parses, runs in the interpreter, and each
verifier rule of runtime/verify/hooks/nv_tileas.py is tripped by changing exactly one thing in
it, with the exact message asserted.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.diagnostics import DiagnosticError, DiagnosticEngine
from tilegen.runtime.interp.api import RunError, run_module
from tilegen.runtime.types import PipelineIteratorType, PipelineType
from tilegen.runtime.verify.engine import verify_module

P = "nv_tileas.async.pipeline."

BASE = {
    "cc": "90",
    "cta_warps": "nv_tileas.num_warps = 8 : i32",
    "stages": "3",
    "pspace": "shared",
    "ppayload": "tile<64x32xf16>",
    "pit_stages": "3",
    "pit_space": "shared",
    "cit": "consumer, stages = 3, register",
    "pipe_attrs": "{consumer_arrivals = 128 : i32}",
    "switch_attrs": "attributes {num_agents_per_group = array<i32: 1, 1>}",
    "pagent": "warps(4) regs(40)",
    "cagent": "warps(4) regs(232)",
    "acquire_kind": "!pit",
    "commit": f"{P}producer_commit %p[%it], %t : !pipe, !pit",
    "release": f"{P}consumer_release %p[%it], %t : !pipe, !cit",
    "write_yield": "%v : tile<64x32xf16>",
    "read_type": "tile<64x32xf16>",
    "extra": "",
    "prod_loop_yield": "%nx : !pit",
}

TEMPLATE = """
!pipe = !nv_tileas.async.pipeline<stages = {stages}, {pspace}, tile<64x32xf16>>
!pit = !nv_tileas.async.pipeline.iterator<producer, stages = {pit_stages}, {pit_space}, {ppayload}>
!cit = !nv_tileas.async.pipeline.iterator<{cit}, tile<64x32xf16>>
module attributes {{nv_tileaa.compute_capability = {cc} : i32}} {{
  nv_tileaa.func @k : (i32, !nv_tileaa.ptr<f32, 1>, i32, i32) -> () attributes {{kernel, {cta_warps}}} {{
  ^bb0(%n: i32, %out: !nv_tileaa.ptr<f32, 1>, %osize: i32, %ostride: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %p = {P}create_pipeline {pipe_attrs} : !pipe
    %r = {P}agent_switch -> tile<64x32xf32> {switch_attrs} {{
      {P}agent {pagent} {{
        %it0 = {P}create_iterator %p : !pipe -> !pit
        %itn = scf.for %k = %c0 to %n step %c1 iter_args(%it = %it0) -> (!pit)  : i32 {{
          %t = {P}producer_acquire %p[%it] : !pipe, {acquire_kind}
          {P}producer_write %p[%it], %t : !pipe, !pit {{
            %kf = arith.sitofp %k : i32 to f16
            %v = nv_tileaa.splat %kf : (f16) -> tile<64x32xf16>
            {P}yield {write_yield}
          }}
          {commit}
          %nx = {P}inc_iter %it : !pit
          scf.yield {prod_loop_yield}
        }}
        {P}yield
      }}
      %acc = {P}agent {cagent} -> tile<64x32xf32> {{
        %it0 = {P}create_iterator %p : !pipe -> !cit
        %z = arith.constant 0.000000e+00 : f32
        %zt = nv_tileaa.splat %z : (f32) -> tile<64x32xf32>
        %res:2 = scf.for %k = %c0 to %n step %c1 iter_args(%a = %zt, %it = %it0) -> (tile<64x32xf32>, !cit)  : i32 {{
          %t = {P}consumer_wait %p[%it] : !pipe, !cit
          %v = {P}consumer_read %p[%it], %t : !pipe, !cit -> {read_type}
          %e = nv_tileaa.fp_to_fp %v : ({read_type}) -> tile<64x32xf32>
          %s = nv_tileaa.addf %a, %e rounding<nearest_even> : (tile<64x32xf32>, tile<64x32xf32>) -> tile<64x32xf32>
          {release}
          %nx = {P}inc_iter %it : !cit
          scf.yield %s, %nx : tile<64x32xf32>, !cit
        }}
        {P}yield %res#0 : tile<64x32xf32>
      }}
      {P}yield %acc : tile<64x32xf32>
    }}
    {extra}
    %red = nv_tileaa.reduce %r {{axis = 1 : i32}} : (tile<64x32xf32>) -> tile<64xf32> {{
    ^bb0(%x: f32, %y: f32):
      %xy = nv_tileaa.addf %x, %y rounding<nearest_even> : (f32, f32) -> f32
      nv_tileaa.yield %xy : f32
    }}
    %tok = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
    %mr = nv_tileaa.make_memref %out sizes[%osize] strides[] : (!nv_tileaa.ptr<f32, 1>, i32) -> !nv_tileaa.memref<?xf32, 1, strides=[1]>
    %st = nv_tileaa.tiled_store %mr[%c0], %red token %tok sem weak : (!nv_tileaa.memref<?xf32, 1, strides=[1]>, tile<64xf32>, i32, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token
    nv_tileaa.return
  }}
}}
"""


def source(**changes) -> str:
    fields = dict(BASE, **changes)
    return TEMPLATE.format(P=P, **fields)


def errors(src: str) -> list[str]:
    m = parse_module(src, "t.mlir")
    diag = DiagnosticEngine()
    verify_module(m, diag)
    return [d.message for d in diag.diagnostics if d.severity == "error"]


def test_baseline_verifies_and_round_trips():
    src = source()
    assert errors(src) == []
    text = print_module(parse_module(src, "t.mlir"))
    again = print_module(parse_module(text, "t.mlir"))
    assert text == again
    assert f"{P}agent warps(4) regs(40) {{" in text
    assert (
        "!nv_tileas.async.pipeline.iterator<consumer, stages = 3, register, tile<64x32xf16>>"
        in text
    )
    generic = print_module(parse_module(src, "t.mlir"), generic=True)
    assert print_module(parse_module(generic, "t.mlir")) == text


def test_types_parse_to_their_fields():
    m = parse_module(source(), "t.mlir")
    ops = {o.name: o for o in m.walk()}
    pipe = ops[P + "create_pipeline"].results[0].type
    assert isinstance(pipe, PipelineType)
    assert (pipe.stages, pipe.space, len(pipe.payload)) == (3, "shared", 1)
    it = next(
        o.results[0].type
        for o in m.walk()
        if o.name == P + "create_iterator" and o.results[0].type.kind == "consumer"
    )
    assert isinstance(it, PipelineIteratorType)
    assert (it.kind, it.count, it.stride, it.space) == ("consumer", 3, 1, "register")


def test_stride_is_printed_only_when_not_one():
    src = source(cit="consumer, stages = 3, stride = 1, register")
    text = print_module(parse_module(src, "t.mlir"))
    assert "stride =" not in text


def test_unknown_memory_space_is_a_located_error():
    with pytest.raises(DiagnosticError) as e:
        parse_module(source(pspace="global"), "t.mlir")
    d = e.value.diag
    assert "expected a memory space (register, shared, tensor)" in d.message
    assert d.loc is not None


def test_interpreter_runs_agents_in_program_order():
    m = parse_module(source(), "t.mlir")
    out = run_module(m, [("n", np.int32(5)), ("out", np.zeros(64, np.float32))])
    assert any(o.name == P + "consumer_read" for o in m.walk())
    # stage k holds k everywhere; the consumer sums 0..4 over 64x32 tiles, the row sums 32 x 10
    assert np.array_equal(out["out"], np.full(64, 320.0, np.float32))


def test_interpreter_rejects_a_consumer_before_its_producer():
    src = source()
    # swap the agents: the consumer now runs first and waits for a stage nobody committed
    head, rest = src.split(f"      {P}agent warps(4) regs(40) {{", 1)
    prod, cons = rest.split(f"      %acc = {P}agent", 1)
    cons_body, tail = cons.split(f"      {P}yield %acc", 1)
    swapped = (
        head + f"      %acc = {P}agent" + cons_body + f"      {P}agent warps(4) regs(40) {{" + prod
    )
    swapped += f"      {P}yield %acc" + tail
    m = parse_module(swapped, "t.mlir")
    assert errors(swapped) == []
    with pytest.raises(RunError) as e:
        run_module(m, [("n", np.int32(2)), ("out", np.zeros(64, np.float32))])
    assert "consumer waits for stage position 0, which no producer committed before it" in str(
        e.value.diagnostics[0].message
    )


# --------------------------------------------------------------------------- verifier rules

CASES = [
    # rule 1: iterators keep their pipeline's stage count, payload, and (producer side) space
    (
        "iterator count",
        dict(pit_stages="4"),
        f"'{P}create_iterator' op iterator stage count 4 does not match the pipeline's 3",
    ),
    (
        "iterator payload",
        dict(ppayload="tile<64x32xf32>"),
        f"'{P}create_iterator' op iterator element types (!cuda_tile.tile<64x32xf32>) do not "
        "match the pipeline payload (!cuda_tile.tile<64x32xf16>)",
    ),
    (
        "producer space",
        dict(pit_space="register"),
        f"'{P}create_iterator' op a producer iterator must stay in the pipeline's memory space "
        "(shared), but is in register",
    ),
    (
        "iterator stride",
        dict(cit="consumer, stages = 3, stride = 2, register"),
        f"'{P}create_iterator' op iterator stride 2 does not match the pipeline's stride 1",
    ),
    # pipeline storage
    (
        "stages",
        dict(stages="0", pit_stages="0", cit="consumer, stages = 0, register"),
        f"'{P}create_pipeline' op a pipeline needs at least one stage, but has 0",
    ),
    (
        "shared memory",
        dict(stages="60", pit_stages="60", cit="consumer, stages = 60, register"),
        f"'{P}create_pipeline' op pipeline stages need 245760 bytes of shared memory (60 x 4096), "
        "more than the 232448 of sm_90",
    ),
    (
        "shared memory sm_120",
        dict(cc="120", stages="30", pit_stages="30", cit="consumer, stages = 30, register"),
        f"'{P}create_pipeline' op pipeline stages need 122880 bytes of shared memory (30 x 4096), "
        "more than the 101376 of sm_120",
    ),
    # tokens
    (
        "commit twice",
        dict(commit=f"{P}producer_commit %p[%it], %t : !pipe, !pit\n" * 2),
        f"'{P}producer_acquire' op producer token must reach exactly one producer_commit, but "
        "reaches 2",
    ),
    (
        "no release",
        dict(release=""),
        f"'{P}consumer_wait' op consumer token must reach exactly one consumer_release, but "
        "reaches 0",
    ),
    # payloads
    (
        "write payload",
        dict(write_yield="%kf : f16"),
        f"'{P}yield' op the producer region yields (f16), but the pipeline payload is "
        "(!cuda_tile.tile<64x32xf16>)",
    ),
    (
        "read payload",
        dict(read_type="tile<64x32xbf16>"),
        f"'{P}consumer_read' op result #0 has type !cuda_tile.tile<64x32xbf16>, but pipeline "
        "payload #0 is !cuda_tile.tile<64x32xf16>",
    ),
    # agents
    (
        "warp budget",
        dict(cagent="warps(8) regs(232)"),
        f"'{P}agent_switch' op agents need 12 warps (4 + 8), more than the 8 warps of the CTA",
    ),
    (
        "kernel_spec budget",
        dict(cta_warps="nv_tileaa.kernel_spec = {num_warps = 4 : i32}"),
        f"'{P}agent_switch' op agents need 8 warps (4 + 4), more than the 4 warps of the CTA",
    ),
    (
        "group zero",
        dict(switch_attrs="attributes {num_agents_per_group = array<i32: 0, 2>}"),
        f"'{P}agent_switch' op elements of num_agents_per_group must be greater than 0, but got 0",
    ),
    (
        "group sum",
        dict(switch_attrs="attributes {num_agents_per_group = array<i32: 1, 2>}"),
        f"'{P}agent_switch' op num_agents_per_group sums to 3, but the agent_switch has 2 agents",
    ),
    (
        "group agreement",
        dict(
            cta_warps="nv_tileas.num_warps = 12 : i32",
            switch_attrs="attributes {num_agents_per_group = array<i32: 2>}",
            cagent="warps(8) regs(160)",
        ),
        f"'{P}agent_switch' op agents of group #0 must agree on their warp count, but have 4, 8",
    ),
    (
        "inherit",
        dict(pagent="warps(1)", cagent="warps(-1)", cta_warps="nv_tileas.num_warps = 8 : i32"),
        None,  # valid: the consumer inherits the 7 warps left
    ),
    (
        "inherit nothing left",
        dict(pagent="warps(8)", cagent="warps(-1)"),
        f"'{P}agent_switch' op 1 agent(s) inheriting their warp count cannot share the 0 warp(s) "
        "the other agents leave of the CTA's 8",
    ),
    (
        "max_regs range",
        dict(cagent="warps(4) regs(260)"),
        f"'{P}agent' op max_regs 260 must be a multiple of 8 in [24, 256] (setmaxnreg)",
    ),
    (
        "max_regs multiple",
        dict(cagent="warps(4) regs(230)"),
        f"'{P}agent' op max_regs 230 must be a multiple of 8 in [24, 256] (setmaxnreg)",
    ),
    (
        "register file",
        dict(
            cta_warps="nv_tileas.num_warps = 12 : i32",
            pagent="warps(4) regs(256)",
            cagent="warps(8) regs(232)",
        ),
        f"'{P}agent_switch' op agents need 92160 registers (max_regs x threads), more than the "
        "65536 of an SM",
    ),
    (
        "warp groups",
        dict(pagent="warps(1) regs(40)"),
        f"'{P}agent_switch' op agent #0 has 1 warp(s); register budgets (setmaxnreg) need every "
        "agent to be whole warp groups of 4 warps",
    ),
    (
        "num_warps",
        dict(pagent="warps(0)"),
        f"'{P}agent' op num_warps must be positive or -1 (inherit), but is 0",
    ),
]


def _case(name):
    return next(c for c in CASES if c[0] == name)


@pytest.mark.parametrize(
    "name,changes,message",
    [c for c in CASES if c[2] is not None],
    ids=[c[0] for c in CASES if c[2] is not None],
)
def test_rule(name, changes, message):
    assert errors(source(**changes)) == [message]


def test_register_file_boundary_is_inclusive():
    # 4 x 32 x 256 twice = 65536 registers: exactly the register file, fits
    assert errors(source(pagent="warps(4) regs(256)", cagent="warps(4) regs(256)")) == []


def test_inherited_warps_resolve_to_what_is_left():
    assert errors(source(**_case("inherit")[1])) == []


def test_stage_access_needs_the_matching_side():
    # a consumer iterator handed to producer_acquire (the type written on the op says so)
    src = source(acquire_kind="!cit").replace(
        f"%t = {P}producer_acquire %p[%it]", f"%t = {P}producer_acquire %p[%cx]"
    )
    src = src.replace(
        f"%it0 = {P}create_iterator %p : !pipe -> !pit\n",
        f"%it0 = {P}create_iterator %p : !pipe -> !pit\n"
        f"        %cx = {P}create_iterator %p : !pipe -> !cit\n",
    )
    assert errors(src) == [
        f"'{P}producer_acquire' op expects a producer iterator, but got a consumer iterator"
    ]


def test_rule3_if_yields_the_same_iterator():
    src = source(extra=f"""%b = arith.constant true
    %i0 = {P}create_iterator %p : !pipe -> !cit
    %i1 = {P}create_iterator %p : !pipe -> !cit2
    %sel = scf.if %b -> (!cit) {{
      scf.yield %i0 : !cit
    }} else {{
      scf.yield %i1 : !cit2
    }}""")
    src = src.replace(
        "module attributes",
        "!cit2 = !nv_tileas.async.pipeline.iterator<consumer, stages = 3, shared, "
        "tile<64x32xf16>>\nmodule attributes",
        1,
    )
    assert errors(src) == [
        "'scf.if' op pipeline iterator yields in then and else block must be the same, but "
        "result #0 gets !nv_tileas.async.pipeline.iterator<consumer, stages = 3, register, "
        "tile<64x32xf16>> and !nv_tileas.async.pipeline.iterator<consumer, stages = 3, shared, "
        "tile<64x32xf16>>"
    ]


def test_rule4_loops_carry_iterators_unchanged():
    src = source(prod_loop_yield="%other : !pit2")
    src = src.replace(
        f"%nx = {P}inc_iter %it : !pit\n",
        f"%nx = {P}inc_iter %it : !pit\n" f'          %other = "test.iter"() : () -> !pit2\n',
        1,
    )
    src = src.replace(
        "module attributes",
        "!pit2 = !nv_tileas.async.pipeline.iterator<producer, stages = 3, stride = 3, shared, "
        "tile<64x32xf16>>\nmodule attributes",
        1,
    )
    m = parse_module(src, "t.mlir", allow_unregistered=True)
    diag = DiagnosticEngine()
    verify_module(m, diag)
    assert [d.message for d in diag.diagnostics if d.severity == "error"] == [
        "'scf.for' op loop-carried pipeline iterator #0 must stay unchanged, but "
        "!nv_tileas.async.pipeline.iterator<producer, stages = 3, shared, tile<64x32xf16>> "
        "becomes !nv_tileas.async.pipeline.iterator<producer, stages = 3, stride = 3, shared, "
        "tile<64x32xf16>>"
    ]


@pytest.mark.parametrize(
    "factor,result,message",
    [
        (2, "stages = 2", None),
        (
            3,
            "stages = 1",
            f"'{P}reduce_stages' op reduction factor 3 does not divide the iterator's stage count 4",
        ),
        (
            2,
            "stages = 4",
            f"'{P}reduce_stages' op result must be !nv_tileas.async.pipeline.iterator<consumer, "
            "stages = 2, shared, tile<8xf32>> (4 stages / 2), but is "
            "!nv_tileas.async.pipeline.iterator<consumer, stages = 4, shared, tile<8xf32>>",
        ),
        (
            0,
            "stages = 4",
            f"'{P}reduce_stages' op reduction factor must be positive, but is 0",
        ),
    ],
)
def test_rule2_reduction_factor_divides_the_stage_count(factor, result, message):
    it = "!nv_tileas.async.pipeline.iterator<consumer, {}, shared, tile<8xf32>>"
    src = f"""
module {{
  nv_tileaa.func @k : () -> () attributes {{kernel}} {{
    %p = {P}create_pipeline : !nv_tileas.async.pipeline<stages = 4, shared, tile<8xf32>>
    %i = {P}create_iterator %p : !nv_tileas.async.pipeline<stages = 4, shared, tile<8xf32>> -> {it.format("stages = 4")}
    %r = {P}reduce_stages %i by {factor} : {it.format("stages = 4")} -> {it.format(result)}
    nv_tileaa.return
  }}
}}"""
    assert errors(src) == ([] if message is None else [message])


def test_async_wait_pending_is_not_negative():
    src = f"""
module {{
  nv_tileaa.func @k : (tile<64x16xf16>, tile<16x64xf16>, tile<64x64xf32>) -> () attributes {{kernel}} {{
  ^bb0(%a: tile<64x16xf16>, %b: tile<16x64xf16>, %c: tile<64x64xf32>):
    %d, %t = nv_tileas.async.dot %a, %b, %c : (tile<64x16xf16>, tile<16x64xf16>, tile<64x64xf32>) -> tile<64x64xf32>
    nv_tileas.async.wait %t pending(-1)
    nv_tileaa.return
  }}
}}"""
    assert errors(src) == ["'nv_tileas.async.wait' op num_pending must be non-negative, but is -1"]
    assert errors(src.replace("pending(-1)", "pending(1)")) == []
    bad = src.replace("tile<16x64xf16>, %c", "tile<32x64xf16>, %c").replace(
        "(tile<64x16xf16>, tile<16x64xf16>, tile<64x64xf32>) -> tile",
        "(tile<64x16xf16>, tile<32x64xf16>, tile<64x64xf32>) -> tile",
    )
    bad = bad.replace(
        "(tile<64x16xf16>, tile<16x64xf16>, tile<64x64xf32>) -> ()",
        "(tile<64x16xf16>, tile<32x64xf16>, tile<64x64xf32>) -> ()",
    )
    assert errors(bad) == [
        "'nv_tileas.async.dot' op contracting dimensions do not agree: A has K = 16 but B has "
        "K = 32"
    ]
