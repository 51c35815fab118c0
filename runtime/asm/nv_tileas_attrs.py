"""Text syntax of the nv_tileas layout attributes (runtime/layouts/), hooked into
runtime/asm/attr_syntax.py through ``DIALECT_ATTR_MODULES``.

``#nv_tileas.blocked<{sizePerThread = [..], threadsPerWarp = [..], warpsPerCTA = [..],
order = [..]}>``, ``#nv_tileas.slice<{dim = D, parent = LAYOUT}>`` and
``#nv_tileas.shared<{vec = V, perPhase = P, maxPhase = M, order = [..]}>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tilegen.runtime.asm.attr_syntax import parse_dict_entries
from tilegen.runtime.attributes import ArrayAttr, Attribute, IntegerAttr
from tilegen.runtime.layouts.attrs import (
    BlockedLayout,
    DistributedLayout,
    Layout,
    LayoutError,
    SharedLayout,
    SliceLayout,
)
from tilegen.runtime.layouts.mma import DotOperandLayout, MmaLayout

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser

_FIELDS = {
    "blocked": ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"),
    "slice": ("dim", "parent"),
    "shared": ("vec", "perPhase", "maxPhase", "order"),
    "mma": ("versionMajor", "warpsPerCTA", "instrShape"),
    "dot_op": ("opIdx", "parent", "kWidth"),
}


def parse_nv_tileas_attr(p: "OpParser", mnemonic: str, loc) -> Attribute:
    """The rest of ``#nv_tileas.MNEMONIC<{...}>`` (the mnemonic token was consumed)."""
    if mnemonic not in _FIELDS:
        p._fail(f"unknown nv_tileas attribute '{mnemonic}'", loc)
    p._expect("<")
    at = p.loc()
    entries = dict(parse_dict_entries(p))
    p._expect(">")
    want = _FIELDS[mnemonic]
    missing = [k for k in want if k not in entries]
    extra = [k for k in entries if k not in want]
    if missing or extra:
        what = f"missing '{missing[0]}'" if missing else f"unknown key '{extra[0]}'"
        p._fail(f"#nv_tileas.{mnemonic}: {what} (expected keys {', '.join(want)})", at)

    def ints(key) -> tuple[int, ...]:
        a = entries[key]
        if not isinstance(a, ArrayAttr) or not all(isinstance(x, IntegerAttr) for x in a.values):
            p._fail(f"#nv_tileas.{mnemonic}: '{key}' must be an array of integers", at)
        return tuple(x.value for x in a.values)

    def int1(key) -> int:
        a = entries[key]
        if not isinstance(a, IntegerAttr):
            p._fail(f"#nv_tileas.{mnemonic}: '{key}' must be an integer", at)
        return a.value

    try:
        if mnemonic == "blocked":
            return BlockedLayout(
                ints("sizePerThread"), ints("threadsPerWarp"), ints("warpsPerCTA"), ints("order")
            )
        if mnemonic == "slice":
            parent = entries["parent"]
            if not isinstance(parent, DistributedLayout):
                p._fail("#nv_tileas.slice: 'parent' must be a blocked or slice layout", at)
            return SliceLayout(int1("dim"), parent)
        if mnemonic in ("mma", "dot_op"):  # tensor-core layouts (runtime/layouts/mma.py)
            if mnemonic == "mma":
                return MmaLayout(int1("versionMajor"), ints("warpsPerCTA"), ints("instrShape"))
            if not isinstance(entries["parent"], MmaLayout):
                p._fail("#nv_tileas.dot_op: 'parent' must be an mma layout", at)
            return DotOperandLayout(int1("opIdx"), entries["parent"], int1("kWidth"))
        return SharedLayout(int1("vec"), int1("perPhase"), int1("maxPhase"), ints("order"))
    except LayoutError as e:
        p._fail(f"#nv_tileas.{mnemonic}: {e}", at)


def format_nv_tileas_attr(a: Attribute) -> Optional[str]:
    return a.format_asm() if isinstance(a, Layout) else None
