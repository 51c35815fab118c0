"""The conversion driver: target check, pattern groups in the declared order, legality.

Mirrors seed 003's ``convertCudaTileToTileAA``: a malformed target fails first; the groups run
one after another, each to its own fixpoint (V2b's greedy driver, no folding); any op of an
illegal dialect left afterwards fails the conversion with one note per residual op.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional, Union

from tilegen.runtime.attributes import IntegerAttr, StringAttr
from tilegen.runtime.conversion.declared import ConversionContext, compile_groups
from tilegen.runtime.conversion.types import is_legal_type
from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.rewrite import GreedyConfig, apply_pattern_groups
from tilegen.runtime.types import IntegerType

SPEC_MODULE = "cuda_tile_to_nv_tileaa"
CC_ATTR = "nv_tileaa.compute_capability"
TARGET_SPEC_ATTR = "nv_tileaa.target_spec"


class ConversionError(Exception):
    """The conversion failed; ``diagnostics`` are located errors (with notes)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


@lru_cache(maxsize=None)
def load_spec(name: str = SPEC_MODULE) -> dict:
    import importlib

    return importlib.import_module(f"tilegen.generated.lowerings.{name}").SPEC


_SM = re.compile(r"^(?:sm_?|compute_)?(\d+)([a-z]?)$")


def parse_target(text: Union[str, int, None]) -> Optional[int]:
    """``sm_90`` / ``sm_100a`` / ``90`` / ``9.0`` -> 90 / 100 / 90 / 90; None when malformed."""
    if isinstance(text, int):
        return text if 10 <= text < 1000 else None
    if not text:
        return None
    text = text.strip().lower()
    if re.fullmatch(r"\d+\.\d", text):
        major, minor = text.split(".")
        return int(major) * 10 + int(minor)
    m = _SM.match(text)
    if m is None:
        return None
    value = int(m.group(1))
    return value if 10 <= value < 1000 else None


def module_target(module: Operation) -> Optional[int]:
    """The compute capability a module names itself (seed 002: compute_capability, else the
    ``"sm_XX"`` target_spec fallback)."""
    attr = module.attributes.get(CC_ATTR)
    if isinstance(attr, IntegerAttr):
        return parse_target(int(attr.value))
    spec = module.attributes.get(TARGET_SPEC_ATTR)
    if isinstance(spec, StringAttr):
        return parse_target(spec.value)
    return None


def wrap_module(module: Operation) -> Operation:
    """A ``builtin.module`` around a bare ``cuda_tile.module`` (bytecode input)."""
    if module.name == "builtin.module":
        return module
    outer = Operation("builtin.module", [], [], {}, 1, module.loc)
    outer.regions[0].append(Block()).append(module)
    return outer


def convert_module(
    module: Operation, compute_capability: Union[str, int, None], spec_name: str = SPEC_MODULE
) -> Operation:
    """Convert ``module`` in place (a bare cuda_tile.module is wrapped) and return the
    ``builtin.module``; raises :class:`ConversionError`."""
    spec = load_spec(spec_name)
    root = wrap_module(module)
    option = parse_target(compute_capability) if compute_capability is not None else None
    # seed 002: a module that names its target short-circuits the option; a malformed option
    # is an error either way
    cc = module_target(root) or option
    if cc is None or (compute_capability is not None and option is None):
        raise ConversionError([Diagnostic("error", spec["diagnostics"]["bad_target"], root.loc)])
    root.set_default_attr(CC_ATTR, IntegerAttr(cc, IntegerType(32)))
    ctx = ConversionContext(spec, cc)
    groups = compile_groups(ctx)
    config = GreedyConfig(max_iterations=4, fold=False, cse_constants=False)
    try:
        apply_pattern_groups(root, groups, config)
    except Exception as e:  # a pattern bug still ends in a located diagnostic
        msg = f"{spec['diagnostics']['failed']}: internal error: {type(e).__name__}: {e}"
        raise ConversionError([Diagnostic("error", msg, root.loc)]) from e
    residual = illegal_ops(root, spec)
    if residual:
        notes = []
        for op in residual[:20]:
            why = ctx.unsupported.get(op.name)
            msg = f"failed to legalize operation '{op.name}'" + (f": {why}" if why else "")
            notes.append(Diagnostic("note", msg, op.loc))
        diag = Diagnostic("error", spec["diagnostics"]["failed"], residual[0].loc)
        diag.notes = notes
        raise ConversionError([diag])
    return root


def illegal_ops(root: Operation, spec: dict) -> list[Operation]:
    """Ops left in an illegal dialect, or dynamically-legal ops whose types are not converted."""
    illegal = set(spec["illegal_dialects"])
    dynamic = {d["op"] for d in spec.get("dynamically_legal", ())}
    out = []
    for op in root.walk():
        if op is root:
            continue
        if op.dialect in illegal:
            out.append(op)
        elif op.name in dynamic and not all(is_legal_type(r.type) for r in op.results):
            out.append(op)
    return out
