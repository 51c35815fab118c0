"""The pass registry: name -> what the pass runs on, its options and its function."""

from __future__ import annotations

from typing import Callable, Optional

from tilegen.runtime.attributes import Location
from tilegen.runtime.ir import Operation
from tilegen.runtime.records import dataclass, field


class PassFailure(Exception):
    """A pass failed; ``diagnostics`` are (severity, message, loc, notes) already formatted by
    the pass (see :class:`tilegen.runtime.diagnostics.Diagnostic`)."""

    def __init__(self, diagnostics: list):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


#: ``fn(op, options) -> None``; raises :class:`PassFailure` on failure
PassFn = Callable[[Operation, dict], None]


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: PassFn
    #: op names the pass may be anchored on (empty: any op)
    anchors: tuple[str, ...] = ()
    #: option name -> (parser, default)
    options: dict = field(default_factory=dict)
    summary: str = ""

    def parse_options(self, raw: dict[str, str], where: Optional[Location] = None) -> dict:
        out = {k: default for k, (_, default) in self.options.items()}
        for key, text in raw.items():
            if key not in self.options:
                raise ValueError(f"pass '{self.name}' has no option '{key}'")
            parse, _ = self.options[key]
            try:
                out[key] = parse(text)
            except ValueError:
                raise ValueError(f"pass '{self.name}': bad value '{text}' for option '{key}'")
        return out


PASSES: dict[str, PassInfo] = {}

FUNCTIONS = ("cuda_tile.entry", "cuda_tile.testing$func")


def register(
    name: str, anchors: tuple[str, ...] = (), options: Optional[dict] = None, summary: str = ""
):
    def deco(fn: PassFn) -> PassFn:
        PASSES[name] = PassInfo(name, fn, anchors, dict(options or {}), summary)
        return fn

    return deco


def parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1"):
        return True
    if text.lower() in ("false", "0"):
        return False
    raise ValueError(text)


def load_passes() -> dict[str, PassInfo]:
    """Import every pass module (registration is a side effect) and return the registry."""
    from tilegen.runtime.passes import (  # noqa: F401
        canonicalize,
        convert_to_nv_tileaa,
        cse,
        debuginfo,
        flatten_loops,
        fuse_fma,
        k_loop_pipelining,
        k_tile_split,
        layout_assignment,
        loop_counters,
        loop_split,
        pair_rows,
        single_trip_loops,
        split_select,
    )

    return PASSES
