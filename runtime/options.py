"""What a compile is asked to do: the target rule and the typed, frozen :class:`CompileOptions`.

A leaf module (stdlib, :mod:`records` and :mod:`diagnostics` only): the driver builds the options
once, every stage receives them, and code the driver reaches without a handle on them (the
layout pass asking ``wgmma_plan``, the emitter's concern modules) reads :func:`current`, which
is the options of the compile in progress (:func:`active`). No environment variable changes
generated code; every switch is a field here and part of the compile cache key
(:meth:`CompileOptions.fingerprint`).

Targets follow the one rule of runtime/targets.py (tileiras 13.5's names and their ``a``/``f``
variants). ``sm_90a`` emits ``.target sm_90a``; ``sm_90`` emits ``.target sm_90`` unless a
kernel needs ``sm_90a`` instructions (wgmma).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from tilegen.runtime.diagnostics import EXIT_CONFIG, EXIT_USAGE, CompileError, Diagnostic
from tilegen.runtime.records import dataclass
from tilegen.runtime.targets import (
    GPU_NAMES,
    TARGET_NAMES,
    Target,
    bad_target_message,
    target_from_name,
)

OPT_LEVELS = (0, 1, 2, 3)
DEFAULT_OPT_LEVEL = 3  # tileiras's -O default, for every entry point
SANITIZERS = ("memcheck",)  # tileiras 13.5's --sanitize values


def parse_target(text: object) -> Target:
    """``"sm_90"`` / ``"sm_90a"`` / a :class:`Target` -> :class:`Target`; anything else is a
    :class:`CompileError` whose one line lists the accepted names (exit 2; exit 1 for a value
    that is not a string)."""
    if isinstance(text, Target):
        return text
    if not isinstance(text, str):
        raise _usage(f"gpu_name must be a string such as 'sm_90', got {_show(text)}")
    target = target_from_name(text)
    if target is None:
        raise CompileError([Diagnostic("error", bad_target_message(text))], EXIT_CONFIG, "target")
    return target


def _show(value: object) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def _usage(message: str) -> CompileError:
    return CompileError([Diagnostic("error", message)], EXIT_USAGE, "options")


def _config(message: str) -> CompileError:
    return CompileError([Diagnostic("error", message)], EXIT_CONFIG, "options")


#: the CTA sizes ``num_warps`` may ask for (whole warp groups beyond one)
NUM_WARPS = (1, 2, 4, 8, 12, 16)


@dataclass(frozen=True)
class CompileOptions:
    """Everything that decides what the compiler emits, validated at construction (a wrong type
    is a :class:`CompileError` with exit 1, a value out of range exit 2, as tileiras's command
    line). ``target`` may be given as a name (``"sm_90a"``); None suits the stages before the
    conversion (``--emit=cuda_tile``, the interpreter).

    * ``opt_level``: 0-3, the ``tile-optimize-O<N>`` pipeline (tileiras's ``-O``, default 3).
    * ``num_stages``: K-loop pipeline depth for every kernel (None: each kernel's
      ``num_stages`` / ``tt.num_stages``, default 4, fewer where they do not fit in shared
      memory; 1 turns pipelining off).
    * ``num_warps``: the CTA's warps for every kernel (None: each kernel's ``num_warps``, else
      the layout stage's rule, runtime/layouts/kernel.default_num_warps); on the async path
      these are the consumer warps, the producer warp group comes on top.
    * ``use_wgmma`` (sm_90 ``wgmma`` for dots, else ``mma.sync``), ``use_tcgen05`` (sm_100
      ``tcgen05.mma`` for the dots it fits, accumulator in tensor memory, else ``mma.sync``;
      runtime/layouts/mma_choice.py), ``use_cp_async`` (dot
      operands copied to shared memory with ``cp.async``), ``pipelining`` (prefetch dot operands
      across K-loop iterations).
    * ``use_tma`` (sm_90/sm_100 K loops staged by TMA into an mbarrier pipeline) and
      ``warp_specialize`` (a producer warp group feeding the kernel's warps): the async path
      of docs/pipelines.md, where runtime/passes/async_rule.py says it applies;
      ``overlap_mma`` (its general form on sm_90 issues a loop's last dot beside the next
      iteration's first: FlashAttention-3's intra-warpgroup overlap, section 16; None and
      False: off, measured slower on an H200, section 46; True: wherever the registers fit);
      ``cta_pair`` (a GEMM whose ``num_cta_in_cga`` hint is 2 runs on a CTA pair on sm_100:
      ``tcgen05.mma.cta_group::2``, section 18; on sm_90 only where one CTA cannot hold the
      tile's accumulator, section 46; elsewhere the tile block's rows are divided between a
      cluster's two CTAs, section 40. None: that rule; True: every GEMM that can pair, sm_90's
      smaller tiles too; False: one CTA a tile block).
    * ``share_maps``: where every tensor map an async kernel builds on the device is the
      same in all its tile blocks, a CTA uses the maps the CTA before it on its SM built in the
      same launch instead of building and publishing its own (docs/pipelines.md section 57);
      False: every CTA builds its own.
    * ``lineinfo``, ``device_debug`` (only at ``opt_level`` 0, as tileiras), ``sanitize``
      (None or ``"memcheck"``): carried to the emitter; see docs/driver.md for what each emits.
    * ``verify``: run the verifier after every stage.
    """

    target: Optional[Target] = None
    opt_level: int = DEFAULT_OPT_LEVEL
    num_stages: Optional[int] = None
    num_warps: Optional[int] = None
    use_wgmma: bool = True
    use_tcgen05: bool = True
    use_cp_async: bool = True
    pipelining: bool = True
    use_tma: bool = True
    warp_specialize: bool = True
    overlap_mma: Optional[bool] = None
    cta_pair: Optional[bool] = None
    share_maps: bool = True
    lineinfo: bool = False
    device_debug: bool = False
    sanitize: Optional[str] = None
    verify: bool = True

    def __post_init__(self) -> None:
        if self.target is not None and not isinstance(self.target, Target):
            object.__setattr__(self, "target", parse_target(self.target))
        opt = self.opt_level
        if isinstance(opt, bool) or not isinstance(opt, int):
            raise _usage(f"opt_level must be an int 0-3, got {_show(opt)}")
        if opt not in OPT_LEVELS:
            raise _config(f"invalid optimization level: {opt}")
        n = self.num_stages
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise _usage(f"num_stages must be None or an int >= 1, got {_show(n)}")
        if n is not None and not 1 <= n <= 8:
            raise _config(f"invalid num_stages: {n} (1-8)")
        w = self.num_warps
        if w is not None and (isinstance(w, bool) or not isinstance(w, int)):
            raise _usage(f"num_warps must be None or an int, got {_show(w)}")
        if w is not None and w not in NUM_WARPS:
            raise _config(f"invalid num_warps: {w} ({', '.join(map(str, NUM_WARPS))})")
        for name in (
            "use_wgmma",
            "use_tcgen05",
            "use_cp_async",
            "pipelining",
            "use_tma",
            "warp_specialize",
            "share_maps",
            "lineinfo",
            "device_debug",
        ):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise _usage(f"{name} must be True or False, got {_show(value)}")
        for name in ("overlap_mma", "cta_pair"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise _usage(f"{name} must be None, True or False, got {_show(value)}")
        if not isinstance(self.verify, bool):
            raise _usage(f"verify must be True or False, got {_show(self.verify)}")
        if self.sanitize is not None and not isinstance(self.sanitize, str):
            raise _usage(f"sanitize must be None or 'memcheck', got {_show(self.sanitize)}")
        if self.sanitize is not None and self.sanitize not in SANITIZERS:
            raise _config(
                f"unknown sanitizer '{self.sanitize}'; supported: {', '.join(SANITIZERS)}"
            )
        if self.device_debug and opt != 0:
            raise _config(
                "optimized debugging is currently not supported, change the optimization "
                "level to 0 or disable full debug info"
            )

    def fingerprint(self) -> str:
        """Every field, as stable text (an input of the compile cache key)."""
        return ";".join(
            f"{name}={getattr(self, name)}"
            for name in (
                "target",
                "opt_level",
                "num_stages",
                "num_warps",
                "use_wgmma",
                "use_tcgen05",
                "use_cp_async",
                "pipelining",
                "use_tma",
                "warp_specialize",
                "overlap_mma",
                "cta_pair",
                "share_maps",
                "lineinfo",
                "device_debug",
                "sanitize",
                "verify",
            )
        )

    def suffix_for(self, sm: int) -> str:
        """The ``.target`` suffix the user asked for on ``sm`` ("" when the target differs)."""
        return self.target.suffix if self.target is not None and self.target.sm == sm else ""


DEFAULT = CompileOptions()
#: per thread, the options of the compiles in progress (innermost last); a thread-local, not a
#: ContextVar, because compiles are synchronous and ``threading`` is loaded anyway (subprocess)
_ACTIVE = threading.local()


def current() -> CompileOptions:
    """The options of the compile in progress on this thread (the defaults outside one)."""
    stack = getattr(_ACTIVE, "stack", None)
    return stack[-1] if stack else DEFAULT


@contextmanager
def active(options: Optional[CompileOptions]) -> Iterator[CompileOptions]:
    """Make ``options`` :func:`current` inside the block (None: keep the current ones)."""
    if options is None:
        yield current()
        return
    stack = getattr(_ACTIVE, "stack", None)
    if stack is None:
        stack = _ACTIVE.stack = []
    stack.append(options)
    try:
        yield options
    finally:
        stack.pop()


__all__ = [
    "CompileOptions",
    "DEFAULT_OPT_LEVEL",
    "GPU_NAMES",
    "OPT_LEVELS",
    "SANITIZERS",
    "TARGET_NAMES",
    "Target",
    "active",
    "current",
    "parse_target",
]
