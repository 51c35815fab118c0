"""Derive the bytecode tables (generated/<dialect>/bytecode_tables.py) from spec/.

Wire-format constants come from ``spec/types/bytecode.yaml``; per-op instruction layouts are derived
from each op's operands/attributes/results (with their ``since``) and its ``bytecode:`` key. The
derivation re-checks what the spec states explicitly (flag bits, opcode ceilings) and fails with a
located :class:`SpecError` on disagreement.
"""

from __future__ import annotations

from tilegen.generator.spec_loader import Spec, SpecError


def _v(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split("."))


def flag_bits(op: dict) -> list[tuple[str, str, str]]:
    """(field name, 'attr'|'operand', since) in flag-bit order: grouped by since, attrs first."""
    op_since = op.get("since", "13.1")
    fields = []
    for a in op.get("attributes") or []:
        if a.get("optional"):
            fields.append((a["name"], "attr", a.get("since", op_since)))
    if "AttrSizedOperandSegments" in (op.get("traits") or []):
        for o in op.get("operands") or []:
            if o.get("kind") == "optional":
                fields.append((o["name"], "operand", o.get("since", op_since)))
    order = {"attr": 0, "operand": 1}
    # stable sort keeps declaration order inside each (since, kind) group
    return sorted(fields, key=lambda f: (_v(f[2]), order[f[1]]))


def op_layout(op: dict, attr_encodings: dict) -> dict:
    where = f"{op['_file']}: ops[{op['name']}].bytecode"
    bc = op.get("bytecode") or {}
    bits = flag_bits(op)
    derived = {name: i for i, (name, _, _) in enumerate(bits)}
    if "flags" in bc and bc["flags"] != derived:
        raise SpecError(f"{where}.flags: {bc['flags']} disagrees with the derived bits {derived}")
    flags_since = min((b[2] for b in bits), key=_v) if bits else None
    if "flags_since" in bc and bits and bc["flags_since"] != flags_since:
        raise SpecError(f"{where}.flags_since: {bc['flags_since']!r}, derived {flags_since!r}")
    operands = op.get("operands") or []
    results = op.get("results") or []
    variadic = any(o.get("kind") == "variadic" for o in operands + results)
    if "AttrSizedOperandSegments" in (op.get("traits") or []):
        operand_enc = "segments"
    elif any(o.get("kind", "single") != "single" for o in operands):
        operand_enc = "counted"
    else:
        operand_enc = "fixed"
    if bc.get("operands", operand_enc) != operand_enc:
        raise SpecError(f"{where}.operands: {bc['operands']!r}, derived {operand_enc!r}")
    if bc.get("result_count", variadic) != variadic:
        raise SpecError(f"{where}.result_count: disagrees with the op's variadic operands/results")
    attrs = []
    for a in op.get("attributes") or []:
        enc = attr_encodings.get(a["kind"])
        if enc is None:
            raise SpecError(f"{where}: attribute kind {a['kind']!r} has no bytecode encoding")
        attrs.append(
            {
                "name": a["name"],
                "enc": enc,
                "enum": a.get("enum"),
                "optional": bool(a.get("optional")),
                "since": a.get("since", op.get("since", "13.1")),
                "default": a.get("default"),
                "width": 32 if a["kind"] == "i32" else 64,
            }
        )
    return {
        "opcode": op["opcode"],
        "since": op.get("since", "13.1"),
        "result_count": variadic,
        "flags": [name for name, _, _ in bits],
        "flags_since": flags_since,
        "operands": operand_enc,
        "attributes": attrs,
        "regions": len(op.get("regions") or []),
    }


def bytecode_context(spec: Spec, dialect: str) -> dict:
    """Template context for bytecode_tables.py.j2."""
    docs = spec.docs("bytecode")
    if not docs or all(op.get("opcode") is None for op in spec.ops(dialect)):
        return {}  # a dialect without bytecode (nv_tileaa) has no tables
    bc = docs[0]
    encs = bc["attribute_encodings"]
    layouts, records = {}, {}
    for op in spec.ops(dialect):
        if op.get("opcode") is None:
            continue
        if (op.get("bytecode") or {}).get("instruction") is False:
            records[f"{dialect}.{op['name']}"] = op["opcode"]
            continue
        layouts[f"{dialect}.{op['name']}"] = op_layout(op, encs)
    for ver in bc["versions"]:
        ceiling = max(
            (l["opcode"] for l in layouts.values() if _v(l["since"]) <= _v(ver["version"])),
            default=0,
        )
        if ceiling != ver["opcode_ceiling"]:
            raise SpecError(
                f"spec/types/bytecode.yaml: versions[{ver['version']}].opcode_ceiling: "
                f"0x{ver['opcode_ceiling']:X}, but the ops up to it end at 0x{ceiling:X}"
            )
    elements = [e for d in spec.docs("elements") for e in d["element_types"]]
    return {"bc": bc, "layouts": layouts, "records": records, "elements": elements}
