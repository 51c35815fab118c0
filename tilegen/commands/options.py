"""The command-line flags of the compile options (runtime/options.CompileOptions), shared by
``tilegen compile`` and ``tilegen run``, and how the commands print a failed compile."""

from __future__ import annotations

import sys
from typing import Optional


def add_target_arguments(p, gpu_help: str) -> None:
    p.add_argument("--gpu-name", metavar="sm_XX", help=gpu_help)
    p.add_argument(
        "-O",
        "--opt-level",
        dest="opt_level",
        type=_opt_level,
        default=None,
        metavar="N",
        help="optimization level 0-3 (tile-optimize-O<N>; default 3, as tileiras)",
    )


def add_codegen_arguments(p) -> None:
    """The code generator's switches (each a CompileOptions field; all on by default)."""
    g = p.add_argument_group("code generation (docs/driver.md)")
    g.add_argument("--no-wgmma", action="store_true", help="sm_90 dots on mma.sync, not wgmma")
    g.add_argument("--no-tcgen05", action="store_true", help="sm_100 dots on mma.sync, not tcgen05")
    g.add_argument(
        "--no-cp-async", action="store_true", help="dot operands through registers, no cp.async"
    )
    g.add_argument(
        "--no-pipeline", action="store_true", help="no K-loop prefetching of dot operands"
    )
    g.add_argument(
        "--no-tma",
        action="store_true",
        help="no TMA/mbarrier pipeline for K loops on sm_90/sm_100 (docs/pipelines.md)",
    )
    g.add_argument(
        "--no-warp-specialize",
        action="store_true",
        help="no producer warp group feeding the kernel's warps (docs/pipelines.md)",
    )
    overlap = g.add_mutually_exclusive_group()
    overlap.add_argument(
        "--no-overlap-mma",
        action="store_true",
        help="the async general form waits for each dot before the next (the default; "
        "docs/pipelines.md)",
    )
    overlap.add_argument(
        "--overlap-mma",
        action="store_true",
        help="the async general form overlaps a loop's last dot with the next iteration's "
        "first wherever the registers fit (default: off, slower on an H200; docs/pipelines.md)",
    )
    pair = g.add_mutually_exclusive_group()
    pair.add_argument(
        "--no-cta-pair",
        action="store_true",
        help="one CTA a tile block: no tcgen05 CTA pair for num_cta_in_cga = 2 GEMMs, no rows "
        "divided between a cluster's CTAs (docs/pipelines.md)",
    )
    pair.add_argument(
        "--cta-pair",
        action="store_true",
        help="a CTA pair for every num_cta_in_cga = 2 GEMM whose form allows one, sm_90's "
        "tiles that fit one CTA too (default: on sm_90 only where they do not)",
    )
    g.add_argument(
        "--no-map-sharing",
        action="store_true",
        help="every CTA of an async kernel builds its own tensor maps (default: a CTA uses "
        "the maps of the CTA before it on its SM in the same launch; docs/pipelines.md)",
    )
    g.add_argument(
        "--num-stages",
        type=_num_stages,
        metavar="N",
        help="K-loop pipeline depth for every kernel (default: each kernel's num_stages, else "
        "as many as fit, up to 4)",
    )
    g.add_argument(
        "--num-warps",
        type=_num_stages,
        metavar="N",
        help="warps per CTA for every kernel (default: each kernel's num_warps, else the "
        "layout stage's rule; the async path's consumer warps)",
    )
    g.add_argument(
        "--lineinfo", action="store_true", help=".file/.loc line info from the input's locations"
    )
    g.add_argument(
        "-g",
        "--device-debug",
        action="store_true",
        help="debug info (DWARF); needs -O0, as tileiras",
    )
    g.add_argument(
        "--sanitize",
        choices=["memcheck"],
        help="bounds-check global pointer accesses (docs/debugging.md)",
    )


def _opt_level(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"'{text}' value invalid for integer argument") from None


def _num_stages(text: str) -> int:
    return _opt_level(text)


def compile_options(args, gpu_name, **overrides):
    """The CompileOptions of parsed ``args`` for ``gpu_name`` (None: no target); raises
    CompileError for bad values."""
    from tilegen.runtime.options import DEFAULT_OPT_LEVEL, CompileOptions

    opt_level = getattr(args, "opt_level", None)
    if opt_level is None:
        opt_level = DEFAULT_OPT_LEVEL
    fields = dict(
        target=gpu_name,
        opt_level=opt_level,
        num_stages=getattr(args, "num_stages", None),
        num_warps=getattr(args, "num_warps", None),
        use_wgmma=not getattr(args, "no_wgmma", False),
        use_tcgen05=not getattr(args, "no_tcgen05", False),
        use_cp_async=not getattr(args, "no_cp_async", False),
        pipelining=not getattr(args, "no_pipeline", False),
        use_tma=not getattr(args, "no_tma", False),
        warp_specialize=not getattr(args, "no_warp_specialize", False),
        overlap_mma=_tri(args, "overlap_mma"),
        cta_pair=_tri(args, "cta_pair"),
        share_maps=not getattr(args, "no_map_sharing", False),
        lineinfo=getattr(args, "lineinfo", False),
        device_debug=getattr(args, "device_debug", False),
        sanitize=getattr(args, "sanitize", None),
        verify=not getattr(args, "no_verify", False),
    )
    fields.update(overrides)
    return CompileOptions(**fields)


def report(error) -> int:
    """Print a CompileError's diagnostics (the one format) on stderr; return its exit code."""
    for d in error.diagnostics:
        print(d.format(), file=sys.stderr)
    return error.exit_code


def _tri(args, name: str) -> Optional[bool]:
    """``--no-NAME``: False; ``--NAME``: True; neither: None (the rule decides)."""
    if getattr(args, f"no_{name}", False):
        return False
    return True if getattr(args, name, False) else None
