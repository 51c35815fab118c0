"""Custom verifier hook: ``optimization_hints`` (types_attrs.md sec. 4.1).

Spec use: ``verify: [{custom: optimization_hints, params: [latency, allow_tma]}]``; ``params``
lists the hint parameters the op understands. Hints are accepted silently unless
``VerifyOptions.unsupported_hints`` is set (one warning per offending key); with ``err_hints`` too,
the first offending architecture entry makes the op fail with
``Optimization hints verification failed``.
"""

from __future__ import annotations

from typing import Callable, Optional

from tilegen.runtime.attributes import Attribute, BoolAttr, DictAttr, IntegerAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook

KNOWN_ARCH_KEYS = frozenset(
    "sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121 default".split()
)
#: Architectures that cannot cluster CTAs (num_cta_in_cga must be 1).
_SINGLE_CTA_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89")


def rule_args(ctx: VerifyContext, name: str) -> dict:
    """The spec rule ``{custom: name, ...}`` of the op being verified (its extra keys)."""
    current = getattr(ctx, "rule", None) or {}
    if current.get("custom") == name:
        return current
    for rule in ctx.opdef.verify or ():
        if isinstance(rule, dict) and rule.get("custom") == name:
            return rule
    return {}


def _int(attr: Attribute) -> Optional[int]:
    if isinstance(attr, IntegerAttr):
        return attr.value
    if isinstance(attr, BoolAttr):  # MLIR's BoolAttr is an i1 IntegerAttr
        return int(attr.value)
    return None


def _pow2_at_most(v: int, limit: int) -> bool:
    return 0 < v <= limit and v & (v - 1) == 0


def _num_cta_in_cga(attr: Attribute, ctx_key: str) -> Optional[str]:
    v = _int(attr)
    if v is None:
        return f"integer value expected for {ctx_key}.num_cta_in_cga"
    v &= (1 << 64) - 1  # read as uint64
    if ctx_key.startswith(_SINGLE_CTA_ARCHS) and v != 1:
        return f"expected 1 for {ctx_key}.num_cta_in_cga"
    if not _pow2_at_most(v, 16):
        return f"expected power-of-two ≤ 16 for {ctx_key}.num_cta_in_cga"
    return None


def _num_worker_warps(attr: Attribute, ctx_key: str) -> Optional[str]:
    v = _int(attr)
    if v is None:
        return f"integer value expected for {ctx_key}.num_worker_warps_per_cta"
    if not _pow2_at_most(v, 32):
        return f"expected power-of-two ≤ 32 for {ctx_key}.num_worker_warps_per_cta"
    return None


def _allow_tma(attr: Attribute, ctx_key: str) -> Optional[str]:
    if not isinstance(attr, BoolAttr):
        return f"boolean value expected for {ctx_key}.allow_tma"
    return None


def _ranged(name: str, lo: int, hi: int) -> Callable[[Attribute, str], Optional[str]]:
    def check(attr: Attribute, ctx_key: str) -> Optional[str]:
        v = _int(attr)
        if v is None:
            return f"integer value expected for {ctx_key}.{name}"
        if not lo <= v <= hi:
            return f"integer value in the range [{lo}, {hi}] is expected for {ctx_key}.{name}"
        return None

    return check


VALIDATORS: dict[str, Callable[[Attribute, str], Optional[str]]] = {
    "num_cta_in_cga": _num_cta_in_cga,
    "num_worker_warps_per_cta": _num_worker_warps,
    "allow_tma": _allow_tma,
    "latency": _ranged("latency", 1, 10),
    "occupancy": _ranged("occupancy", 1, 32),
}


def _format_attr(attr: Attribute) -> str:
    try:
        from tilegen.runtime.asm.printer import OpPrinter

        return OpPrinter().format_attribute(attr)
    except Exception:  # the printer is optional for the verifier
        return str(getattr(attr, "value", attr))


def _entry_warnings(ctx: VerifyContext, arch: str, params: DictAttr, allowed: tuple) -> bool:
    """Warn about each offending parameter of one architecture entry; True if any."""
    if arch not in KNOWN_ARCH_KEYS:
        ctx.warning(f"unknown hint key {arch}", op_prefix=False)
        return True
    bad = False
    for key, value in sorted(params.items, key=lambda kv: kv[0]):
        if allowed and key not in allowed:
            ctx.warning(f"{key} is not known hint for current Operation", op_prefix=False)
            bad = True
            continue
        check = VALIDATORS.get(key)
        msg = check(value, arch) if check else f"unknown param {key} for {arch}"
        if msg:
            ctx.warning(msg, op_prefix=False)
            bad = True
    return bad


@hook("optimization_hints")
def _optimization_hints(op: Operation, ctx: VerifyContext) -> None:
    hints = ctx.attr("optimization_hints")
    entries = getattr(hints, "entries", None)
    if not entries:
        return
    allowed = tuple(rule_args(ctx, "optimization_hints").get("params", ()))
    for arch, params in sorted(entries, key=lambda kv: kv[0]):
        if not isinstance(params, DictAttr):
            ctx.error(
                f"expected dictionary attribute for optimization_hints entry `{arch}` got "
                f"value={_format_attr(params)}"
            )
            return
        if not ctx.options.unsupported_hints:
            continue
        if _entry_warnings(ctx, arch, params, allowed) and ctx.options.err_hints:
            ctx.error("Optimization hints verification failed")
            return
