"""Load-time operand checks: the simulator accepts only what ptxas accepts.

Every instruction is matched to its `spec/ptx/instructions.yaml` row and checked once, before the
first step, against the row's operand form (`forms:`; declared rows without one get the derived
form `d: r:T`, sources `r|i:T`, T the operand's type). `docs/ptxsim.md` lists the rules; each
error names the PTX line, the operand and the rule, e.g.

    k.ptx:12: error: add.s32: operand 3 (%rd20): .b64 register where the .s32 operand needs
    32 bits [operand-width]

Operand classes (`[|]KIND[|KIND...][:TYPE][?]`): `r` register of TYPE's width and a compatible
kind, `rw` register at least as wide (ld/st/cvt's relaxed rule), `i` immediate of TYPE, `v`/`vw`
vector of `r`/`rw` elements (arity from `.vN`, else 1), `vN` exactly N elements, `v*` any arity,
`vp` packed vector (mov: element widths sum to TYPE's), `a` address in the opcode's state space
(or `a:SPACE`), `sym` a variable's address, `s` special register, `l` label, `_` the sink, `any`
any operand. TYPE is `t`/`t2`/`t3`/`t4` (the n-th type suffix from the end), `wide` (twice t's
width) or a PTX type. A leading `|` means joined to the previous operand by `|` (`d|p`); a
trailing `?` an optional operand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.runtime.ptx.parser import Addr, Entry, Imm, Instr, Module, Reg, Sym, Vec
from tilegen.runtime.ptx.sim.cta import PtxSimError

# -- types -----------------------------------------------------------------------------------
# (kind, bits): kinds b/u/s/f/p; `exact` types never take wider registers
_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}
TYPES: dict[str, tuple[str, int]] = {"pred": ("p", 1)}
for _k in "bus":
    for _w in ("8", "16", "32", "64"):
        TYPES[f"{_k}{_w}"] = (_k, _BITS[_w])
TYPES["b128"] = ("b", 128)
TYPES.update({"f16": ("f", 16), "f32": ("f", 32), "f64": ("f", 64), "f16x2": ("f", 32)})
TYPES.update({"f32x2": ("f", 64)})
# instruction-side types with no register type of their own: bit registers only
for _t, _w in (("bf16", 16), ("bf16x2", 32), ("tf32", 32), ("e4m3x2", 16), ("e5m2x2", 16)):
    TYPES[_t] = ("x", _w)
for _t in ("e2m3x2", "e3m2x2", "ue8m0x2"):
    TYPES[_t] = ("x", 16)
TYPES["e2m1x2"] = ("x", 8)  # two 4-bit codes: a .b8 register
EXACT = {"e4m3x2", "e5m2x2", "e2m3x2", "e3m2x2", "e2m1x2", "ue8m0x2"}
WIDE = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64", "b16": "b32", "b32": "b64"}
SPACES = ("param", "global", "shared", "local", "const", "tex")

SPECIAL = {"%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%clock", "%lanemask_eq"}
SPECIAL |= {"%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt"}
SPECIAL |= {"%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size", "%globaltimer_lo"}
SPECIAL |= {"%globaltimer_hi", "%cluster_ctarank", "%cluster_nctarank", "%current_graph_exec"}
_SPECIAL_VEC = ("%tid", "%ntid", "%ctaid", "%nctaid", "%clusterid", "%nclusterid")
_SPECIAL_VEC += ("%cluster_ctaid", "%cluster_nctaid")
_SPECIAL_64 = {"%clock64", "%globaltimer", "%gridid", "%current_graph_exec"}


def special_type(name: str) -> str | None:
    """The PTX type of a special register (None if `name` is not one)."""
    if name in _SPECIAL_64:
        return "u64"
    if name in SPECIAL or re.fullmatch(r"%(envreg\d+|pm[0-7]|reserved_smem_offset_\w+)", name):
        return "u32"
    base, _, comp = name.partition(".")
    if base in _SPECIAL_VEC and comp in ("x", "y", "z", "w"):
        return "u32"
    if name == "%is_explicit_cluster":
        return "pred"
    return None


class PtxCheckError(PtxSimError):
    """An instruction ptxas would refuse: located at its line, naming the violated rule."""


@dataclass(frozen=True)
class OperandClass:
    kinds: dict  # kind -> type (or state space for `a`), None when unconstrained
    joined: bool
    optional: bool
    text: str

    def type_of(self, kind: str) -> str | None:
        return self.kinds.get(kind)


@lru_cache(maxsize=None)
def parse_class(text: str) -> OperandClass:
    """`[|]KIND[:TYPE]|KIND[:TYPE]...[?]`: alternatives without a type take the last one's."""
    body, joined, optional = text, False, False
    if body.startswith("|"):
        body, joined = body[1:], True
    if body.endswith("?"):
        body, optional = body[:-1], True
    alts = [a.partition(":") for a in body.split("|")]
    kinds, pending = {}, []
    for kind, _, typ in alts:
        pending.append(kind)
        if typ:
            for k in pending:
                kinds[k] = typ
            pending = []
    for k in pending:
        kinds[k] = None
    return OperandClass(kinds, joined, optional, text)


# -- rows and forms ----------------------------------------------------------------------------
_BY_OPCODE: dict[str, list[dict]] = {}
for _row in INSTRUCTIONS.values():
    _BY_OPCODE.setdefault(_row["opcode"], []).append(_row)


def _mods_match(row: dict, mods: list[str]) -> bool:
    groups = list((row.get("modifiers") or {}).values())
    gi = 0
    for m in mods:
        while gi < len(groups) and m not in groups[gi]:
            gi += 1
        if gi == len(groups):
            return False
        gi += 1
    return True


@lru_cache(maxsize=None)
def _find_row(opcode: str) -> dict | None:
    parts = opcode.split(".")
    rows = _BY_OPCODE.get(parts[0], [])
    for row in rows:
        if not row.get("handwritten"):
            types = row.get("types") or []
            if len(parts) >= 2 and parts[-1] in types and _mods_match(row, parts[1:-1]):
                return row
    best, best_len = None, 0
    bare = [p.split("::")[0] for p in parts]
    hand = [r for r in rows if r.get("handwritten")]
    for row in hand:  # hand-written rows: the longest name that prefixes the opcode
        names = row["name"].split(".")
        if bare[: len(names)] == names and len(names) > best_len:
            best, best_len = row, len(names)
    if best is None and len(hand) == 1:
        best = hand[0]
    return best


def find_row(parts: list[str]) -> dict | None:
    """The spec row of an opcode split at dots: a declared row whose type and modifiers match,
    else the hand-written row whose name is the longest prefix of the opcode."""
    return _find_row(".".join(parts))


def _derived_form(row: dict) -> list[str]:
    over = row.get("operand_types") or {}
    out = []
    for k, name in enumerate(row["operands"]):
        t = over.get(name, "wide" if (name == "d" and row.get("result") == "wide") else "t")
        out.append(f"r:{t}" if k == 0 else f"r|i:{t}")
    return out


def _form_matches(form: dict, parts: list[str]) -> bool:
    if any(w not in parts for w in form.get("when", ())):
        return False
    if any(w in parts for w in form.get("unless", ())):
        return False
    for pos, allowed in (form.get("types") or {}).items():
        k = int(pos[1:] or 1) if pos != "t" else 1
        if len(parts) <= k or parts[-k] not in allowed:
            return False
    return True


def forms_of(row: dict, parts: list[str]) -> list[dict]:
    """Candidate operand forms of `row` for this opcode, in order."""
    out = [f for f in row.get("forms", ()) if _form_matches(f, parts)]
    if not row.get("handwritten") and not out:
        out.append({"operands": _derived_form(row)})
    return out


# -- the checker ---------------------------------------------------------------------------------
class _Checker:
    def __init__(self, module: Module, entry: Entry, file: str) -> None:
        self.module, self.entry, self.file = module, entry, file
        self.symbols: dict[str, str] = {}  # name -> state space
        for v in module.globals:
            self.symbols[v.name] = v.space
        for v in entry.params:
            self.symbols[v.name] = "kparam"
        for v in entry.shared:
            self.symbols[v.name] = "shared"
        for v in entry.local:
            self.symbols[v.name] = "local"
        for v in entry.call_params:
            self.symbols[v.name] = "param"
        self.reg_names = [(p, n) for p, n in entry.reg_counts.items()]

    # -- registers ---------------------------------------------------------------------------
    def reg_type(self, name: str) -> str | None:
        """Declared type of a register; None when undeclared."""
        regs, counts = self.entry.regs, self.entry.reg_counts
        if name in regs and name not in counts:
            return regs[name]
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if m and m.group(1) in counts:
            return regs[m.group(1)] if int(m.group(2)) < counts[m.group(1)] else None
        return None

    def fail(self, ins: Instr, msg: str, rule: str):
        return PtxCheckError(f"{self.file}:{ins.line}: error: {ins.opcode}: {msg} [{rule}]")

    def resolve(self, typ: str | None, parts: list[str]) -> str | None:
        if typ is None or typ in ("any",):
            return None
        if typ == "t" or re.fullmatch(r"t[1-4]", typ):
            k = 1 if typ == "t" else int(typ[1])
            return parts[-k] if len(parts) > k else None
        if typ == "wide":
            return WIDE.get(parts[-1], parts[-1])
        return typ

    def compatible(self, want: str, have: str, relaxed: bool) -> str | None:
        """None if a `have` register fits a `want` operand, else the rule it breaks."""
        if want not in TYPES:
            return None  # a type the checker does not model (e.g. an mma element type)
        wk, wb = TYPES[want]
        hk, hb = TYPES.get(have, ("?", 0))
        if wk == "p" or hk == "p":
            return None if wk == hk else "operand-type"
        if wk in "us" and hk not in "bus":
            return "operand-type"
        if wk == "f" and hk != "b" and have != want:
            return "operand-type"
        if wk == "x" and hk != "b":
            return "operand-type"
        if relaxed and want not in EXACT:
            if hb < wb or (hk == "f" and hb != wb):
                return "operand-width"
        elif hb != wb:
            return "operand-width"
        return None

    def check_reg(self, ins, k, op: Reg, want: str | None, relaxed: bool, special_ok: bool):
        name = op.name
        have = self.reg_type(name)
        if have is None:
            st = special_type(name)
            if st is None:
                base = name.partition(".")[0]
                if base in _SPECIAL_VEC:
                    raise self.fail(
                        ins, f"operand {k} ({name}) is a vector special register", "vector-arity"
                    )
                raise self.fail(
                    ins, f"operand {k} uses undeclared register {name}", "undeclared-register"
                )
            if not special_ok:
                raise self.fail(
                    ins,
                    f"operand {k} ({name}): special registers are not allowed here",
                    "special-register",
                )
            have = st
        if want is None:
            return
        rule = self.compatible(want, have, relaxed)
        if rule is not None:
            need = (
                f"a register at least {TYPES[want][1]} bits wide"
                if relaxed and rule == "operand-width"
                else f"{TYPES[want][1]} bits" if rule == "operand-width" else "a compatible type"
            )
            raise self.fail(
                ins,
                f"operand {k} ({name}): .{have} register where the .{want} operand needs {need}",
                rule,
            )

    def check_imm(self, ins, k, op: Imm, want: str | None) -> None:
        if want is None or want not in TYPES:
            return
        kind, bits = TYPES[want]
        if not op.is_float:  # integer literals: bit, integer and predicate types
            ok = kind in "busp"
        else:  # float literals: decimal and 0d are 64-bit, 0f 32-bit; .bN takes its own width
            ok = want in ("f32", "f64") or want == ("b32" if op.hexw == 32 else "b64")
        if not ok:
            lit = "floating-point" if op.is_float else "integer"
            raise self.fail(
                ins, f"operand {k}: {lit} immediate where a .{want} operand is needed", "immediate"
            )

    def check_addr(self, ins, k, op: Addr, space: str | None) -> None:
        base = op.base
        if isinstance(base, Reg) and space == "tmem":
            self.check_reg(ins, k, base, "b32", False, False)
        elif isinstance(base, Reg) and space == "tmap":  # ptxas takes any 32/64-bit register
            self.check_reg(ins, k, base, None, False, False)
        elif isinstance(base, Reg):
            have = self.reg_type(base.name)
            if have is None:
                raise self.fail(
                    ins, f"operand {k} uses undeclared register {base.name}", "undeclared-register"
                )
            kind, bits = TYPES.get(have, ("?", 0))
            if kind not in "bus":
                raise self.fail(
                    ins,
                    f"operand {k}: .{have} register {base.name} used as an address",
                    "address-register",
                )
            if bits not in (32, 64) or (
                bits == 32
                and space in (None, "any", "global", "const", "param")
                and self.module.address_size == 64
            ):
                where = f".{space}" if space else "generic"
                raise self.fail(
                    ins,
                    f"operand {k}: {bits}-bit register {base.name} cannot address {where} memory",
                    "address-register",
                )
        elif isinstance(base, Sym):
            sp = self.symbols.get(base.name)
            if sp is None:
                raise self.fail(ins, f"operand {k}: unknown symbol {base.name}", "unknown-symbol")
            if space in ("tmem", "any") or (space == "tmap" and sp != "kparam"):
                pass
            elif sp == "kparam":
                if space != "param":
                    raise self.fail(
                        ins,
                        f"operand {k}: kernel parameter {base.name} addressed as "
                        f"{'.' + space if space else 'generic'} memory",
                        "state-space",
                    )
            elif space is not None and space != sp:
                raise self.fail(
                    ins,
                    f"operand {k}: .{sp} variable {base.name} in a .{space} access",
                    "state-space",
                )
        elif base is None and space not in ("local", "tmem", "any", "tmap"):
            raise self.fail(
                ins,
                f"operand {k}: immediate addresses are allowed only for .local",
                "state-space",
            )
        for extra in op.extra:  # tensor coordinates
            for item in extra.items if isinstance(extra, Vec) else (extra,):
                if isinstance(item, Reg):
                    self.check_reg(ins, k, item, "b32", False, False)

    def check_vector(self, ins, k, op: Vec, want, relaxed: bool, arity, packed: bool) -> None:
        items = op.items
        if arity is not None and len(items) != arity:
            raise self.fail(
                ins,
                f"operand {k}: vector of {len(items)} elements where {arity} are needed",
                "vector-arity",
            )
        widths, kinds, imms = set(), set(), []
        sinks = [x for x in items if isinstance(x, Sym) and x.name == "_"]
        if sinks and (k != 1 or len(sinks) == len(items)):
            raise self.fail(
                ins,
                f"operand {k}: the sink _ is allowed only beside registers in a destination",
                "sink",
            )
        for item in items:
            if isinstance(item, Sym) and item.name == "_":
                continue
            if isinstance(item, Imm):
                if k == 1:  # the destination
                    raise self.fail(
                        ins, f"operand {k}: an immediate in a destination vector", "immediate"
                    )
                if not packed:
                    self.check_imm(ins, k, item, want)
                imms.append(item)
                continue
            if not isinstance(item, Reg):
                raise self.fail(ins, f"operand {k}: vector element {item!r}", "operand-kind")
            if relaxed and self.reg_type(item.name) == "pred" and TYPES.get(want, "?")[0] == "b":
                continue  # ptxas takes .pred elements in a .bN load vector
            if packed:
                self.check_reg(ins, k, item, None, False, False)
            else:
                self.check_reg(ins, k, item, want, relaxed, False)
            kind, bits = TYPES.get(self.reg_type(item.name) or "", ("?", 0))
            widths.add(bits)
            kinds.add(kind)
        for imm in imms:  # an immediate must be of the same kind as the registers beside it
            if ("f" in kinds and not imm.is_float) or (kinds & set("us") and imm.is_float):
                raise self.fail(
                    ins, f"operand {k}: vector elements of different types", "vector-elements"
                )
        if len(widths) > 1:
            raise self.fail(
                ins, f"operand {k}: vector elements of different widths", "vector-elements"
            )
        if packed and want in TYPES and widths:
            w = widths.pop()
            if len(items) not in (2, 4) or w * len(items) != TYPES[want][1]:
                raise self.fail(
                    ins,
                    f"operand {k}: {len(items)} x {w}-bit elements do not pack a .{want} value",
                    "vector-arity",
                )

    def check_operand(self, ins: Instr, k: int, op, cls: OperandClass, parts) -> None:
        kinds = cls.kinds
        if "any" in kinds:
            return
        if isinstance(op, Reg):
            want = self.resolve(kinds.get("r", kinds.get("rw", kinds.get("s"))), parts)
            if not kinds.keys() & {"r", "rw", "s"}:
                raise self.fail(
                    ins, f"operand {k} ({op.name}): a register is not allowed here", "operand-kind"
                )
            if not kinds.keys() & {"r", "rw"} and self.reg_type(op.name) is not None:
                raise self.fail(
                    ins, f"operand {k} ({op.name}): a special register is needed", "operand-kind"
                )
            self.check_reg(ins, k, op, want, "rw" in kinds, "s" in kinds)
        elif isinstance(op, Imm):
            want = self.resolve(kinds.get("i"), parts)
            if "i" not in kinds:
                what = "destination" if k == 1 and "r" in kinds else "operand"
                raise self.fail(
                    ins,
                    f"{what} {k}: an immediate is not allowed here"
                    + (" (a result register is required)" if what == "destination" else ""),
                    "immediate",
                )
            self.check_imm(ins, k, op, want)
        elif isinstance(op, Vec):
            vk = [x for x in kinds if x.startswith("v")]
            if not vk:
                raise self.fail(ins, f"operand {k}: a vector is not allowed here", "vector-arity")
            v = vk[0]
            want = self.resolve(kinds[v], parts)
            arity: int | None
            if v in ("v", "vw"):
                arity = next((int(p[1:]) for p in parts if re.fullmatch(r"v[248]", p)), 1)
            elif v in ("v*", "vp"):
                arity = None
            else:
                arity = int(v[1:])
            self.check_vector(ins, k, op, want, v == "vw", arity, v == "vp")
        elif isinstance(op, Addr):
            if "a" not in kinds:
                raise self.fail(ins, f"operand {k}: an address is not allowed here", "operand-kind")
            space = kinds["a"]
            if space is None:
                space = next((p.split("::")[0] for p in parts if p.split("::")[0] in SPACES), None)
            self.check_addr(ins, k, op, space)
        elif isinstance(op, Sym):
            if op.name == "_":
                if "_" not in kinds:
                    raise self.fail(ins, f"operand {k}: the sink _ is not allowed here", "sink")
                return
            if op.name in self.entry.labels:
                if "l" not in kinds:
                    raise self.fail(
                        ins, f"operand {k}: label {op.name} is not allowed here", "operand-kind"
                    )
                return
            if "l" in kinds and op.name not in self.symbols:
                raise self.fail(ins, f"operand {k}: unknown label {op.name}", "label")
            if op.name not in self.symbols:
                raise self.fail(ins, f"operand {k}: unknown symbol {op.name}", "unknown-symbol")
            if "sym" not in kinds:
                raise self.fail(
                    ins, f"operand {k}: symbol {op.name} is not allowed here", "operand-kind"
                )
            want = self.resolve(kinds["sym"], parts)
            if want in TYPES and (TYPES[want][0] not in "bus" or TYPES[want][1] not in (32, 64)):
                raise self.fail(
                    ins,
                    f"operand {k}: the address of {op.name} needs a 32/64-bit integer type",
                    "operand-type",
                )

    def match_form(self, ins: Instr, form: list[str], parts) -> str | None:
        """None if the operands fit `form`, else a message (count/joining mismatch)."""
        ops, bars = ins.operands, set(ins.bars)
        classes = [parse_class(c) for c in form]
        plan, i = [], 0
        for cls in classes:
            if cls.joined:
                present = i < len(ops) and i in bars
                if not present:
                    if cls.optional:
                        continue
                    return f"operand {i + 1} must be joined to the previous one with '|'"
            elif i < len(ops) and i in bars:
                return f"operand {i + 1} must not be joined with '|'"
            if i >= len(ops):
                if cls.optional:
                    continue
                return f"expected {len([c for c in classes if not c.optional])} operands"
            plan.append((i, cls))
            i += 1
        if i != len(ops):
            return f"{len(ops)} operands where at most {len(classes)} are accepted"
        self._plan = plan
        return None

    def _sig_op(self, op):
        if isinstance(op, Reg):
            return ("R", self.reg_type(op.name) or special_type(op.name) or op.name)
        if isinstance(op, Imm):
            return ("I", op.is_float, op.hexw, op.value if self._ranged else None)
        if isinstance(op, Vec):
            return ("V", tuple(self._sig_op(x) for x in op.items))
        if isinstance(op, Addr):
            base = op.base
            b = self._sig_op(base) if base is not None else None
            return ("A", b, tuple(self._sig_op(x) for x in op.extra))
        if isinstance(op, Sym):
            if op.name == "_":
                return ("_",)
            if op.name in self.entry.labels:
                return ("L",)
            return ("Y", self.symbols.get(op.name, op.name))
        return ("?", repr(op))

    def signature(self, ins: Instr, row: dict) -> tuple:
        """Everything the checks of `ins` depend on (equal signatures, equal verdicts)."""
        self._ranged = any("ranges" in f for f in row.get("forms", ()))
        guard = self.reg_type(ins.pred[0]) if ins.pred is not None else None
        ops = tuple(self._sig_op(op) for op in ins.operands)
        return (ins.opcode, ins.bars, guard, self.module.address_size, ops)

    def check_instr(self, ins: Instr) -> None:
        row = find_row(ins.parts)
        if row is not None:
            sig = self.signature(ins, row)
            if sig in _ACCEPTED:
                return
        self._check_instr(ins)
        if row is not None:
            _ACCEPTED.add(sig)

    def _check_instr(self, ins: Instr) -> None:
        if ins.pred is not None:
            t = self.reg_type(ins.pred[0])
            if t is None:
                raise self.fail(
                    ins, f"guard uses undeclared register {ins.pred[0]}", "undeclared-register"
                )
            if t != "pred":
                raise self.fail(
                    ins, f"guard {ins.pred[0]} is a .{t} register, not .pred", "predicate-guard"
                )
        parts = ins.parts
        row = find_row(parts)
        if row is None:
            raise self.fail(ins, "unknown instruction or form", "unknown-instruction")
        forms = forms_of(row, parts)
        if not forms:
            raise self.fail(
                ins, f"no operand form of spec row {row['name']!r} matches", "unknown-instruction"
            )
        errors = []
        for form in forms:
            why = self.match_form(ins, form["operands"], parts)
            if why is not None:
                errors.append((why, "operand-count"))
                continue
            try:
                for k, cls in self._plan:
                    self.check_operand(ins, k + 1, ins.operands[k], cls, parts)
                for pos, (lo, hi, step) in (form.get("ranges") or {}).items():
                    op = ins.operands[int(pos) - 1]
                    if isinstance(op, Imm) and not (lo <= op.value <= hi and op.value % step == 0):
                        raise self.fail(
                            ins,
                            f"operand {pos} ({op.value}) must be a multiple of {step} in "
                            f"[{lo}, {hi}]",
                            "immediate-range",
                        )
                return
            except PtxCheckError as e:
                errors.append((str(e), None))
        why, rule = next(((w, r) for w, r in errors if r is None), errors[0])
        if rule is None:
            raise PtxCheckError(why)
        raise self.fail(ins, why, rule)

    def run(self) -> None:
        for ins in self.entry.body:
            self.check_instr(ins)


_ACCEPTED: set = set()  # signatures of instructions that passed (runtime/ptx/check.py only)


def check_module(module: Module, file: str = "<ptx>") -> None:
    """Raise `PtxCheckError` at the first instruction ptxas would refuse."""
    for entry in module.entries.values():
        _Checker(module, entry, file).run()
