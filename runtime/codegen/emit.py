"""PTX text for a laid-out (nv_tileas-stage) module: the kernel frame (ABI, directives, register
and shared-memory declarations) around the op handlers of the concern modules."""

from __future__ import annotations

from tilegen.runtime.codegen import async_kept, tmem_resident
from tilegen.runtime.codegen.abi import entry_params
from tilegen.runtime.codegen.control import pipeline_smem_cap
from tilegen.runtime.codegen.lineinfo import LineTable, entry_source
from tilegen.runtime.codegen.core import (
    SMEM_SYMBOL,
    WARP,
    CodegenError,
    Emitter,
    fail,
    handles,
    load_handlers,
)
from tilegen.runtime.attributes import DenseArrayAttr, IntegerAttr
from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.layouts.decisions import num_warps
from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_MARK, kernel_spec_int, register_cap
from tilegen.runtime.targets import STATIC_SHARED_PLAIN, static_shared_limit

PTX_VERSION = "8.0"
SMEM_STATIC_LIMIT = STATIC_SHARED_PLAIN  # bytes of static .shared per CTA (plain targets)
#: the least PTX ISA that knows ``.target sm_XX`` where that is newer than PTX_VERSION
MIN_ISA = {
    88: "9.0",
    100: "8.6",
    101: "8.6",
    103: "8.8",
    107: "9.4",
    110: "9.0",
    120: "8.7",
    121: "8.8",
}
FAMILY_ISA = (8, 8)  # the least PTX ISA that knows the family targets (``.target sm_100f``)
#: tileiras's marks of a tile kernel (docs/debugging.md "Launch metadata"): ``.language 7``
#: (ptxas: ``EIATTR_LANGUAGE`` = TILEIR; needs PTX ISA 9.2) after the launch directives, and the
#: 64-byte zero-initialized ``___NV_TILE_LAUNCH_META_DATA___`` global before the entries
TILE_LANGUAGE = ".language 7"
LANGUAGE_ISA = (9, 2)
LAUNCH_METADATA = ".visible .global .align 8 .b8 ___NV_TILE_LAUNCH_META_DATA___[64];"

__all__ = ["CodegenError", "emit_ptx", "MIN_ISA", "PTX_VERSION"]


# ----- ops that are part of the frame
@handles("nv_tileaa.create_mem_token", "nv_tileaa.join_mem_token", "nv_tileaa.pragma")
def _token(em: Emitter, op) -> None:
    for r in op.results:
        em.set(r, None)


@handles("nv_tileaa.assume")
def _assume(em: Emitter, op) -> None:
    em.set(op.results[0], em.get(op.operands[0]))


@handles("nv_tileaa.return")
def _return(em: Emitter, op) -> None:
    if em.tmem is not None:  # tcgen05 dots: free the tensor memory first
        from tilegen.runtime.codegen.tcgen05_dot import release

        release(em)
    em.ins("ret")


@handles("nv_tileaa.get_program_id", "nv_tileaa.get_num_programs")
def _grid(em: Emitter, op) -> None:
    dim = op.attributes["dim"].value
    sreg = "ctaid" if op.name.endswith("program_id") else "nctaid"
    if em.cta_pair:  # .blocksareclusters: a tile block is a cluster (docs/pipelines.md s. 18)
        sreg = "clusterid" if sreg == "ctaid" else "nclusterid"
    r = em.new("b32")
    em.ins(f"mov.u32 {r}, %{sreg}.{'xyz'[dim]}")
    em.set(op.results[0], r)


@handles("nv_tileas.cluster_cta_rank")
def _cluster_rank(em: Emitter, op) -> None:
    r = em.new("b32")
    em.ins(f"mov.u32 {r}, %cluster_ctarank")
    em.set(op.results[0], r)


def _params(em: Emitter, block) -> list[tuple[str, str]]:
    params = entry_params(em.symbol, [a.type for a in block.args])
    for arg, (name, ptype) in zip(block.args, params):
        if ptype == "u64":
            raw, g = em.new("b64"), em.new("b64")
            em.ins(f"ld.param.u64 {raw}, [{name}]")
            em.ins(f"cvta.to.global.u64 {g}, {raw}")
            em.set(arg, g)
        else:
            cls = {"u8": "b16", "u16": "b16", "u32": "b32", "u64": "b64"}.get(ptype, ptype)
            r = em.new(cls)
            em.ins(f"ld.param.{ptype} {r}, [{name}]")
            em.set(arg, r)
    return params


def launch_directives(func, threads: int, sm: int, pair: bool = False) -> list[str]:
    """Seed 002's directives: ``.reqntid`` from num_warps; ``.minnctapersm`` (nvvm.minctasm,
    default 1 like tileiras); ``.maxnreg`` from nvvm.maxnreg, else from the ``occupancy`` hint
    (the 64K-register file shared by ``occupancy`` CTAs, as tileiras derives it:
    flash_attention's occupancy 2 at 256 threads gives 128); ``.reqnctapercluster`` from a
    non-trivial tt.cluster_dim on sm_90+."""
    out = [f".reqntid {threads}, 1, 1"]
    minctasm = func.attributes.get("nvvm.minctasm")
    out.append(f".minnctapersm {minctasm.value if isinstance(minctasm, IntegerAttr) else 1}")
    cap = register_cap(func, threads)
    if cap is not None:
        hinted = not isinstance(func.attributes.get("nvvm.maxnreg"), IntegerAttr)
        out.append(f".maxnreg {cap}" + (f" {OCCUPANCY_CAP_MARK}" if hinted else ""))
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    cluster = None
    for k, v in getattr(spec, "items", ()):
        if k == "cluster_dim" and isinstance(v, DenseArrayAttr):
            cluster = [int(x) for x in v.values]
    if pair:  # a CTA pair per tile block: the grid counts clusters (cuTile's grid unchanged)
        out += [".reqnctapercluster 2, 1, 1", ".blocksareclusters"]
    elif sm >= 90 and cluster and cluster != [1, 1, 1]:
        out.append(".reqnctapercluster " + ", ".join(str(x) for x in (cluster + [1, 1])[:3]))
    return out


def _fit_static_shared(em: Emitter, func, suffix: str) -> None:
    """Over 48 KiB of static ``.shared`` needs the arch-specific target (``sm_90a``: up to the
    CTA's 227 KB; tileiras always emits ``a`` targets); where the user chose another variant
    or the target has none, a located error instead of ptxas's."""
    total = em.smem_bytes + em.pipe_bytes + em.async_smem + em.resident_bytes
    if total <= static_shared_limit(em.sm, suffix or em.target_suffix):
        return
    if suffix in ("", "a") and total <= static_shared_limit(em.sm, "a"):
        em.need_target_suffix("a")
        return
    chosen = f"sm_{em.sm}{suffix}"
    a = static_shared_limit(em.sm, "a")
    hint = f" (sm_{em.sm}a: {a})" if a > SMEM_STATIC_LIMIT and suffix != "a" else ""
    raise CodegenError(
        [
            Diagnostic(
                "error",
                f"the kernel needs {total} bytes of shared memory; {chosen} allows "
                f"{static_shared_limit(em.sm, suffix)} bytes of static shared memory{hint}",
                func.loc,
            )
        ]
    )


def _ring_symbol(block):
    """The stage ring's symbol when the kernel's top level holds an async K loop, else None."""
    from tilegen.runtime.codegen.async_loop import ASYNC_ATTR, ASYNC_SYMBOL

    found = any(o.name == "scf.for" and ASYNC_ATTR in o.attributes for o in block.ops)
    return ASYNC_SYMBOL if found else None


def deferred_prologue(block) -> list:
    """The consumers' part of the prologue of the GEMM form's K loop at ``block``'s top level
    (``async_prologue.consumer_prologue``; ``async_loop.async_for`` emits it after the warp
    groups split), or []."""
    from tilegen.runtime.codegen.async_loop import ASYNC_ATTR, ASYNC_GENERAL_ATTR
    from tilegen.runtime.codegen.async_prologue import consumer_prologue

    for o in block.ops:
        if o.name == "scf.for" and ASYNC_ATTR in o.attributes:
            return [] if ASYNC_GENERAL_ATTR in o.attributes else consumer_prologue(block, o)
    return []


def _has_async_loop(func) -> bool:
    """Whether the kernel holds an async K loop (a producer warp group beside its warps)."""
    from tilegen.runtime.codegen.async_loop import ASYNC_ATTR

    return any(o.name == "scf.for" and ASYNC_ATTR in o.attributes for o in func.walk())


def _pair_kernel(func) -> bool:
    """Whether the kernel's tile block is a CTA pair: its K loop runs on one
    (async_loop.ASYNC_PAIR_ATTR), or its rows are divided between two (passes/pair_rows.py)."""
    from tilegen.runtime.codegen.async_loop import ASYNC_PAIR_ATTR
    from tilegen.runtime.layouts.kernel import PAIR_ROWS_ATTR

    return PAIR_ROWS_ATTR in func.attributes or any(
        ASYNC_PAIR_ATTR in o.attributes
        for o in func.regions[0].blocks[0].ops
        if o.name == "scf.for"
    )


def emit_kernel(func, sm: int, info: dict | None = None) -> tuple[list[str], list[str]]:
    """(module-level declarations, lines of the ``.entry``, least PTX ISA) for one kernel;
    ``info["target_suffix"]`` is set to what the kernel needs after ``sm_XX`` ("" or "a");
    ``info["lines"]`` (a codegen/lineinfo.LineTable) turns on ``.loc`` directives."""
    from tilegen.runtime.codegen.selection import check_target_types

    load_handlers()
    check_target_types(func, sm)
    block = func.regions[0].blocks[0]
    budget = None  # bytes for K-loop stage buffers (control.py); 0: no pipelining
    # scratch claims before and after an async K loop may use its idle stage ring
    ring = {"pre": _ring_symbol(block) is not None, "post": True}
    attempt = 0
    while attempt < 3:
        em = Emitter(func, num_warps(func), sm)
        em.cta_pair = _pair_kernel(func)
        em.user_suffix = (info or {}).get("suffix") or ""
        em.producer_warps = _has_async_loop(func)
        em.pipe_budget = budget
        em.ring_scratch_allowed = ring["post"]
        em.ring_pre_allowed = ring["pre"]
        em.lines = (info or {}).get("lines")
        try:
            params = _params(em, block)
        except ValueError as e:
            raise CodegenError([Diagnostic("error", str(e), func.loc)]) from None
        if ring["pre"]:
            em.scratch_before_ring(_ring_symbol(block))
        em.deferred = deferred_prologue(block)  # (emitted in the consumers' branch)
        tmem_resident.prepare(em)  # (resident accumulators' initial values, by chunks)
        skip = {id(o) for o in em.deferred}
        for op in block.ops:
            if id(op) not in skip:
                em.emit_op(op)
        async_kept.check_issued(em)
        outgrown = em.finish_ring_scratch()
        if outgrown is not None:  # the claims before / after the loop outgrew the idle ring
            ring[outgrown] = False
            continue
        attempt += 1
        cap = pipeline_smem_cap(sm, em.user_suffix, kernel_spec_int(func, "occupancy"))
        cap = max(cap, em.pipe_cap)  # (two stages past the hint-free half: control.py)
        if not em.pipe_bytes or em.pipe_bytes + em.smem_bytes + em.resident_bytes <= cap:
            break
        # the stage buffers and the scratch do not fit together: again with the buffers
        # limited to what the scratch left, then without pipelining
        budget = max(0, cap - em.smem_bytes - em.resident_bytes) if attempt == 1 else 0
    try:
        _fit_static_shared(em, func, (info or {}).get("suffix", ""))
    except CodegenError as e:
        from tilegen.runtime.attributes import StringAttr
        from tilegen.runtime.codegen.async_loop import ASYNC_FALLBACK_ATTR, fewer_general_stages
        from tilegen.runtime.codegen.async_loop import strip_general_async

        if fewer_general_stages(func):  # a stage fewer first
            return emit_kernel(func, sm, info)
        if not strip_general_async(func):
            raise
        # the general form's ring, kept operands and scratch outgrew shared memory: today's path
        func.set_attr(ASYNC_FALLBACK_ATTR, StringAttr(e.diagnostics[0].message))
        return emit_kernel(func, sm, info)
    lines = []
    plist = ",\n".join(f"\t.param .{t} {n}" for n, t in params)
    lines.append(f".visible .entry {em.symbol}(\n{plist}\n)")
    lines += launch_directives(func, em.num_threads + em.producer_threads, sm, em.cta_pair)
    if em.cta_pair:
        em.need_isa("9.0")  # .blocksareclusters
    lines.append(TILE_LANGUAGE)
    em.isa = max(em.isa, LANGUAGE_ISA)
    lines.append("{")
    if em.smem_bytes:
        lines.append(f"\t.shared .align 16 .b8 {SMEM_SYMBOL}[{em.smem_bytes}];")
    lines += em.regs.declarations()
    entry = entry_source(func) if em.lines is not None else None
    if entry is not None:
        lines.append("\t" + em.lines.directive(entry))
    debug = (info or {}).get("debug") and em.lines is not None
    if debug:  # -g: the subprogram's address range (.debug_info)
        n = em.lines.subprogram(func, em.symbol)
        lines.append(f"$L__func_begin{n}:")
    em.splice_hoisted()
    lines += em.prologue() + em.smem_prologue() + em.pre
    lines.append("")
    lines += em.body
    if debug:
        lines.append(f"$L__func_end{n}:")
    lines.append("}")
    lines.append("")
    if info is not None:
        info["target_suffix"] = em.target_suffix
    return em.globals, lines, em.isa


def emit_ptx(root, sm: int, options=None) -> str:
    """PTX text for every kernel ``nv_tileaa.func`` of the nv_tileas-stage module ``root``;
    ``options`` (runtime/options.CompileOptions, default: the compile's) are active meanwhile."""
    from tilegen.runtime.options import active

    with active(options) as options:
        table = LineTable() if options.lineinfo or options.device_debug else None
        return _emit_ptx(root, sm, options.suffix_for(sm), table, options.device_debug)


def _emit_ptx(
    root, sm: int, suffix: str, table: LineTable | None = None, debug: bool = False
) -> str:
    header = [
        "//",
        "// Generated by tilegen (runtime/codegen)",
        "//",
        "",
        "",  # .version, filled in once the kernels say what they need
        f".target sm_{sm}{suffix}",
        ".address_size 64",
        "",
    ]
    decls: list[str] = []
    kernels: list[str] = []
    isa = tuple(int(x) for x in MIN_ISA.get(sm, PTX_VERSION).split("."))
    isa = max(isa, FAMILY_ISA) if suffix == "f" else isa
    for func in [op for op in root.walk() if op.name == "nv_tileaa.func"]:
        info: dict = {"lines": table, "debug": debug, "suffix": suffix}
        g, lines, need = emit_kernel(func, sm, info)
        isa = max(isa, need)
        if info["target_suffix"] and not suffix:  # e.g. wgmma: the arch-specific sm_90a
            header[5] = f".target sm_{sm}{info['target_suffix']}"
        for d in g:
            if d not in decls:
                decls.append(d)
        kernels += lines
    header[4] = f".version {isa[0]}.{isa[1]}"
    if kernels:
        decls.insert(0, LAUNCH_METADATA)
    files = table.file_directives() if table is not None else []
    if debug and table is not None:  # -g: DWARF for ptxas, as tileiras (docs/debugging.md)
        header[5] += ", debug"
        files += table.debug_sections()
    return "\n".join(header + decls + ([""] if decls else []) + kernels + files)
