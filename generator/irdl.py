"""Build the IRDL rendering of a dialect (``templates/irdl.mlir.j2``) from the spec.

The IRDL file lets real MLIR verify tilegen's generic print (``tests/test_mlir_irdl.py``). IRDL-defined
types and attributes only parse in MLIR's generic parameter syntax, so the dialect types are declared
with attribute parameters and ``tilegen.mlir_check`` rewrites tilegen's print into that form:

    !cuda_tile.tile<4x8xf32>                  -> !cuda_tile.tile<array<i64: 4, 8>, f32>
    !cuda_tile.ptr<f16>                       -> !cuda_tile.ptr<f16>
    !cuda_tile.tensor_view<?x8xf32, strides=[8,1]>
        -> !cuda_tile.tensor_view<f32, array<i64: DYN, 8>, array<i64: 8, 1>>   (DYN = INT64_MIN)
    !cuda_tile.partition_view<tile=(8), TV, dim_map=[0]>
        -> !cuda_tile.partition_view<array<i32: 8>, TV', array<i32: 0>, unit>
    #cuda_tile.rounding<zero>                 -> #cuda_tile.rounding<"zero">

Per op the IRDL declares: operand/result groups (single, optional, variadic) with the type
constraint of spec/types/constraints.yaml, the required inherent attributes with their attribute
constraint, and the regions with their block count. Two IRDL rules shape the output:

* every constraint SSA value is a variable bound by its first match, so values that must have the
  same type (verify ``same_type``) share one variable, ``same_shape``/``same_element_type`` share
  the shape/element variable, and everything else gets fresh variables;
* for the same reason one variadic group would force all its values to one type, so each variadic
  group is expanded into :data:`VARIADIC_SLOTS` optional slots (``name_0`` ...) with fresh
  constraints; the checker rewrites ``operandSegmentSizes``/``resultSegmentSizes`` to match.
"""

from __future__ import annotations

import re
from typing import Optional

#: Number of optional slots one variadic operand/result group is expanded into.
VARIADIC_SLOTS = 16

#: Builtin attribute names for ``irdl.base``.
_ATTR_BASE = {
    "integer": '"#builtin.integer"',
    "string": '"#builtin.string"',
    "symbol_ref": '"#builtin.symbol_ref"',
    "array": '"#builtin.array"',
    "dense_array": '"#builtin.dense_array"',
    "type": '"#builtin.type"',
    "dict": '"#builtin.dictionary"',
}

#: Parameter count of each dialect type/attribute defined here (for ``irdl.parametric``).
PARAM_COUNT = {
    "ptr": 1,
    "tile": 2,
    "token": 0,
    "tensor_view": 3,
    "partition_view": 4,
    "strided_view": 5,
    "gather_scatter_view": 4,
    "padding_value": 1,
}

#: Dialect types and their kind in constraints.yaml ``match.kind``.
VIEW_TYPES = ("partition_view", "strided_view", "gather_scatter_view")


#: Element types of NVIDIA's dialect that upstream MLIR (the cross-check) cannot parse; IRDL
#: constraints leave them out, so IR using them is outside what the cross-check covers.
MLIR_UNKNOWN_ELEMENTS = frozenset({"fnv8E5M3FNU"})


def snake(name: str) -> str:
    """IRDL operand/result/region names must be lower-case identifiers."""
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return re.sub(r"\W", "_", out)


def irdl_op_name(name: str) -> str:
    """IRDL op names allow only ``[a-z0-9_]``: ``testing$func`` is declared as ``testing_func``."""
    return name.replace("$", "_")


def slot_names(name: str, kind: str) -> list[tuple[str, str]]:
    """(IRDL name, variadicity) of the slots one spec operand/result group becomes."""
    if kind == "variadic":
        return [(f"{snake(name)}_{i}", "optional") for i in range(VARIADIC_SLOTS)]
    return [(snake(name), kind if kind in ("optional",) else "single")]


class _Body:
    """SSA constraint lines of one ``irdl.operation``/``irdl.type``/``irdl.attribute``."""

    def __init__(self, dialect: str, groups: dict[str, list[str]]):
        self.dialect = dialect
        self.groups = groups
        self.lines: list[str] = []
        self.n = 0

    def new(self, rhs: str) -> str:
        var = f"%c{self.n}"
        self.n += 1
        self.lines.append(f"{var} = {rhs}")
        return var

    def sym(self, name: str) -> str:
        # tile/ptr/token/views are cuda_tile types, whichever dialect's ops use them
        owner = "cuda_tile" if name in PARAM_COUNT and self.dialect != "cuda_tile" else self.dialect
        return f"@{owner}::@{name}"

    def elements(self, names: list[str]) -> list[str]:
        out: list[str] = []
        for n in names:
            for e in self.groups.get(n, [n]):
                if e not in out:
                    out.append(e)
        return out

    def of_kind(self, name: str, alone: bool) -> str:
        """Any ``name`` type/attribute. Inside ``irdl.any_of`` MLIR 22 cannot load ``irdl.base
        @sym`` (it aborts), so alternatives use ``irdl.parametric`` with fresh ``irdl.any``."""
        if alone:
            return self.new(f"irdl.base {self.sym(name)}")
        params = [self.new("irdl.any") for _ in range(PARAM_COUNT[name])]
        return self.new(f"irdl.parametric {self.sym(name)}<{', '.join(params)}>")

    def element(self, names: Optional[list[str]]) -> str:
        if not names:
            return self.new("irdl.any")
        elems = self.elements(names)
        alts = []
        for e in elems:
            if e == "ptr":
                alts.append(self.of_kind("ptr", len(elems) == 1))
            elif e in MLIR_UNKNOWN_ELEMENTS:  # NVIDIA-only element types upstream MLIR lacks
                continue
            elif re.fullmatch(r"i\d+|index|bf16|tf32|f\d+|f\d+E\w+", e):
                alts.append(self.new(f"irdl.is {e}"))
            else:  # a type IRDL cannot name here (an nv_tileaa pointer element): unchecked
                return self.new("irdl.any")
        return alts[0] if len(alts) == 1 else self.new(f"irdl.any_of({', '.join(alts)})")

    def any_of_bases(self, names) -> str:
        alts = [self.of_kind(n, len(names) == 1) for n in names]
        return alts[0] if len(alts) == 1 else self.new(f"irdl.any_of({', '.join(alts)})")

    # ----- type constraints (constraints.yaml ``match``)
    def type_constraint(
        self, match: Optional[dict], shape: Optional[str] = None, elem: Optional[str] = None
    ) -> str:
        kind = (match or {}).get("kind", "any")
        if kind == "tile":
            if shape is None:
                shape = self.new(
                    "irdl.is array<i64>"
                    if match.get("rank") == 0
                    else f"irdl.base {_ATTR_BASE['dense_array']}"
                )
            if elem is None:
                elem = self.element(match.get("element"))
            return self.new(f"irdl.parametric {self.sym('tile')}<{shape}, {elem}>")
        if kind in ("token", "tensor_view") + VIEW_TYPES:
            return self.any_of_bases([kind])
        if kind == "tile_view":
            return self.any_of_bases(VIEW_TYPES)
        if kind == "cuda_tile":
            numbers = [
                self.new(f"irdl.is {e}")
                for e in self.elements(["AnyInt", "AnyFloat"])
                if e not in MLIR_UNKNOWN_ELEMENTS
            ]
            bases = [
                self.of_kind(n, False) for n in ("tile", "ptr", "token", "tensor_view") + VIEW_TYPES
            ]
            return self.new(f"irdl.any_of({', '.join(numbers + bases)})")
        return self.new("irdl.any")

    def shape_var(self, match: Optional[dict]) -> str:
        if (match or {}).get("rank") == 0:
            return self.new("irdl.is array<i64>")
        return self.new(f"irdl.base {_ATTR_BASE['dense_array']}")

    # ----- attribute constraints (constraints.yaml ``attributes``)
    def attr_constraint(self, match: dict, enums: dict[str, dict]) -> str:
        attr = match.get("attr", "any")
        if attr == "enum":
            return self.new(f"irdl.base {self.sym(enums[match['enum']]['mnemonic'])}")
        if attr == "i32_enum":
            cases = [self.new(f"irdl.is {c['value']} : i32") for c in enums[match["enum"]]["cases"]]
            return self.new(f"irdl.any_of({', '.join(cases)})")
        if attr == "unit":
            return self.new("irdl.is unit")
        if attr == "bool":
            t, f = self.new("irdl.is true"), self.new("irdl.is false")
            return self.new(f"irdl.any_of({t}, {f})")
        if attr in _ATTR_BASE:
            return self.new(f"irdl.base {_ATTR_BASE[attr]}")
        return self.new("irdl.any")


def _strip_wrappers(constraint: str) -> tuple[str, bool]:
    """``OptionalAttr<X>``/``DefaultValuedAttr<X, d>`` -> (X, has_default_or_optional)."""
    m = re.fullmatch(
        r"(OptionalAttr|DefaultValuedAttr|DefaultValuedOptionalAttr)<(.*)>", constraint
    )
    if not m:
        return constraint, False
    inner = m.group(2)
    if m.group(1) != "OptionalAttr":
        depth = 0
        for i, ch in enumerate(inner):
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "," and depth == 0:
                inner = inner[:i]
                break
    return inner.strip(), True


def trait_rules(op: dict) -> list[dict]:
    """Verify-style rules implied by shape/element traits (MLIR ``SameOperands...`` traits)."""
    operands = [o["name"] for o in op.get("operands", [])]
    everything = operands + [r["name"] for r in op.get("results", [])]
    rules: list[dict] = []
    for t in op.get("traits") or []:
        if t == "SameOperandsAndResultShape":
            rules.append({"same_shape": everything})
        elif t == "SameOperandsAndResultElementType":
            rules.append({"same_element_type": everything})
        elif t == "SameOperandsShape":
            rules.append({"same_shape": operands})
        elif t == "SameOperandsElementType":
            rules.append({"same_element_type": operands})
        else:
            m = re.fullmatch(r"TypesMatchWith\((\w+)->(\w+) via ::getI1SameShape\(\$_self\)\)", t)
            if m:
                rules.append({"same_shape": [m.group(1), m.group(2)]})
    return rules


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def union(self, names: list[str]) -> None:
        roots = [self.find(n) for n in names]
        for r in roots[1:]:
            self.parent[r] = roots[0]


def op_irdl(op: dict, dialect: str, constraints: dict, enums: dict[str, dict]) -> dict:
    """IRDL lines of one op: constraint SSA lines plus operands/results/attributes/regions."""
    body = _Body(dialect, constraints.get("groups", {}))
    types = constraints.get("types", {})
    attr_table = constraints.get("attributes", {})
    values = [(v, "operand") for v in op.get("operands", [])]
    values += [(v, "result") for v in op.get("results", [])]
    kinds = {v["name"]: v.get("kind", "single") for v, _ in values}
    match_of = {v["name"]: (types.get(v["type"]) or {}).get("match") for v, _ in values}
    unknown = sorted({v["type"] for v, _ in values if v["type"] not in types})

    same_type, same_shape, same_elem = _UnionFind(), _UnionFind(), _UnionFind()
    for rule in list(op.get("verify") or []) + trait_rules(op):
        if not isinstance(rule, dict):
            continue
        for key, uf in (
            ("same_type", same_type),
            ("same_shape", same_shape),
            ("same_element_type", same_elem),
        ):
            names = [n for n in rule.get(key, []) if kinds.get(n, "variadic") != "variadic"]
            if key != "same_type":
                names = [n for n in names if (match_of[n] or {}).get("kind") == "tile"]
            if len(names) > 1:
                uf.union(names)
                if key == "same_type":
                    same_shape.union(
                        [n for n in names if (match_of[n] or {}).get("kind") == "tile"]
                    )
                    same_elem.union([n for n in names if (match_of[n] or {}).get("kind") == "tile"])

    shared: dict[str, str] = {}
    shape_vars: dict[str, str] = {}
    elem_vars: dict[str, str] = {}

    def constraint_for(name: str) -> str:
        match = match_of[name]
        if kinds[name] == "variadic":
            return body.type_constraint(match)
        root = same_type.find(name)
        if root in shared:
            return shared[root]
        shape = elem = None
        if (match or {}).get("kind") == "tile":
            s_root, e_root = same_shape.find(name), same_elem.find(name)
            if s_root not in shape_vars and any(
                same_shape.find(o) == s_root and o != name for o in kinds
            ):
                shape_vars[s_root] = body.shape_var(match)
            if e_root not in elem_vars and any(
                same_elem.find(o) == e_root and o != name for o in kinds
            ):
                elem_vars[e_root] = body.element(match.get("element"))
            shape, elem = shape_vars.get(s_root), elem_vars.get(e_root)
        var = body.type_constraint(match, shape, elem)
        shared[root] = var
        return var

    def slots(defs: list[dict]) -> list[tuple[str, str, str]]:
        out = []
        for d in defs:
            for slot, variadicity in slot_names(d["name"], d.get("kind", "single")):
                out.append((slot, variadicity, constraint_for(d["name"])))
        return out

    operands = slots(op.get("operands", []))
    results = slots(op.get("results", []))

    attributes = []
    for a in op.get("attributes", []):
        constraint, wrapped = _strip_wrappers(a.get("constraint") or "")
        if a.get("optional") or wrapped or a.get("default") is not None:
            continue  # IRDL attributes are always required
        match = (attr_table.get(constraint) or {}).get("match") or {
            "attr": _KIND_ATTR.get(a["kind"])
        }
        if match.get("attr") == "enum" and match.get("enum") not in enums:
            match = {"attr": "any"}
        attributes.append((a["name"], body.attr_constraint(match, enums)))

    regions = []
    no_args = "NoRegionArguments" in (op.get("traits") or [])
    for r in op.get("regions", []):
        blocks = constraints.get("regions", {}).get(r.get("constraint", "AnyRegion")) or {}
        size = blocks.get("blocks")
        rhs = "irdl.region()" if no_args else "irdl.region"
        var = body.new(f"{rhs} with size {size}" if size else rhs)
        regions.append((snake(r["name"]), var))
    return {
        "name": irdl_op_name(op["name"]),
        "summary": op.get("summary") or "",
        "lines": body.lines,
        "operands": operands,
        "results": results,
        "attributes": attributes,
        "regions": regions,
        "unknown_types": unknown,
    }


#: Fallback attribute constraint by spec ``kind`` when the constraint name is not in the table.
_KIND_ATTR = {
    "enum": "any",
    "i32-enum": "any",
    "unit": "unit",
    "bool": "bool",
    "i32": "integer",
    "i64": "integer",
    "string": "string",
    "symbol-name": "string",
    "flat-symbol-ref": "symbol_ref",
    "array": "array",
    "array-of-dict": "array",
    "dense-bool-array": "dense_array",
    "dense-i32-array": "dense_array",
    "type(function)": "type",
}


def type_defs(dialect: str, groups: dict[str, list[str]]) -> list[dict]:
    """IRDL type definitions (parameter name, constraint lines) of the dialect types."""
    out = []

    def typedef(name: str, build) -> None:
        body = _Body(dialect, groups)
        params = build(body)
        out.append({"name": name, "lines": body.lines, "params": params})

    dense = f"irdl.base {_ATTR_BASE['dense_array']}"

    def padding(b: _Body) -> str:
        enum_attr = b.of_kind("padding_value", False)
        return b.new(f"irdl.any_of({enum_attr}, {b.new('irdl.is unit')})")

    typedef("ptr", lambda b: [("pointee", b.element(["AnyInt", "AnyFloat"]))])
    typedef(
        "tile",
        lambda b: [
            ("shape", b.new(dense)),
            ("element", b.element(["AnyInt", "AnyFloat", "i4", "ptr"])),
        ],
    )
    typedef("token", lambda b: [])
    typedef(
        "tensor_view",
        lambda b: [
            ("element", b.element(["AnyInt", "AnyFloat"])),
            ("shape", b.new(dense)),
            ("strides", b.new(dense)),
        ],
    )
    typedef(
        "partition_view",
        lambda b: [
            ("tile_shape", b.new(dense)),
            ("tensor_view", b.any_of_bases(["tensor_view"])),
            ("dim_map", b.new(dense)),
            ("padding_value", padding(b)),
        ],
    )
    typedef(
        "strided_view",
        lambda b: [
            ("tile_shape", b.new(dense)),
            ("traversal_strides", b.new(dense)),
            ("tensor_view", b.any_of_bases(["tensor_view"])),
            ("dim_map", b.new(dense)),
            ("padding_value", padding(b)),
        ],
    )
    typedef(
        "gather_scatter_view",
        lambda b: [
            ("tile_shape", b.new(dense)),
            ("tensor_view", b.any_of_bases(["tensor_view"])),
            ("sparse_dim", b.new(f"irdl.base {_ATTR_BASE['integer']}")),
            ("padding_value", padding(b)),
        ],
    )
    return out


#: Non-enum dialect attributes: mnemonic -> parameter names (``None`` = optional, ``unit`` if absent).
ATTR_PARAMS = {
    "div_by": [("divisor", "integer"), ("every", "integer?"), ("along", "integer?")],
    "bounded": [("lb", "integer?"), ("ub", "integer?")],
    "same_elements": [("values", "dense_array")],
    "optimization_hints": [("entries", "dict")],
}

#: Attributes tilegen keeps opaque in the check form (one string parameter holding the text).
OPAQUE_ATTRS = ("di_file", "di_compile_unit", "di_subprogram", "di_lexical_block", "di_loc")


def attr_defs(dialect: str, enums: list[dict]) -> list[dict]:
    """IRDL attribute definitions: one per enum (keyword as a string parameter) plus the others."""
    out = []
    for e in enums:
        if e.get("storage") != "enum":
            continue
        body = _Body(dialect, {})
        cases = [body.new(f'irdl.is "{c["keyword"]}"') for c in e["cases"]]
        var = cases[0] if len(cases) == 1 else body.new(f"irdl.any_of({', '.join(cases)})")
        out.append({"name": e["mnemonic"], "lines": body.lines, "params": [("value", var)]})
    for name, params in ATTR_PARAMS.items():
        body = _Body(dialect, {})
        ps = []
        for pname, kind in params:
            # ``irdl.base`` cannot sit inside ``irdl.any_of`` (MLIR 22 aborts), so an optional
            # parameter (``unit`` when absent) is unconstrained.
            if kind.endswith("?"):
                ps.append((pname, body.new("irdl.any")))
            else:
                ps.append((pname, body.new(f"irdl.base {_ATTR_BASE[kind]}")))
        out.append({"name": name, "lines": body.lines, "params": ps})
    for name in OPAQUE_ATTRS:
        body = _Body(dialect, {})
        out.append(
            {
                "name": name,
                "lines": body.lines,
                "params": [("text", body.new(f"irdl.base {_ATTR_BASE['string']}"))],
            }
        )
    return out


def irdl_context(ops: list[dict], dialect: str, enums: list[dict], constraints: dict) -> dict:
    """Template context of ``templates/irdl.mlir.j2``."""
    by_name = {e["name"]: e for e in enums}
    groups = constraints.get("groups", {})
    return {
        "dialect": dialect,
        "types": type_defs(dialect, groups) if dialect == "cuda_tile" else [],
        "attrs": attr_defs(dialect, enums) if dialect == "cuda_tile" else [],
        "irdl_ops": [op_irdl(o, dialect, constraints, by_name) for o in ops],
        "slots": VARIADIC_SLOTS,
        "has_constraints": bool(constraints.get("types")),
    }
