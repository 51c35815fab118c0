"""Parser for the PTX subset tileiras emits: module directives, `.entry` kernels, declarations,
labels and (predicated) instructions. Errors are `PtxSyntaxError` located at `line:col`."""

from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass, field


class PtxSyntaxError(Exception):
    """A located PTX syntax error."""

    def __init__(self, msg: str, line: int, col: int = 1, file: str = "<ptx>") -> None:
        super().__init__(f"{file}:{line}:{col}: error: {msg}")
        self.line, self.col = line, col


@dataclass(frozen=True)
class Reg:
    name: str


@dataclass(frozen=True)
class Imm:
    value: int | float
    is_float: bool = False
    bits: int | None = None  # raw bits of a 0f/0d hex float (kept exact for .b32/.b64 use)
    hexw: int | None = field(default=None, compare=False)  # 32 for 0f..., 64 for 0d...


@dataclass(frozen=True)
class Sym:
    """A symbol (variable, param or label) used as a value."""

    name: str


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class Addr:
    base: Reg | Sym | None
    offset: int = 0
    extra: tuple = ()  # further bracketed operands (tensor coordinates of TMA copies)


@dataclass
class Instr:
    opcode: str
    operands: list
    pred: tuple[str, bool] | None  # (predicate register, negated)
    line: int
    bars: tuple = ()  # indices of operands joined to the previous one by `|` (d|p)
    col: int = 1

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")


@dataclass
class Var:
    """A `.shared`/`.global`/`.local`/`.param` variable: state space, element type, size in bytes."""

    name: str
    space: str
    type: str
    size: int
    align: int
    init: tuple = ()  # initializer values (element-sized), if any


@dataclass
class Entry:
    name: str
    params: list[Var]
    regs: dict[str, str] = field(default_factory=dict)  # register name (or prefix) -> type
    reg_counts: dict[str, int] = field(default_factory=dict)  # prefix of `%r<N>` -> N
    shared: list[Var] = field(default_factory=list)
    local: list[Var] = field(default_factory=list)
    call_params: list[Var] = field(default_factory=list)  # `.param` of call sequences
    body: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    directives: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Module:
    version: str = ""
    target: str = ""
    address_size: int = 64
    globals: list[Var] = field(default_factory=list)
    entries: dict[str, Entry] = field(default_factory=dict)


_TOKEN = re.compile(
    r"\s+|//[^\n]*|/\*.*?\*/"
    r'|(?P<str>"[^"\n]*")'
    r"|(?P<hexf>0[fFdD][0-9a-fA-F]+)"
    r"|(?P<num>-?(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d+)U?)"
    r"|(?P<id>[%$.A-Za-z_][\w$.:]*)"
    r"|(?P<punct>[{}()\[\],;:<>@!+\-|=])"
    r"|(?P<bad>.)",
    re.S,
)
_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


class _Source:
    """Newline offsets of a text, to locate tokens lazily (line/col are needed rarely)."""

    def __init__(self, text: str) -> None:
        self.nl = [m.start() for m in re.finditer("\n", text)]

    def loc(self, pos: int) -> tuple[int, int]:
        k = bisect.bisect_left(self.nl, pos)
        return k + 1, pos - (self.nl[k - 1] + 1 if k else 0) + 1


def _lex(text: str, file: str) -> tuple[list[tuple], _Source]:
    """Tokens as (kind, text, offset) tuples; whitespace and comments dropped."""
    src = _Source(text)
    toks = [(m.lastgroup, m.group(), m.start()) for m in _TOKEN.finditer(text) if m.lastgroup]
    for tok in toks:
        if tok[0] == "bad":
            line, col = src.loc(tok[2])
            raise PtxSyntaxError(f"unexpected character {tok[1]!r}", line, col, file)
    return toks, src


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        (self.toks, self.src), self.i, self.file = _lex(text, file), 0, file
        self.reg_names: set[str] = set()  # declared registers without a % (inline-asm `p`)
        # nested `{ }` scopes (inline asm, call sequences): registers declared there shadow the
        # entry's and are renamed NAME@SCOPE (one register file per entry in the simulator)
        self.scopes: list[tuple[int, dict[str, str], dict[str, int]]] = []
        self.nscopes = 0
        self.names: dict = {}  # interned operands by name (outside nested scopes)

    def reg(self, name: str) -> str:
        """The entry-wide name of register `name` as seen from the current scope."""
        for sid, names, ranges in reversed(self.scopes):
            if name in names:
                return names[name]
            m = re.fullmatch(r"(.*?)(\d+)", name)
            if m and m.group(1) in ranges and int(m.group(2)) < ranges[m.group(1)]:
                return f"{name}@{sid}"
        return name

    def err(self, msg: str, tok: tuple | None = None) -> PtxSyntaxError:
        tok = tok or self.peek() or (self.toks[-1] if self.toks else ("", "", 0))
        line, col = self.src.loc(tok[2])
        return PtxSyntaxError(msg, line, col, self.file)

    def peek(self, k: int = 0) -> tuple | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def next(self) -> tuple:
        tok = self.peek()
        if tok is None:
            raise self.err("unexpected end of input")
        self.i += 1
        return tok

    def expect(self, text: str) -> tuple:
        tok = self.next()
        if tok[1] != text:
            raise self.err(f"expected {text!r}, got {tok[1]!r}", tok)
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[1] == text:
            self.i += 1
            return True
        return False

    def int_tok(self) -> int:
        tok = self.next()
        if tok[0] != "num" or "." in tok[1]:
            raise self.err(f"expected an integer, got {tok[1]!r}", tok)
        return int(tok[1].rstrip("U"), 0)

    # -- module level ------------------------------------------------------------------------
    def module(self) -> Module:
        mod = Module()
        while (tok := self.peek()) is not None:
            t = tok[1]
            if t == ".version":
                self.next()
                mod.version = self.next()[1]
            elif t == ".target":
                self.next()
                mod.target = self.next()[1]
                while self.accept(","):
                    self.next()
            elif t == ".address_size":
                self.next()
                mod.address_size = self.int_tok()
            elif t in (".visible", ".extern", ".weak", ".entry", ".func", ".global", ".const"):
                self.toplevel(mod)
            elif t == ".file":  # line info (--lineinfo, -g): .file N "name"
                self.next()
                self.int_tok()
                self.next()
            elif t == ".section":  # DWARF data (-g, inlined_at names): skipped
                self.next()
                self.next()
                self.expect("{")
                while self.next()[1] != "}":
                    pass
            else:
                raise self.err(f"unexpected {t!r} at module level", tok)
        return mod

    def toplevel(self, mod: Module) -> None:
        linkage = []
        while self.peek() and self.peek()[1] in (".visible", ".extern", ".weak"):
            linkage.append(self.next()[1])
        tok = self.peek()
        if tok[1] == ".entry":
            self.next()
            entry = self.entry()
            mod.entries[entry.name] = entry
        elif tok[1] == ".func":
            self.skip_func()
        elif tok[1] in (".global", ".const"):
            mod.globals.append(self.var_decl())
        else:
            raise self.err(f"unexpected {tok[1]!r} after linkage", tok)

    def skip_func(self) -> None:
        """`.func` declarations/definitions (e.g. vprintf) are kept out of the entry's body."""
        self.next()
        depth = 0
        while True:
            tok = self.next()
            if tok[1] == "{":
                depth += 1
            elif tok[1] == "}":
                depth -= 1
                if depth == 0:
                    return
            elif tok[1] == ";" and depth == 0:
                return

    def var_decl(self) -> Var:
        """`.space [.align N] [.ptr ...] .type name[N]` with optional initializer skipped."""
        space = self.next()[1].lstrip(".")
        align, vtype = 0, ""
        while (tok := self.peek()) is not None and tok[0] == "id" and tok[1].startswith("."):
            self.next()
            if tok[1] == ".align":
                align = self.int_tok()
            elif tok[1] in (".ptr", ".global", ".shared", ".const", ".local"):
                continue
            else:
                vtype = tok[1].lstrip(".")
        name_tok = self.next()
        if name_tok[0] != "id":
            raise self.err(f"expected a variable name, got {name_tok[1]!r}", name_tok)
        count = 1
        if self.accept("["):
            count = self.int_tok()
            self.expect("]")
        init = []
        if self.accept("="):
            while self.peek() and self.peek()[1] != ";":
                tok = self.next()
                if tok[0] == "num":
                    init.append(int(tok[1].rstrip("U"), 0))
        size = _SIZES.get(re.sub(r"\D", "", vtype) or "8", 1) if vtype != "pred" else 1
        self.accept(";")
        return Var(name_tok[1], space, vtype, size * count, align or size, tuple(init))

    def entry(self) -> Entry:
        name = self.next()
        if name[0] != "id":
            raise self.err(f"expected an entry name, got {name[1]!r}", name)
        self.expect("(")
        params = []
        while not self.accept(")"):
            self.accept(".hidden")
            if self.peek()[1] != ".param":
                raise self.err(f"expected '.param', got {self.peek()[1]!r}")
            params.append(self.var_decl())
            self.accept(",")
        entry = Entry(name[1], params)
        while self.peek() and self.peek()[1].startswith(".") and self.peek()[1] != "{":
            d = self.next()[1]
            vals = []  # none for flags (.blocksareclusters, .explicitcluster)
            if self.peek() and self.peek()[0] == "num":
                vals.append(self.int_tok())
                while self.accept(","):
                    vals.append(self.int_tok())
            entry.directives[d.lstrip(".")] = vals
        self.expect("{")
        self.body(entry)
        return entry

    # -- body ------------------------------------------------------------------------------------
    def body(self, entry: Entry) -> None:
        depth = 1
        while True:
            tok = self.next()
            t = tok[1]
            if tok[0] == "id" and t[0] not in ".%" and t[-1] != ":":  # most tokens: an opcode
                entry.body.append(self.instr(tok, None))
            elif t == "}":
                depth -= 1
                if depth == 0:
                    return
                self.scopes.pop()
            elif t == "{":
                depth += 1
                self.nscopes += 1
                self.scopes.append((self.nscopes, {}, {}))
            elif t == ".reg":
                rtype = self.next()[1].lstrip(".")
                while True:
                    rname = self.next()[1]
                    count = None
                    if self.accept("<"):
                        count = self.int_tok()
                        self.expect(">")
                    if not rname.startswith("%"):
                        self.reg_names.add(rname)
                    if self.scopes:
                        sid, names, ranges = self.scopes[-1]
                        if count is None:
                            names[rname] = f"{rname}@{sid}"
                            entry.regs[names[rname]] = rtype
                        else:
                            ranges[rname] = count
                            for i in range(count):
                                entry.regs[f"{rname}{i}@{sid}"] = rtype
                    else:
                        if count is not None:
                            entry.reg_counts[rname] = count
                        entry.regs[rname] = rtype
                    if not self.accept(","):
                        break
                self.expect(";")
            elif t in (".shared", ".local", ".param"):
                self.i -= 1
                var = self.var_decl()
                {".shared": entry.shared, ".local": entry.local, ".param": entry.call_params}[
                    t
                ].append(var)
            elif tok[0] == "id" and t.endswith(":") and not t.startswith("."):
                entry.labels[t[:-1]] = len(entry.body)
            elif t == ".pragma":
                while self.next()[1] != ";":
                    pass
            elif t == ".loc":  # .loc F L C [, function_name LABEL, inlined_at F L C]: no-op
                for _ in range(3):
                    self.int_tok()
                while self.accept(","):
                    if self.next()[1] == "inlined_at":
                        for _ in range(3):
                            self.int_tok()
                    else:
                        self.next()
            elif t == "@":
                neg = self.accept("!")
                preg = self.next()
                entry.body.append(self.instr(self.next(), (self.reg(preg[1]), neg)))
            elif tok[0] == "id":
                entry.body.append(self.instr(tok, None))
            else:
                raise self.err(f"unexpected {t!r} in entry body", tok)

    def instr(self, op: tuple, pred) -> Instr:
        if op[0] != "id" or op[1].startswith("%"):
            raise self.err(f"expected an opcode, got {op[1]!r}", op)
        operands, bars = [], []
        toks = self.toks
        if not self.accept(";"):
            while True:
                operands.append(self.operand())
                sep = toks[self.i][1] if self.i < len(toks) else ""
                if sep == ";":
                    self.i += 1
                    break
                if sep == "|":
                    self.i += 1
                    bars.append(len(operands))
                elif sep == ",":
                    self.i += 1
                else:
                    raise self.err(f"expected ',' or ';' after operand, got {sep!r}")
        line, col = self.src.loc(op[2])
        return Instr(op[1], operands, pred, line, tuple(bars), col)

    def _name(self, t: str):
        """A register (interned; scoped names resolved) or a symbol."""
        cached = None if self.scopes else self.names.get(t)
        if cached is not None:
            return cached
        obj = Reg(self.reg(t)) if t.startswith("%") or t in self.reg_names else Sym(t)
        if not self.scopes:  # outside nested scopes a name always means the same thing
            self.names[t] = obj
        return obj

    def operand(self):
        tok = self.next()
        t = tok[1]
        if tok[0] == "id":
            return self._name(t)
        if t in "{(" and tok[0] == "punct":
            items = [self.operand()]
            while self.accept(","):
                items.append(self.operand())
            if any(isinstance(x, Vec) for x in items):
                raise self.err("vectors do not nest", tok)
            self.expect("}" if t == "{" else ")")
            return Vec(tuple(items))
        if t == "[":
            base, off = None, 0
            tok2 = self.peek()
            if tok2[0] == "id":
                self.next()
                base = (
                    Reg(self.reg(tok2[1]))
                    if tok2[1].startswith("%") or tok2[1] in self.reg_names
                    else Sym(tok2[1])
                )
                if self.accept("+"):
                    off = self.int_tok()
                elif self.peek()[0] == "num" and self.peek()[1].startswith("-"):
                    off = self.int_tok()
            else:
                off = self.int_tok()
            extra = []
            while self.accept(","):
                extra.append(self.operand())
            self.expect("]")
            return Addr(base, off, tuple(extra))
        if t == "-" and self.peek() is not None and self.peek()[0] == "id":
            raise self.err("negated register operands are not supported", tok)
        if tok[0] == "hexf":
            bits = int(t[2:], 16)
            if t[1] in "fF":
                return Imm(struct.unpack("<f", struct.pack("<I", bits))[0], True, bits, 32)
            return Imm(struct.unpack("<d", struct.pack("<Q", bits))[0], True, bits, 64)
        if tok[0] == "num":
            s = t.rstrip("U")
            return Imm(float(s), True) if "." in s else Imm(int(s, 0))
        raise self.err(f"unexpected {t!r} as an operand", tok)


def parse_ptx(text: str, file: str = "<ptx>") -> Module:
    """Parse PTX text into a `Module`; raises `PtxSyntaxError` on malformed input."""
    return _Parser(text, file).module()
