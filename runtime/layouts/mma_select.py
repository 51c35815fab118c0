"""Tensor-core instruction selection from spec/ptx/mma.yaml (validated against
spec/schema/ptx_mma.schema.json and turned into the Python table generated/ptx/mma.py by the
generator, so a compile parses no YAML; :func:`load_table` still reads and validates any file).

``select_mma(a, b, c, sm)`` returns the :class:`MmaRow` to emit for cuda_tile element types
``a`` x ``b`` -> ``c`` (``mmaf``: f16, bf16, tf32, f32, f64, f8E4M3FN, f8E5M2; ``mmai``: i8
with ``signed=(a_signed, b_signed)``, c i32) on target ``sm`` (80, "sm_90", "sm_90a", ...), or
raises :class:`MmaSelectError` with tileiras's wording where tileiras has one:
``Incompatibility with architecture 'sm_80': unsupported type 'f8E4M3FN'``."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

from tilegen.runtime.records import dataclass

SPEC = Path(__file__).resolve().parents[2] / "spec" / "ptx" / "mma.yaml"
SCHEMA = Path(__file__).resolve().parents[2] / "spec" / "schema" / "ptx_mma.schema.json"
FAMILIES = ("mma.sync", "wgmma", "tcgen05", "fma")


class MmaSelectError(ValueError):
    """No instruction for the requested types on the target (message as tileiras words it)."""


@dataclass(frozen=True)
class MmaRow:
    a: str
    b: str
    c: str
    family: str
    shape: str
    ptx: str
    ptx_isa: str
    sm_min: int
    sm_max: Optional[int] = None
    k_width: Optional[int] = None
    signed: Optional[tuple[bool, bool]] = None
    observed: tuple[int, ...] = ()
    notes: str = ""
    #: targets where codegen issues this 8-bit MMA as two f16 ones on unpacked fragments
    unpack_sm: tuple[int, ...] = ()

    def mnk(self) -> Optional[tuple[int, int, int]]:
        """(m, n, k) of an mma.sync shape (None for wgmma's m64nNkK and the others)."""
        m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", self.shape)
        return tuple(int(x) for x in m.groups()) if m else None

    def opcode(self, n: Optional[int] = None) -> str:
        """The PTX opcode; wgmma rows need the instruction's N (8..256, multiple of 8)."""
        if "{n}" in self.ptx:
            if n is None or not (8 <= n <= 256 and n % 8 == 0):
                raise MmaSelectError(f"{self.family} needs an N in 8..256 (multiple of 8)")
            return self.ptx.replace("{n}", str(n))
        return self.ptx

    def supports(self, sm: int) -> bool:
        return self.sm_min <= sm and (self.sm_max is None or sm <= self.sm_max)


@dataclass(frozen=True)
class MmaTable:
    rows: tuple[MmaRow, ...]
    archs: tuple[int, ...]
    diagnostics: dict
    type_min_sm: dict


def _validate(doc) -> None:
    import json

    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema ships with the dev install
        return
    schema = json.loads(SCHEMA.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "<root>"
        raise MmaSelectError(f"{SPEC.name}: {where}: {e.message}")


def load_table(path: Path = SPEC) -> MmaTable:
    """Parse and validate a selection table (default: spec/ptx/mma.yaml)."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise MmaSelectError(f"{path}: cannot load the mma selection table: {e}") from None
    _validate(doc)
    return _build(doc)


def _build(doc: dict) -> MmaTable:
    rows = []
    for r in doc["instructions"]:
        r = dict(r)
        r["observed"] = tuple(r.get("observed", ()))
        r["unpack_sm"] = tuple(r.get("unpack_sm", ()))
        if "signed" in r:
            r["signed"] = tuple(r["signed"])
        rows.append(MmaRow(**r))
    return MmaTable(
        tuple(rows), tuple(doc["archs"]), dict(doc["diagnostics"]), dict(doc["type_min_sm"])
    )


@lru_cache(maxsize=1)
def table() -> MmaTable:
    """The table of spec/ptx/mma.yaml, from generated/ptx/mma.py (``make generate``)."""
    from tilegen.generated.ptx import mma

    return _build(
        {
            "archs": mma.ARCHS,
            "diagnostics": mma.DIAGNOSTICS,
            "type_min_sm": mma.TYPE_MIN_SM,
            "instructions": mma.INSTRUCTIONS,
        }
    )


def parse_sm(sm) -> int:
    """80, "80", "sm_80", "sm_90a" -> the SM number."""
    if isinstance(sm, int) and not isinstance(sm, bool):
        return sm
    m = re.fullmatch(r"(?:sm_)?(\d+)[af]?", str(sm))
    if not m:
        raise MmaSelectError(f"unknown GPU target {sm!r} (expected e.g. 'sm_80')")
    return int(m.group(1))


def candidates(a: str, b: str, c: str, sm, signed=None) -> list[MmaRow]:
    """Every row (all families) usable for these types on `sm`."""
    smn = parse_sm(sm)
    sig = None if signed is None else tuple(bool(s) for s in signed)
    out = []
    for row in table().rows:
        if (row.a, row.b, row.c) != (a, b, c) or not row.supports(smn):
            continue
        if row.signed is not None and row.signed != (sig or (True, True)):
            continue
        out.append(row)
    return out


def select_mma(a: str, b: str, c: str, sm, signed=None, family: Optional[str] = None) -> MmaRow:
    """The instruction for ``a`` x ``b`` -> ``c`` on ``sm``: by default the warp-level
    ``mma.sync`` row (or ``fma`` where tileiras uses no tensor core), else the row of
    ``family``. Raises :class:`MmaSelectError` with a tileiras-style message."""
    t = table()
    smn = parse_sm(sm)
    if family is not None and family not in FAMILIES:
        raise MmaSelectError(f"unknown mma family {family!r} (expected one of {FAMILIES})")
    known = {r.a for r in t.rows} | {r.c for r in t.rows}
    for ty in (a, b, c):
        if ty not in known:
            raise MmaSelectError(f"no tensor-core instruction takes element type '{ty}'")
    if a != b:
        raise MmaSelectError(t.diagnostics.get("mixed_operands", "operand types differ"))
    for ty in (a, b):
        need = t.type_min_sm.get(ty)
        if need is not None and smn < need:
            raise MmaSelectError(t.diagnostics["unsupported_type"].format(sm=smn, type=ty))
    rows = candidates(a, b, c, smn, signed)
    order = (family,) if family else ("mma.sync", "fma")
    for fam in order:
        for row in rows:
            if row.family == fam:
                return row
    what = f"{a} x {b} -> {c}"
    if a == "i8":
        s = tuple(signed) if signed is not None else (True, True)
        what += " (" + ", ".join("signed" if x else "unsigned" for x in s) + ")"
    fams = family or "mma.sync"
    raise MmaSelectError(f"no {fams} instruction for {what} on sm_{smn}")
