"""The rewrite-row language of spec/lowerings/*.yaml, checked against an op index.

Canonicalization (``kind: patterns``) and dialect conversion (``kind: conversion``) rows are one
language (spec/schema/rows.schema.json): ``root`` (the matched op), ``where`` (conditions on its
operands), ``build`` (a tree of ops: ``op`` (a name, or ``{by: ATTR, cases: {KEYWORD: op}}``),
``operands`` (refs, ``null`` for an empty group, nested builds, constants; default: every operand
group of the root in order), ``attributes``, ``defaults``, ``fastmath``, ``result_type``) and
``drop`` (root attributes deliberately not carried); or ``custom: NAME`` (a hand-written
pattern) or ``unsupported: WHY`` (no pattern: the op stays and the pass names WHY).

Every attribute the root declares must reach the op that replaces it: mapped under
``attributes``, carried because the target declares the same name, spent choosing the op
(``by``) or the fastmath flags, copied (``attributes: copy``) or listed in ``drop``. Anything else
is an error here, so an attribute can never vanish silently.

:func:`check_row` runs on the generator's YAML index (``make generate`` fails with file and key)
and on the runtime's OpDefs (rows built by hand); this module imports no IR and no generated
code.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Protocol

from tilegen.runtime.records import dataclass, field

#: ``#arith.fastmath<...>`` flags (spec/types/arith_enums.yaml; ``fast`` = all of them)
FASTMATH_FLAGS = ("reassoc", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "fast")
#: keys of ``op: {by: ATTR, cases: ...}`` for a unit attribute (or any attribute's presence)
PRESENCE = ("present", "absent")


class RowError(Exception):
    """A row names something that does not exist; the message is ``FILE: KEY: what``."""

    def __init__(self, file: str, key: str, message: str):
        super().__init__(f"{file}: {key}: {message}" if key else f"{file}: {message}")
        self.file, self.key, self.message = file, key, message


@dataclass(frozen=True)
class OpShape:
    """What a row may name of an op: operand groups, attributes (name -> enum or None)."""

    name: str
    operands: tuple[str, ...] = ()
    attributes: Mapping[str, Optional[str]] = field(default_factory=dict)
    traits: tuple[str, ...] = ()


class OpIndex(Protocol):
    """Ops and enums a row may name (YAML in the generator, OpDefs at run time)."""

    def op(self, name: str) -> Optional[OpShape]: ...

    def dialects(self) -> set[str]: ...

    def enum_cases(self, enum: str) -> Optional[set[str]]: ...


@dataclass(frozen=True)
class RowScope:
    """Where rows come from and which dialects unprefixed op names belong to."""

    file: str
    #: dialect of ``root``, ``where`` op names
    source: str
    #: dialect of ``build`` op names
    target: str


def full(name: str, dialect: str) -> str:
    return name if "." in name else f"{dialect}.{name}"


def op_names(op_spec) -> list[str]:
    """The op names a build's ``op`` may produce (one, or every case of ``by``)."""
    if isinstance(op_spec, str):
        return [op_spec]
    names = list(op_spec["cases"].values())
    return names + ([op_spec["default"]] if op_spec.get("default") else [])


def op_label(op_spec) -> str:
    if isinstance(op_spec, str):
        return op_spec
    return f"{op_spec['by']}?{'|'.join(op_names(op_spec))}"


def build_refs(build: dict) -> list[str]:
    """Every operand ref of a build tree (``*`` and ``null`` left out)."""
    if "constant" in build:
        return [build["type_of"]]
    out: list[str] = []
    for item in build.get("operands") or ():
        if isinstance(item, dict):
            out.extend(build_refs(item))
        elif item is not None and item != "*":
            out.append(item)
    if build.get("result_type") not in (None, "root"):
        out.append(build["result_type"])
    return out


# --------------------------------------------------------------------------- checking


class _Checker:
    def __init__(self, scope: RowScope, index: OpIndex, row: dict, key: str):
        self.scope, self.index, self.row, self.key = scope, index, row, key
        self.dialects = index.dialects()

    def fail(self, key: str, message: str) -> None:
        raise RowError(self.scope.file, ".".join(k for k in (self.key, key) if k), message)

    def known(self, name: str, key: str, dialect: str, what: str = "op") -> Optional[OpShape]:
        """The op ``name`` (prefixed with ``dialect`` when bare); unknown in a dialect the
        index holds is an error, an op of a foreign dialect is None."""
        full_name = full(name, dialect)
        shape = self.index.op(full_name)
        if shape is None and full_name.split(".", 1)[0] in self.dialects:
            self.fail(key, f"unknown {what} '{name}'" + (" in build" if what == "op" else ""))
        return shape

    # ----- refs
    def ref(self, root: OpShape, ref: str, key: str, defs: dict) -> None:
        head, _, tail = ref.partition(".")
        if head not in root.operands:
            self.fail(key, f"'{ref}' is not an operand of '{root.name}'")
        d = defs.get(head)
        if tail and d is not None and tail not in d.operands:
            self.fail(key, f"'{tail}' is not an operand of '{d.name}' (the op defining '{head}')")

    def attr(self, op: OpShape, name: str, key: str) -> None:
        if name not in op.attributes:
            self.fail(key, f"'{name}' is not an attribute of '{op.name}'")

    def case(self, enum: Optional[str], keyword: str, key: str) -> None:
        cases = self.index.enum_cases(enum) if enum else None
        if cases is not None and keyword not in cases:
            self.fail(key, f"'{keyword}' is not a case of enum {enum} ({', '.join(sorted(cases))})")

    # ----- rows
    def check(self) -> None:
        row = self.row
        root = self.known(row["root"], "root", self.scope.source, "root op")
        if root is None:
            self.fail("root", f"unknown root op '{row['root']}'")
        if "custom" in row or "unsupported" in row:
            return
        defs: dict[str, OpShape] = {}
        for i, cond in enumerate(row.get("where", ())):
            self.condition(root, cond, f"where[{i}]", defs)
        for i, name in enumerate(row.get("drop", ())):
            self.attr(root, name, f"drop[{i}]")
        self.build(root, row["build"], "build", defs, top=True)

    def condition(self, root: OpShape, cond: dict, key: str, defs: dict) -> None:
        self.ref(root, cond["operand"], f"{key}.operand", defs)
        d = None
        for k in ("defined_by", "not_defined_by"):
            if k in cond:
                shape = self.known(cond[k], f"{key}.{k}", self.scope.source)
                if k == "defined_by" and "." not in cond["operand"]:
                    d = defs[cond["operand"]] = shape
        for i, name in enumerate(cond.get("same_attributes", ())):
            self.attr(root, name, f"{key}.same_attributes[{i}]")
            if d is not None:
                self.attr(d, name, f"{key}.same_attributes[{i}]")
        if "same_as" in cond:
            self.ref(root, cond["same_as"], f"{key}.same_as", defs)

    def build(self, root: OpShape, b: dict, key: str, defs: dict, top: bool) -> None:
        if "constant" in b:
            self.ref(root, b["type_of"], f"{key}.type_of", defs)
            self.known("constant", f"{key}.constant", self.scope.target)
            return
        spec = b["op"]
        if isinstance(spec, dict):
            by = root.attributes.get(spec["by"], False)
            if by is False:
                self.fail(f"{key}.op.by", f"'{spec['by']}' is not an attribute of '{root.name}'")
            for kw in spec["cases"]:
                if kw not in PRESENCE:
                    self.case(by, kw, f"{key}.op.cases.{kw}")
        targets = []
        for name in op_names(spec):
            shape = self.known(name, f"{key}.op", self.scope.target)
            if shape is not None:
                targets.append(shape)
        items = b.get("operands")
        for i, item in enumerate(items or ()):
            if isinstance(item, dict):
                self.build(root, item, f"{key}.operands[{i}]", defs, top=False)
            elif item is not None and item != "*":
                self.ref(root, item, f"{key}.operands[{i}]", defs)
        groups = len(root.operands) if items is None else None
        if items is not None and "*" not in items:
            groups = len(items)
        for t in targets:
            if groups is not None and groups != len(t.operands):
                self.fail(
                    f"{key}.operands",
                    f"{groups} operand group(s) for '{t.name}', which has {len(t.operands)} "
                    f"({', '.join(t.operands) or 'none'})",
                )
        if b.get("result_type") not in (None, "root"):
            self.ref(root, b["result_type"], f"{key}.result_type", defs)
        self.attributes(root, b, key, targets, top)

    def attributes(self, root: OpShape, b: dict, key: str, targets: list, top: bool) -> None:
        attrs = b.get("attributes")
        if attrs == "copy":
            for t in targets:
                for name in root.attributes:
                    if name not in t.attributes:
                        self.fail(
                            f"{key}.attributes",
                            f"copy carries '{name}', which '{t.name}' does not declare",
                        )
            return
        spent = set(self.row.get("drop", ())) if top else set()
        if isinstance(b["op"], dict):
            spent.add(b["op"]["by"])
        for new, how in (attrs or {}).items():
            k = f"{key}.attributes.{new}"
            for t in targets:
                if "." not in new and new not in t.attributes:
                    self.fail(k, f"'{new}' is not an attribute of '{t.name}'")
            if isinstance(how, dict) and "enum" in how:
                if self.index.enum_cases(how["enum"]) is None:
                    self.fail(f"{k}.enum", f"unknown enum {how['enum']}")
                self.case(how["enum"], how["case"], f"{k}.case")
                continue
            origin = how if isinstance(how, str) else how["from"]
            self.attr(root, origin, k if isinstance(how, str) else f"{k}.from")
            spent.add(origin)
            for src_kw, dst_kw in (how.get("cases") or {}).items() if isinstance(how, dict) else ():
                self.case(root.attributes.get(origin), src_kw, f"{k}.cases")
                for t in targets:
                    self.case(t.attributes.get(new), dst_kw, f"{k}.cases.{src_kw}")
        for name, value in (b.get("defaults") or {}).items():
            for t in targets:
                self.attr(t, name, f"{key}.defaults.{name}")
                if isinstance(value, str):
                    self.case(t.attributes.get(name), value, f"{key}.defaults.{name}")
        fm = b.get("fastmath")
        if fm is not None:
            self.attr(root, fm["from"], f"{key}.fastmath.from")
            spent.add(fm["from"])
            for kw, flags in fm["cases"].items():
                bad = [f for f in flags.split(",") if f and f not in FASTMATH_FLAGS]
                if bad:
                    self.fail(f"{key}.fastmath.cases.{kw}", f"unknown fastmath flag(s) {bad}")
        if not top:
            return
        for t in targets:
            for name in root.attributes:
                if name not in spent and name not in t.attributes:
                    self.fail(
                        key,
                        f"attribute '{name}' of '{root.name}' is not carried to '{t.name}' "
                        "(map it under attributes: or list it in the row's drop:)",
                    )


def check_row(row: dict, scope: RowScope, index: OpIndex, key: str) -> None:
    """Raise :class:`RowError` (file and key) for the first thing ``row`` names wrongly."""
    _Checker(scope, index, row, key).check()


def default_rows(
    rule: dict, scope: RowScope, index: OpIndex, source_ops: Iterable[str], covered: set
) -> dict[str, dict]:
    """The conversion's ``default_rule: {same_mnemonic: true}`` as rows: every source op without
    a row whose mnemonic exists in the target dialect is renamed to it, when that rename is
    faithful (same operand groups, every attribute carried); otherwise the op is left to the
    pass's legality check (and the coverage test) instead of losing an attribute."""
    out: dict[str, dict] = {}
    if not rule.get("same_mnemonic"):
        return out
    for name in source_ops:
        if name in covered:
            continue
        target = f"{scope.target}.{name.split('.', 1)[1]}"
        if index.op(target) is None:
            continue
        row = {"root": name, "build": {"op": target}}
        try:
            check_row(row, scope, index, f"default_rule({name})")
        except RowError:
            continue
        out[name] = row
    return out


def check_rows(doc: dict, scope: RowScope, index: OpIndex, source_ops: Iterable[str]) -> None:
    """Check every row of a pattern or conversion document (and its default rule)."""
    covered = set()
    for gi, group in enumerate(doc["groups"]):
        for ri, row in enumerate(group["patterns"]):
            check_row(row, scope, index, f"groups[{gi}].patterns[{ri}]")
            covered.add(full(row["root"], scope.source))
    for name, row in default_rows(
        doc.get("default_rule", {}), scope, index, source_ops, covered
    ).items():
        check_row(row, scope, index, f"default_rule({name})")
