"""Cross-checks of every name the spec mentions, run by the generator before it renders.

* Rewrite rows (spec/lowerings/*.yaml, both kinds): every op, operand, attribute, enum case and
  fastmath flag a row names exists, and every attribute of a root is carried or dropped
  (runtime/rewrite/row_check.py, on an index built from the YAML).
* Selection rows (spec/ptx/selection.yaml): every op exists in spec/ops,
  every ``when:`` key is an attribute of each op and every keyword a case of its enum.
* Hand-written code the spec names by string resolves to a registered function: ``format:
  {custom: NAME}`` and ``custom<NAME>`` directives (runtime/asm), ``verify: [{custom: NAME}]``
  (runtime/verify/hooks), ``fold: NAME`` (runtime/rewrite/folders.py), ``custom:`` rows
  (runtime/rewrite/custom_patterns.py, runtime/conversion/custom_patterns.py), ``sequence:``
  rows (runtime/codegen/mathlib.py), and ``semantics: {kind: interpreter}`` (runtime/interp).
  The other way round, a registered hook, handler or syntax no spec entry names is an error too
  (a misspelled registration is as dead as a misspelled reference).

Every error is a :class:`SpecError` ``FILE: KEY: message``.
"""

from __future__ import annotations

import re
from typing import Callable, Iterator, Optional

from tilegen.generator.spec_loader import Spec, SpecError
from tilegen.runtime.rewrite.row_check import OpShape, RowError, RowScope, check_rows

SELECTION_FILE = "spec/ptx/selection.yaml"


class YamlIndex:
    """:class:`row_check.OpIndex` over the YAML spec (aliases included)."""

    def __init__(self, spec: Spec):
        self.ops: dict[str, dict] = {}
        for dialect in spec.dialects():
            for op in spec.ops(dialect):
                self.ops[f"{dialect}.{op['name']}"] = op
                for alias in op.get("aliases", ()):
                    self.ops.setdefault(f"{dialect}.{alias['mnemonic']}", op)
        self.enums = {
            e["name"]: {c["keyword"] for c in e["cases"]}
            for d in spec.docs("enums")
            for e in d["enums"]
        }
        self._dialects = set(spec.dialects())

    def op(self, name: str) -> Optional[OpShape]:
        op = self.ops.get(name)
        if op is None:
            return None
        return OpShape(
            f"{op['dialect']}.{op['name']}",
            tuple(o["name"] for o in op.get("operands", ())),
            {a["name"]: a.get("enum") for a in op.get("attributes", ())},
            tuple(op.get("traits", ())),
        )

    def dialects(self) -> set[str]:
        return self._dialects

    def enum_cases(self, enum: str) -> Optional[set[str]]:
        return self.enums.get(enum)


def check_spec(spec: Spec) -> None:
    """Raise :class:`SpecError` for the first name the spec mentions that does not resolve."""
    index = YamlIndex(spec)
    check_lowerings(spec, index)
    check_selection(spec, index)
    check_registries(spec, index)


# --------------------------------------------------------------------------- rewrite rows


def check_lowerings(spec: Spec, index: YamlIndex) -> None:
    for kind in ("patterns", "conversion"):
        for rel, doc in spec.files.get(kind, []):
            if kind == "patterns":
                scope = RowScope(rel, doc["dialect"], doc["dialect"])
            else:
                scope = RowScope(rel, doc["source"], doc["target"])
            source_ops = [f"{scope.source}.{op['name']}" for op in spec.ops(scope.source)]
            try:
                check_rows(doc, scope, index, source_ops)
            except RowError as e:
                raise SpecError(str(e)) from None


# --------------------------------------------------------------------------- selection


def _names(value) -> list[tuple[str, str]]:
    """(key suffix, name) of a string-or-list field."""
    if isinstance(value, str):
        return [("", value)]
    return [(f"[{i}]", v) for i, v in enumerate(value)]


def check_selection(spec: Spec, index: YamlIndex) -> None:
    from tilegen.runtime.rewrite.row_check import FASTMATH_FLAGS

    for rel, doc in spec.files.get("selection", []):
        for i, row in enumerate(doc["rows"]):
            for suffix, name in _names(row["op"]):
                key = f"rows[{i}].op{suffix}"
                shape = index.op(name)
                if shape is None:
                    raise SpecError(f"{rel}: {key}: unknown op '{name}' (not in spec/ops)")
                for attr, keywords in row.get("when", {}).items():
                    if attr not in shape.attributes:
                        raise SpecError(
                            f"{rel}: rows[{i}].when.{attr}: not an attribute of '{shape.name}'"
                        )
                    enum = shape.attributes[attr]
                    allowed = (
                        set(FASTMATH_FLAGS) if attr == "fastmath" else index.enum_cases(enum or "")
                    )
                    for kw in keywords:
                        if allowed is not None and kw != "absent" and kw not in allowed:
                            raise SpecError(
                                f"{rel}: rows[{i}].when.{attr}: '{kw}' is not a case of "
                                f"{enum or 'the fastmath flags'} ({', '.join(sorted(allowed))})"
                            )


# --------------------------------------------------------------------------- registries


def _walk_custom(value, key: str) -> Iterator[tuple[str, str]]:
    """(key path, name) of every ``custom: NAME`` under ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "custom" and isinstance(v, str):
                yield f"{key}.custom", v
            else:
                yield from _walk_custom(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk_custom(v, f"{key}[{i}]")


class _Registries:
    """The string-keyed registries of runtime/ (importing each fills it)."""

    def __init__(self):
        from tilegen.runtime.asm import custom_ops, directives
        from tilegen.runtime.codegen import core, mathlib
        from tilegen.runtime.conversion import custom_patterns as conversion_patterns
        from tilegen.runtime.interp import executor
        from tilegen.runtime.rewrite import declared
        from tilegen.runtime.verify import hooks

        core.load_handlers()
        self.parsers, self.printers = custom_ops.PARSERS, custom_ops.PRINTERS
        self.directives = directives.CUSTOM_DIRECTIVES
        self.hooks = hooks.HOOKS
        self.interp = executor.HANDLERS
        self.structural = set(executor.STRUCTURAL)
        self.codegen = core.HANDLERS
        self.sequences = mathlib.SEQUENCES
        self.folder = declared.folder
        self.patterns: dict[str, Callable[[str], object]] = {
            "patterns": declared.custom_pattern,
            "conversion": lambda n: (
                getattr(conversion_patterns, n, None) if not n.startswith("_") else None
            ),
        }


def check_registries(spec: Spec, index: YamlIndex) -> None:
    try:
        reg = _Registries()
    except ImportError as e:  # runtime/ cannot be imported: nothing to resolve names against
        raise SpecError(f"runtime/: cannot import the hook registries to check them ({e})")
    named_hooks, named_syntax = set(), set()
    for dialect in spec.dialects():
        for op in spec.ops(dialect):
            full = f"{dialect}.{op['name']}"
            where = f"{op['_file']}: ops[{op['name']}]"
            fmt = op.get("format")
            if isinstance(fmt, dict):
                named_syntax.add(fmt["custom"])
                if fmt["custom"] not in reg.parsers or fmt["custom"] not in reg.printers:
                    raise SpecError(
                        f"{where}.format.custom: no custom syntax '{fmt['custom']}' "
                        "(runtime/asm/custom_ops.py PARSERS and PRINTERS)"
                    )
            elif isinstance(fmt, str):
                for d in re.findall(r"custom<(\w+)>", fmt):
                    if d not in reg.directives:
                        raise SpecError(
                            f"{where}.format: unknown directive 'custom<{d}>' "
                            "(runtime/asm/directives.py CUSTOM_DIRECTIVES)"
                        )
            for key, name in _walk_custom(op.get("verify", []), "verify"):
                named_hooks.add(name)
                if name not in reg.hooks:
                    raise SpecError(
                        f"{where}.{key}: no verifier hook '{name}' (runtime/verify/hooks)"
                    )
            if "fold" in op and reg.folder(op["fold"]) is None:
                raise SpecError(
                    f"{where}.fold: no folder '{op['fold']}' (runtime/rewrite/folders.py)"
                )
            kind = op.get("semantics", {}).get("kind")
            handled = full in reg.interp or full in reg.structural
            if kind == "interpreter" and not handled:
                raise SpecError(
                    f"{where}.semantics.kind: 'interpreter', but runtime/interp registers no "
                    f"handler for '{full}'"
                )
            if kind in ("elementwise", "tile") and full in reg.interp:
                raise SpecError(
                    f"{where}.semantics: declared ({kind}), yet runtime/interp also registers a "
                    f"hand-written handler for '{full}'"
                )
    for kind in ("patterns", "conversion"):
        for rel, doc in spec.files.get(kind, []):
            for gi, group in enumerate(doc["groups"]):
                for ri, row in enumerate(group["patterns"]):
                    if "custom" in row and reg.patterns[kind](row["custom"]) is None:
                        module = "rewrite" if kind == "patterns" else "conversion"
                        raise SpecError(
                            f"{rel}: groups[{gi}].patterns[{ri}].custom: no pattern "
                            f"'{row['custom']}' in runtime/{module}/custom_patterns.py"
                        )
    for rel, doc in spec.files.get("selection", []):
        for i, row in enumerate(doc["rows"]):
            if "sequence" in row and row["sequence"] not in reg.sequences:
                raise SpecError(
                    f"{rel}: rows[{i}].sequence: no sequence '{row['sequence']}' in "
                    "runtime/codegen/mathlib.py"
                )
    # the other way round: registrations no spec entry reaches
    for name in sorted(set(reg.hooks) - named_hooks):
        raise SpecError(f"runtime/verify/hooks: hook '{name}': no spec entry names it")
    for name in sorted(set(reg.parsers) - named_syntax):
        raise SpecError(f"runtime/asm/custom_ops.py: PARSERS['{name}']: no spec entry names it")
    for where, table in (("runtime/interp", reg.interp), ("runtime/codegen", reg.codegen)):
        for name in sorted(table):
            if name.split(".", 1)[0] in index.dialects() and name not in index.ops:
                raise SpecError(f"{where}: handler for '{name}': no such op in spec/ops")
