"""MLIR-syntax parser: the Python counterpart of MLIR's OpAsmParser.

One :class:`OpParser` parses one module. The declarative-format engine (``format.py``) and the
custom-syntax hooks (``custom_ops.PARSERS``) drive it through its public methods; every error
raises :class:`DiagnosticError` at a ``file:line:col`` location with MLIR's wording.

Errors reported through :meth:`OpParser.error` while a custom-syntax op is being parsed are
prefixed ``custom op 'cuda_tile.X' `` as MLIR's CustomOpAsmParser does; errors from the generic
machinery (types, attributes, SSA uses) are not.
"""

from __future__ import annotations

import re
import sys
from array import array
from typing import Callable, Optional

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.asm.lexer import Lexer, Token
from tilegen.runtime.asm.type_verify import verify_type
from tilegen.runtime.attributes import (
    Attribute,
    FileLineColLoc,
    Location,
)
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticError
from tilegen.runtime.ir import Block, Operation, Region, Value
from tilegen.runtime.limits import MAX_NESTING
from tilegen.runtime.opdef import OpDef, lookup_opdef
from tilegen.runtime.records import dataclass, field
from tilegen.runtime.types import FunctionType, Type

_ERROR, _PUNCT = lx.ERROR, lx.PUNCT


def default_dialect(name: str, opdef: Optional[OpDef]) -> Optional[str]:
    """The dialect bare op names resolve to inside ``name``'s regions (the spec's
    ``default_dialect``, MLIR's getDefaultDialect), or None when the op declares none.

    ``builtin.module`` gives ``cuda_tile`` when parsing (a tilegen extension so that
    tileirdisasm's top-level ``entry`` parses); the printer treats it as ``builtin``."""
    if name == "builtin.module":
        return "cuda_tile"
    if opdef is None:
        return None
    return opdef.extra.get("default_dialect")


class UnresolvedOperand:
    """An SSA use as written (``%x#2``): ``key`` (the spelling with its ``%``, as the lexer
    made it), result number, and where it is (``loc``, computed from the token's offset only
    when a message asks: a parse of 100,000 ops names 300,000 operands and needs none of their
    locations)."""

    __slots__ = ("key", "number", "_pos", "_lexer")

    def __init__(self, key: str, number: int, pos: int, lexer) -> None:
        self.key, self.number, self._pos, self._lexer = key, number, pos, lexer

    @property
    def name(self) -> str:
        """The name without its ``%``."""
        return self.key[1:]

    @property
    def slot(self) -> str:
        """Its key in a name scope: ``%x`` for result 0, ``%x#N`` for result N."""
        return self.key if not self.number else f"{self.key}#{self.number}"

    @property
    def loc(self) -> FileLineColLoc:
        return self._lexer.loc(self._pos)

    def renumbered(self, number: int) -> "UnresolvedOperand":
        """The same name and place, result ``number``."""
        return UnresolvedOperand(self.key, number, self._pos, self._lexer)

    def __repr__(self) -> str:
        return f"UnresolvedOperand(%{self.name}#{self.number})"


@dataclass
class OpState:
    """What a format program or custom hook fills in while parsing one op."""

    name: str
    opdef: Optional[OpDef]
    loc: Location
    operands: list[Value] = field(default_factory=list)
    result_types: list[Type] = field(default_factory=list)
    attributes: dict[str, Attribute] = field(default_factory=dict)
    properties: dict[str, Attribute] = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    successors: list[Block] = field(default_factory=list)

    def add_region(self) -> Region:
        r = Region()
        self.regions.append(r)
        return r


class _ForwardRef(Value):
    """Placeholder for an SSA value used before its definition."""

    __slots__ = ()


class _IsolatedScope:
    """The SSA names visible in one isolated region tree.

    ``values`` maps a name's slot (``%x`` for result 0, ``%x#N`` for result N: ``#`` cannot
    occur in an SSA name) to its value (a :class:`_ForwardRef` until defined), the key being
    the lexer's own spelling: a parse of 100,000 ops keeps 100,000 entries until the region
    ends, so an entry holds nothing else. Where a name was defined is only needed by messages:
    ``def_pos`` holds the offset of the naming token of every visible definition, in order
    (:meth:`OpParser._definition_pos` finds a name's there), ``marks`` its length where each
    nested (non-isolated) region began, ``definitions`` the names each nested region defined
    (the outermost level needs neither: the whole scope goes at its end), and ``numbered``
    the highest result number seen with each name that had one above 0."""

    __slots__ = ("values", "def_pos", "marks", "definitions", "numbered")

    def __init__(self) -> None:
        self.values: dict[str, Value] = {}
        self.def_pos = array("q")
        self.marks: list[int] = []
        self.definitions: list[list[str]] = []
        self.numbered: dict[str, int] = {}


@dataclass
class _DeferredLoc:
    """``loc(#alias)`` whose definition may come later in the file."""

    alias: str
    at: FileLineColLoc


class OpParser:
    """Token, SSA, type, attribute and region parsing for one module."""

    def __init__(
        self,
        text: str,
        filename: str = "<stdin>",
        *,
        allow_unregistered: bool = False,
        verify_types: bool = True,
    ):
        self.lexer = Lexer(text, filename)
        self.filename = filename
        self.allow_unregistered = allow_unregistered
        self.verify_types = verify_types
        self.tok: Token = self.lexer.next()
        self.attr_aliases: dict[str, Attribute] = {}
        self.type_aliases: dict[str, Type] = {}
        self._scopes: list[_IsolatedScope] = []
        self._forward_refs: dict[int, tuple[_ForwardRef, UnresolvedOperand]] = {}
        self._custom_op: list[Optional[str]] = [None]
        self._default_dialect: list[str] = ["cuda_tile"]
        self._op_stack: list[OpState] = []
        self._deferred: list[tuple[object, _DeferredLoc]] = []
        self._blocks_stack: list[dict] = [{}]
        #: regions, types and attributes being parsed, one inside the other (:meth:`nest`)
        self.depth = 0
        #: type spelling -> type (:meth:`parse_optional_type`)
        self._type_cache: dict[str, Type] = {}
        #: (op name as written, default dialect) -> (full name, OpDef)
        self._op_names: dict[tuple, tuple] = {}
        self._check_lex_error()

    def nest(self) -> None:
        """Enter one more level of nesting (the caller decrements :attr:`depth` when it leaves);
        deeper than :data:`~tilegen.runtime.limits.MAX_NESTING` is a located error."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.depth -= 1
            self._fail(
                f"nesting exceeds the supported depth of {MAX_NESTING} levels of regions, types "
                "and attributes"
            )

    # ================================================================ tokens

    def _check_lex_error(self) -> None:
        if self.tok.kind == lx.ERROR:
            self._fail(self.tok.text, self.lexer.loc(self.tok.pos))

    def _advance(self) -> Token:
        tok = self.tok
        nxt = self.tok = self.lexer.next()
        if nxt.kind == _ERROR:
            self._fail(nxt.text, self.lexer.loc(nxt.pos))
        return tok

    def save(self) -> tuple:
        """An opaque position to :meth:`restore` to (for look-ahead in custom hooks)."""
        return (self.tok, self.lexer.pos)

    def restore(self, state: tuple) -> None:
        self.tok, self.lexer.pos = state

    def loc(self) -> FileLineColLoc:
        """Location of the current token."""
        return self.lexer.loc(self.tok.pos)

    def loc_at(self, tok: Token) -> FileLineColLoc:
        return self.lexer.loc(tok.pos)

    def error(self, msg: str, loc: Optional[Location] = None) -> "NoReturn":  # noqa: F821
        """Raise a located error; inside a custom op it gets MLIR's ``custom op 'X' `` prefix."""
        name = self._custom_op[-1]
        if name is not None:
            msg = f"custom op '{name}' {msg}"
        self._fail(msg, loc)

    def error_after(
        self, first: list[str], msg: str, loc: Optional[Location] = None
    ) -> "NoReturn":  # noqa: F821
        """Like :meth:`error`, with errors MLIR emits just before it (same location, same
        prefix) carried in ``DiagnosticError.preceding``."""
        try:
            self.error(msg, loc)
        except DiagnosticError as e:
            for m in first:
                name = self._custom_op[-1]
                text = f"custom op '{name}' {m}" if name is not None else m
                e.preceding.append(Diagnostic("error", text, e.diag.loc))
            raise

    def _fail(self, msg: str, loc: Optional[Location] = None, notes=()) -> "NoReturn":  # noqa: F821
        diag = Diagnostic("error", msg, loc or self.loc())
        for note_msg, note_loc in notes:
            diag.attach_note(note_msg, note_loc)
        raise DiagnosticError(diag)

    def at_punct(self, p: str) -> bool:
        tok = self.tok
        return tok.text == p and tok.kind == _PUNCT

    def at_keyword(self, kw: Optional[str] = None) -> bool:
        return self.tok.kind == lx.BARE and (kw is None or self.tok.text == kw)

    @property
    def at_eof(self) -> bool:
        return self.tok.kind == lx.EOF_

    def parse_optional_keyword(self, kw: Optional[str] = None) -> Optional[str]:
        """Consume a bare identifier (``kw`` only, when given) and return it, else None."""
        if self.tok.kind == lx.BARE and (kw is None or self.tok.text == kw):
            return self._advance().text
        return None

    def parse_keyword(self, kw: Optional[str] = None, msg: Optional[str] = None) -> str:
        """A bare identifier (``kw`` if given); ``expected valid keyword`` / ``expected 'kw'``."""
        got = self.parse_optional_keyword(kw)
        if got is None:
            if msg is None:
                msg = "expected valid keyword" if kw is None else f"expected '{kw}'"
            self.error(msg)
        return got

    def parse_optional_keyword_or_string(self) -> Optional[str]:
        kw = self.parse_optional_keyword()
        if kw is not None:
            return kw
        return self.parse_optional_string()

    def parse_optional_punct(self, p: str) -> bool:
        """Consume punctuation ``p`` if present."""
        tok = self.tok
        if tok.text == p and tok.kind == _PUNCT:
            self._advance()
            return True
        # `>` may be glued into `->` only when written so; `x` in shapes is handled by types.
        return False

    def expect_punct(self, p: str, msg: Optional[str] = None) -> None:
        """Consume ``p`` or fail with ``expected 'p'`` (MLIR's parseToken: never prefixed, and
        reported after the previous token when the current one starts a new line)."""
        if not self.parse_optional_punct(p):
            self.wrong_token_error(msg or f"expected '{p}'")

    _expect = expect_punct

    def wrong_token_loc(self) -> FileLineColLoc:
        """MLIR's emitWrongTokenError location: back up over blank lines and comments."""
        text = self.lexer.text
        pos = self.tok.pos
        original = pos
        buf = text[:pos]
        while True:
            buf = buf.rstrip(" \t")
            if not buf:
                return self.lexer.loc(original)
            if buf[-1] not in "\n\r":
                return self.lexer.loc(len(buf))
            buf = buf[:-1]
            nl = max(buf.rfind("\n"), buf.rfind("\r"))
            prev_line = buf[nl:] if nl >= 0 else buf
            c = prev_line.find("//")
            if c >= 0:
                buf = buf[: len(buf) - (len(prev_line) - c)]

    def wrong_token_error(self, msg: str) -> "NoReturn":  # noqa: F821
        self._fail(msg, self.wrong_token_loc())

    def parse_optional_integer(self, allow_negative: bool = True) -> Optional[int]:
        """An integer literal (decimal/hex, optional leading ``-``), else None."""
        if self.tok.kind == lx.INTEGER:
            return _int_value(self._advance().text)
        if allow_negative and self.at_punct("-"):
            state = self.save()
            self._advance()
            if self.tok.kind == lx.INTEGER:
                return -_int_value(self._advance().text)
            self.restore(state)
        return None

    def parse_integer(self, msg: str = "expected integer value") -> int:
        v = self.parse_optional_integer()
        if v is None:
            self.error(msg)
        return v

    def parse_optional_float(self) -> Optional[float]:
        """A float or integer literal as a Python float (``-`` allowed), else None."""
        neg = False
        state = self.save()
        if self.at_punct("-"):
            self._advance()
            neg = True
        if self.tok.kind == lx.FLOAT:
            v = float(self._advance().text)
        elif self.tok.kind == lx.INTEGER and not self.tok.text.startswith("0x"):
            v = float(self._advance().text)  # (not float(int(..)): no OverflowError)
        else:
            self.restore(state)
            return None
        return -v if neg else v

    def parse_float(self) -> float:
        v = self.parse_optional_float()
        if v is None:
            self.error("expected floating point literal")
        return v

    def parse_optional_string(self) -> Optional[str]:
        """A quoted string, decoded, else None."""
        if self.tok.kind == lx.STRING:
            return lx.decode_string(self._advance().text)
        return None

    def parse_string(self, msg: str = "expected string") -> str:
        s = self.parse_optional_string()
        if s is None:
            self.error(msg)
        return s

    def parse_optional_symbol_name(self) -> Optional[str]:
        if self.tok.kind == lx.AT:
            text = self._advance().text[1:]
            return lx.decode_string(text) if text.startswith('"') else text
        return None

    def parse_symbol_name(self) -> str:
        """``@name`` or ``@"quoted"`` -> name."""
        s = self.parse_optional_symbol_name()
        if s is None:
            self.error("expected valid '@'-identifier for symbol name")
        return s

    # ================================================================ SSA values

    def parse_optional_operand(
        self, allow_result_number: bool = True
    ) -> Optional[UnresolvedOperand]:
        if self.tok.kind != lx.PERCENT:
            return None
        return self.parse_operand(allow_result_number)

    def parse_operand(self, allow_result_number: bool = True) -> UnresolvedOperand:
        """``%name`` or ``%name#N``."""
        if self.tok.kind != lx.PERCENT:
            self._fail("expected SSA operand")
        tok = self.tok
        nxt = self.tok = self.lexer.next()
        if nxt.kind == _ERROR:
            self._fail(nxt.text, self.lexer.loc(nxt.pos))
        if allow_result_number and nxt.kind == lx.HASH and nxt.pos == tok.pos + len(tok.text):
            digits = nxt.text[1:]
            if not digits.isdigit():
                self._fail("expected integer value")
            self._advance()
            return UnresolvedOperand(tok.text, int(digits), tok.pos, self.lexer)
        return UnresolvedOperand(tok.text, 0, tok.pos, self.lexer)

    def parse_operand_list(
        self, delimiter: Optional[str] = None, required_count: int = -1
    ) -> list[UnresolvedOperand]:
        """Comma-separated operands; ``delimiter`` ``"paren"``/``"square"`` wraps them."""
        close = None
        if delimiter == "paren":
            self.expect_punct("(")
            close = ")"
        elif delimiter == "square":
            self.expect_punct("[")
            close = "]"
        elif delimiter == "optional_paren":
            if not self.parse_optional_punct("("):
                return []
            close = ")"
        elif delimiter == "optional_square":
            if not self.parse_optional_punct("["):
                return []
            close = "]"
        out: list[UnresolvedOperand] = []
        if close is not None and self.parse_optional_punct(close):
            return out
        if close is None and self.tok.kind != lx.PERCENT:
            return out
        while True:
            out.append(self.parse_operand())
            if not self.parse_optional_punct(","):
                break
        if close is not None:
            self.expect_punct(close)
        if required_count >= 0 and len(out) != required_count:
            self.error(f"expected {required_count} operands")
        return out

    def _scope(self) -> _IsolatedScope:
        return self._scopes[-1]

    def resolve_operand(self, u: UnresolvedOperand, type: Type) -> Value:
        """The value ``u`` names, checked against ``type`` (forward references allowed)."""
        number = u.number
        if number:
            if number > len(self.lexer.text):  # no op in this text has that many results
                self._fail("use of undeclared SSA value name", u.loc)
            key = f"{u.key}#{number}"
        else:
            key = u.key
        scope = self._scopes[-1]
        value = scope.values.get(key)
        if value is not None:
            if value.type is type or value.type == type:
                return value
            from tilegen.runtime.asm.type_syntax import format_type

            self._fail(
                f"use of value '{u.key}' expects different type than prior uses: "
                f"'{format_type(type)}' vs '{format_type(value.type)}'",
                u.loc,
                notes=[("prior use here", self._entry_loc(scope, u.key, value))],
            )
        if number:
            self._note_numbered(scope, u.key, number)
        ref = _ForwardRef(type)
        scope.values[key] = ref
        self._forward_refs[id(ref)] = (ref, u)
        return ref

    def resolve_operands(self, us: list[UnresolvedOperand], types) -> list[Value]:
        """Resolve ``us`` against ``types`` (a list, or one type for all)."""
        if isinstance(types, Type):
            types = [types] * len(us)
        elif len(types) != len(us):
            types = list(types)
        if len(types) != len(us):
            self.error(f"{len(us)} operands present, but expected {len(types)}")
        resolve = self.resolve_operand
        return [resolve(u, t) for u, t in zip(us, types)]

    def define_value(self, u: UnresolvedOperand, value: Value) -> None:
        """Bind ``%name#N`` to ``value`` in the current scope (MLIR's addDefinition)."""
        key = u.key
        number = u.number
        slot = f"{key}#{number}" if number else key
        scope = self._scopes[-1]
        values = scope.values
        old = values.get(slot)
        if old is not None:
            if not isinstance(old, _ForwardRef):
                self._fail(
                    f"redefinition of SSA value '{key}'",
                    u.loc,
                    notes=[("previously defined here", self._entry_loc(scope, key, old))],
                )
            if old.type != value.type:
                from tilegen.runtime.asm.type_syntax import format_type

                self._fail(
                    f"definition of SSA value '{key}#{number}' has type "
                    f"'{format_type(value.type)}'",
                    u.loc,
                    notes=[
                        (
                            f"previously used here with type '{format_type(old.type)}'",
                            self._entry_loc(scope, key, old),
                        )
                    ],
                )
            old.replace_all_uses_with(value)
            self._forward_refs.pop(id(old), None)
        elif number:
            self._note_numbered(scope, key, number)
        values[slot] = value
        scope.def_pos.append(u._pos)
        definitions = scope.definitions
        if len(definitions) > 1:  # a nested region: its names go when it ends
            definitions[-1].append(key)

    def _entry_loc(self, scope: _IsolatedScope, key: str, value: Value) -> FileLineColLoc:
        """Where ``value``, visible as ``key`` (``%x``, any result number), was named: the
        first use of a forward reference, else the definition."""
        if isinstance(value, _ForwardRef):
            return self._forward_refs[id(value)][1].loc
        return self.lexer.loc(self._definition_pos(scope, key))

    def _definition_pos(self, scope: _IsolatedScope, key: str) -> int:
        """Offset of the token that defined the visible ``key`` (``%x``): a name has one
        visible definition per scope, and ``def_pos`` holds exactly the visible ones."""
        text, n = self.lexer.text, len(key)
        for pos in reversed(scope.def_pos):
            if text.startswith(key, pos) and _RE_SSA_NAME_CHAR.match(text, pos + n) is None:
                return pos
        raise AssertionError(f"no definition of {key} in scope")  # pragma: no cover

    @staticmethod
    def _note_numbered(scope: _IsolatedScope, key: str, number: int) -> None:
        if scope.numbered.get(key, 0) < number:
            scope.numbered[key] = number

    def _push_scope(self, isolated: bool) -> None:
        if isolated or not self._scopes:
            self._scopes.append(_IsolatedScope())
        scope = self._scopes[-1]
        scope.definitions.append([])
        scope.marks.append(len(scope.def_pos))

    def _pop_scope(self) -> None:
        scope = self._scopes[-1]
        if len(scope.definitions) == 1:
            self._scopes.pop()
        else:
            del scope.def_pos[scope.marks.pop() :]
            values, numbered = scope.values, scope.numbered
            for key in scope.definitions.pop():
                values.pop(key, None)  # every result number of the name, as MLIR does
                for n in range(1, numbered.get(key, 0) + 1):
                    values.pop(f"{key}#{n}", None)

    def _check_forward_refs(self) -> None:
        if self._forward_refs:
            first = min(self._forward_refs.values(), key=lambda e: e[1]._pos)
            self._fail("use of undeclared SSA value name", first[1].loc)

    # ================================================================ types

    def parse_optional_type(self) -> Optional[Type]:
        """A type if one starts here, else None.

        A type spelled ``name<...>`` (no strings, comments or line breaks inside) is memoised
        by its exact text, per parser (aliases are per file): a later identical spelling skips
        straight past it. Only a parse that consumed exactly that text is stored (so a hit
        parses to what a fresh parse would, failures never being stored)."""
        tok = self.tok
        if tok.kind == lx.BARE or tok.kind == lx.EXCL:
            text = self.lexer.text
            if text.startswith("<", tok.pos + len(tok.text)):
                m = _RE_TYPE_SPAN.match(text, tok.pos)
                if m is not None:
                    return self._parse_spanned_type(m)
        self.nest()
        try:
            return _type_syntax.parse_optional_type(self)
        finally:
            self.depth -= 1

    def _parse_spanned_type(self, m) -> Optional[Type]:
        span = m.group()
        end = m.end()
        cache = self._type_cache
        t = cache.get(span)
        # (each level of nesting takes at least one character: a hit nests no deeper than a
        # fresh parse could without reaching the limit)
        if t is not None and self.depth + len(span) < MAX_NESTING:
            lexer = self.lexer
            lexer.pos = end
            nxt = self.tok = lexer.next()
            if nxt.kind == _ERROR:
                self._fail(nxt.text, lexer.loc(nxt.pos))
            return t
        self.nest()
        try:
            t = _type_syntax.parse_optional_type(self)
        finally:
            self.depth -= 1
        if t is not None and len(cache) < _TYPE_CACHE_SIZE:
            after = self.tok.pos
            if after == end or (after > end and self.lexer.text[end:after].isspace()):
                cache[span] = t
        return t

    def parse_type(self) -> Type:
        """Any type: builtin, ``!cuda_tile.X<..>``, short ``tile<..>``/``ptr<..>``/``token``..."""
        t = self.parse_optional_type()
        if t is None:
            self._fail("expected non-function type")
        return t

    def parse_cuda_tile_type(self) -> Type:
        """A type in cuda_tile's ``custom<CudaTileType>`` position: short or long form; with
        nothing type-like here it fails as cuda_tile's parser does (``expected valid keyword``)."""
        t = self.parse_optional_type()
        if t is None:
            if self.tok.kind == lx.EXCL:
                self._fail("expected non-function type")
            self.error("expected valid keyword")
        return t

    def parse_cuda_tile_type_list(self) -> list[Type]:
        out = [self.parse_cuda_tile_type()]
        while self.parse_optional_punct(","):
            out.append(self.parse_cuda_tile_type())
        return out

    def parse_colon_type(self) -> Type:
        self.expect_punct(":")
        return self.parse_type()

    def parse_type_list(self) -> list[Type]:
        """``T (, T)*`` (possibly empty when no type starts here)."""
        out: list[Type] = []
        t = self.parse_optional_type()
        if t is None:
            return out
        out.append(t)
        while self.parse_optional_punct(","):
            out.append(self.parse_type())
        return out

    def parse_colon_type_list(self) -> list[Type]:
        self.expect_punct(":")
        return self.parse_type_list()

    def parse_arrow_type_list(self) -> list[Type]:
        """``-> T`` or ``-> (T, U)``."""
        self.expect_punct("->")
        return self.parse_function_result_types()

    def parse_optional_arrow_type_list(self) -> Optional[list[Type]]:
        if not self.at_punct("->"):
            return None
        return self.parse_arrow_type_list()

    def parse_function_result_types(self) -> list[Type]:
        if self.at_punct("("):
            from tilegen.runtime.asm.type_syntax import parse_paren_type_list

            return parse_paren_type_list(self)
        return [self.parse_type()]

    def parse_function_type(self) -> FunctionType:
        t = self.parse_type()
        if not isinstance(t, FunctionType):
            self._fail("expected function type")
        return t

    def verify_type(self, t: Type, loc: FileLineColLoc) -> None:
        """Run the dialect type verifier (runtime/asm/type_verify.py); error at ``loc``."""
        if not self.verify_types:
            return
        msg = verify_type(t)
        if msg:
            self._fail(msg, loc)

    # ================================================================ attributes

    def parse_attribute(self, type: Optional[Type] = None) -> Attribute:
        """Any attribute; ``type`` is the expected type for untyped literals (``1`` -> i64 default)."""
        from tilegen.runtime.asm.attr_syntax import parse_attribute

        return parse_attribute(self, type)

    def parse_optional_attribute(self, type: Optional[Type] = None) -> Optional[Attribute]:
        from tilegen.runtime.asm.attr_syntax import parse_optional_attribute

        return parse_optional_attribute(self, type)

    def parse_optional_attr_dict(self, into: dict) -> None:
        """``{name = attr, unit_name, ...}`` merged into ``into``; duplicates are errors."""
        if not self.at_punct("{"):
            return
        from tilegen.runtime.asm.attr_syntax import parse_dict_entries

        for name, value in parse_dict_entries(self):
            if name in into:
                self._fail(f"attribute '{name}' occurs more than once in the attribute list")
            into[name] = value

    def parse_optional_attr_dict_with_keyword(self, into: dict) -> None:
        """``attributes {...}`` as ``attr-dict-with-keyword``."""
        if self.parse_optional_keyword("attributes") is not None:
            if not self.at_punct("{"):
                self._fail("expected '{' in attribute dictionary")
            self.parse_optional_attr_dict(into)

    def parse_optional_location(self) -> Optional[Location]:
        """A trailing ``loc(...)``, else None (alias references resolve at end of file)."""
        if not self.at_keyword("loc"):
            return None
        from tilegen.runtime.asm.attr_syntax import parse_location

        return parse_location(self)

    # ================================================================ regions and blocks

    def parse_argument(
        self, allow_type: bool = True, allow_attrs: bool = False, allow_loc: bool = True
    ) -> tuple:
        """``%name [: T] [{attrs}] [loc(..)]`` -> (UnresolvedOperand, Type|None, attrs|None, loc|None)."""
        u = self.parse_operand(allow_result_number=False)
        t = None
        attrs = None
        loc = None
        if allow_type:
            self.expect_punct(":")
            t = self.parse_type()
        if allow_attrs and self.at_punct("{"):
            attrs = {}
            self.parse_optional_attr_dict(attrs)
        if allow_loc:
            loc = self.parse_optional_location()
        return (u, t, attrs, loc)

    def parse_region(
        self, region: Region, arguments=None, enable_name_shadowing: bool = False
    ) -> Region:
        """``{ block* }``; ``arguments`` are (UnresolvedOperand, Type, loc|None) entry-block args.

        As in MLIR, the region's values go out of scope after its ``}``, outer values stay
        visible inside it (the verifier rejects uses across IsolatedFromAbove), and
        ``enable_name_shadowing`` parses it as an isolated name scope whose arguments may reuse
        outer names."""
        return self._parse_region(region, arguments, enable_name_shadowing, enable_name_shadowing)

    def parse_optional_region(
        self, region: Region, arguments=None, enable_name_shadowing: bool = False
    ) -> bool:
        if not self.at_punct("{"):
            return False
        self.parse_region(region, arguments, enable_name_shadowing)
        return True

    def _parse_region(self, region, arguments, enable_name_shadowing, isolated) -> Region:
        self._expect("{", "expected '{' to begin a region")
        self.nest()
        try:
            return self._parse_region_in(region, arguments, enable_name_shadowing, isolated)
        finally:
            self.depth -= 1

    def _parse_region_in(self, region, arguments, enable_name_shadowing, isolated) -> Region:
        arguments = list(arguments or [])
        if arguments or not self.at_punct("}"):
            self._push_scope(isolated)
            dd = None
            if self._op_stack:
                dd = default_dialect(self._op_stack[-1].name, self._op_stack[-1].opdef)
            pushed_dialect = dd is not None
            if pushed_dialect:
                self._default_dialect.append(dd)
            saved_custom = self._custom_op
            self._custom_op = [None]
            try:
                self._parse_region_body(region, arguments, enable_name_shadowing)
            finally:
                self._custom_op = saved_custom
                if pushed_dialect:
                    self._default_dialect.pop()
            self._pop_scope()
        self._expect("}", "expected '}' to end region")
        return region

    def _parse_region_body(self, region: Region, arguments, shadowing: bool) -> None:
        blocks: dict[str, tuple[Block, Optional[FileLineColLoc]]] = {}
        entry = Block()
        region.append(entry)
        if arguments:
            for arg in arguments:
                u, t = arg[0], arg[1]
                loc = arg[2] if len(arg) > 2 else None
                if not shadowing:
                    scope = self._scopes[-1]
                    seen = scope.values.get(u.slot)
                    if seen is not None:
                        self._fail(
                            f"region entry argument '{u.key}' is already in use",
                            u.loc,
                            notes=[
                                ("previously referenced here", self._entry_loc(scope, u.key, seen))
                            ],
                        )
                v = entry.add_argument(t, loc if isinstance(loc, Location) else None)
                if isinstance(loc, _DeferredLoc):
                    self._deferred.append((v, loc))
                self.define_value(u, v)
            if self.tok.kind == lx.CARET:
                self._fail("invalid block name in region with named arguments")
        elif self.tok.kind == lx.CARET:
            region.blocks.clear()
            entry = None
        self._blocks_stack.append(blocks)
        try:
            if entry is not None:
                self._parse_block_body(entry)
            while self.tok.kind == lx.CARET:
                self._parse_labeled_block(region, blocks)
        finally:
            self._blocks_stack.pop()
        for name, (block, use_loc) in blocks.items():
            if block.parent is None:
                self._fail("reference to an undefined block", use_loc)

    def _get_block(self, blocks, name: str, loc) -> Block:
        if name not in blocks:
            blocks[name] = (Block(), loc)
        return blocks[name][0]

    def _parse_labeled_block(self, region: Region, blocks) -> None:
        tok = self._advance()
        name = tok.text
        loc = self.loc_at(tok)
        block_map = blocks
        if name in block_map and block_map[name][0].parent is not None:
            self._fail(f"redefinition of block '{name}'", loc)
        block = self._get_block(block_map, name, loc)
        if self.parse_optional_punct("("):
            if not self.parse_optional_punct(")"):
                while True:
                    u, t, _a, aloc = self.parse_argument()
                    v = block.add_argument(t, aloc if isinstance(aloc, Location) else None)
                    if isinstance(aloc, _DeferredLoc):
                        self._deferred.append((v, aloc))
                    self.define_value(u, v)
                    if not self.parse_optional_punct(","):
                        break
                self._expect(")", "expected ')' to end argument list")
        self._expect(":", "expected ':' after block name")
        region.append(block)
        self._parse_block_body(block)

    def _parse_block_body(self, block: Block) -> None:
        while not (self.at_punct("}") or self.tok.kind == lx.CARET):
            if self.at_eof:
                self.wrong_token_error("expected operation name in quotes")
            block.append(self.parse_operation())

    def parse_successor(self) -> Block:
        if self.tok.kind != lx.CARET:
            self._fail("expected block name")
        tok = self._advance()
        blocks = self._blocks_stack[-1]
        return self._get_block(blocks, tok.text, self.loc_at(tok))

    # ================================================================ operations

    def parse_operation(self) -> Operation:
        """``[%r (, %r)* =] (generic-op | custom-op) [loc(...)]``."""
        results: list[tuple[UnresolvedOperand, int]] = []
        tok = self.tok
        if tok.kind == lx.PERCENT:
            while True:
                u = self.parse_operand(allow_result_number=False)
                count = 1
                if self.parse_optional_punct(":"):
                    count = self.parse_optional_integer(allow_negative=False)
                    if count is None or count < 1:
                        self._fail("expected integer number of results")
                results.append((u, count))
                if not self.parse_optional_punct(","):
                    break
            self._expect("=", "expected '=' after SSA name")
            tok = self.tok
        op_pos = tok.pos  # (its location only if a message needs it)
        if tok.kind == lx.BARE:
            op = self._parse_custom_operation()
        elif tok.kind == lx.STRING:
            op = self._parse_generic_operation()
        else:
            self.wrong_token_error("expected operation name in quotes")
        if not results:
            return op
        op_results = op.results
        if len(results) == 1 and results[0][1] == 1 and len(op_results) == 1:
            self.define_value(results[0][0], op_results[0])  # `%x = ...`
            return op
        nbind = sum(c for _, c in results)
        if not op_results:
            self._fail("cannot name an operation with no results", self.lexer.loc(op_pos))
        if nbind != len(op_results):
            self._fail(
                f"operation defines {len(op_results)} results but was provided {nbind} to bind",
                self.lexer.loc(op_pos),
            )
        index = 0
        for u, count in results:
            for i in range(count):
                self.define_value(u.renumbered(i) if i else u, op_results[index])
                index += 1
        return op

    def _resolve_op_name(self, name: str, loc) -> tuple[str, Optional[OpDef]]:
        key = (name, self._default_dialect[-1])
        found = self._op_names.get(key)
        if found is None:
            found = self._op_names[key] = self._lookup_op_name(name, loc)
        return found

    def _lookup_op_name(self, name: str, loc) -> tuple[str, Optional[OpDef]]:
        opdef = lookup_opdef(name)
        if opdef is not None:
            return _op_name(opdef), opdef
        if "." not in name:
            if name == "module":
                return "builtin.module", None
            dd = self._default_dialect[-1]
            if dd:
                full = f"{dd}.{name}"
                opdef = lookup_opdef(full)
                if opdef is not None:
                    return _op_name(opdef), opdef
                self._fail(f"custom op '{name}' is unknown (tried '{full}' as well)", loc)
        self._fail(f"custom op '{name}' is unknown", loc)

    def _parse_custom_operation(self) -> Operation:
        tok = self._advance()
        loc = self.loc_at(tok)
        name, opdef = self._resolve_op_name(tok.text, loc)
        state = OpState(name, opdef, loc)
        self._op_stack.append(state)
        self._custom_op.append(name)
        try:
            if name == "builtin.module":
                self._parse_builtin_module(state)
            elif opdef.custom_format:
                hook = _custom_parser(opdef.custom_format)
                if hook is None:
                    self.error(f"has no parser for custom format '{opdef.custom_format}'", loc)
                hook(self, state)
            else:
                _format.parse_with_format(self, state)
        finally:
            self._custom_op.pop()
            self._op_stack.pop()
        op_loc = self.parse_optional_location()
        return self._build(state, op_loc)

    def _parse_builtin_module(self, state: OpState) -> None:
        sym = self.parse_optional_symbol_name()
        if sym is not None:
            from tilegen.runtime.attributes import StringAttr

            state.attributes["sym_name"] = StringAttr(sym)
        self.parse_optional_attr_dict_with_keyword(state.attributes)
        region = state.add_region()
        self._parse_region(region, None, False, False)
        if not region.blocks:
            region.append(Block())

    def _build(self, state: OpState, loc) -> Operation:
        op = Operation(
            state.name,
            operands=state.operands,
            result_types=state.result_types,
            attributes=state.attributes,
            regions=state.regions,
            loc=state.loc if loc is None or isinstance(loc, _DeferredLoc) else loc,
            opdef=state.opdef,
            properties=state.properties,
        )
        if state.successors:  # (Operation starts with its own empty list)
            op.successors = list(state.successors)
        if isinstance(loc, _DeferredLoc):
            self._deferred.append((op, loc))
        return op

    def _parse_generic_operation(self) -> Operation:
        tok = self._advance()
        loc = self.loc_at(tok)
        name = lx.decode_string(tok.text)
        if not name:
            self._fail("empty operation name is invalid", loc)
        opdef = lookup_opdef(name)
        if opdef is not None:
            name = _op_name(opdef)
        elif name != "builtin.module":
            # A registered dialect never allows unknown ops, with or without
            # -allow-unregistered-dialect (MLIR's verifier says so of every such op).
            dialect = name.split(".", 1)[0] if "." in name else ""
            if dialect in ("cuda_tile", "builtin"):
                self._fail(
                    f"unregistered operation '{name}' found in dialect ('{dialect}') that does "
                    "not allow unknown operations",
                    loc,
                )
            if not self.allow_unregistered:
                self._fail(
                    "operation being parsed with an unregistered dialect. If this is intended, "
                    "please use -allow-unregistered-dialect with the MLIR tool used",
                    loc,
                )
        state = OpState(name, opdef, loc)
        self._expect("(", "expected '(' to start operand list")
        operands = []
        if not self.parse_optional_punct(")"):
            while True:
                operands.append(self.parse_operand())
                if not self.parse_optional_punct(","):
                    break
            self._expect(")", "expected ')' to end operand list")
        if self.at_punct("["):
            self._advance()
            while True:
                state.successors.append(self.parse_successor())
                if not self.parse_optional_punct(","):
                    break
            self._expect("]", "expected ']' to end successor list")
        props: dict[str, Attribute] = {}
        if self.at_punct("<"):
            self._advance()
            if not self.at_punct("{"):
                self._fail("expected '{' in attribute dictionary")
            self.parse_optional_attr_dict(props)
            self._expect(">", "expected '>' to close properties")
        self._op_stack.append(state)
        try:
            if self.parse_optional_punct("("):
                while True:
                    region = state.add_region()
                    self._parse_region(region, None, False, False)
                    if not self.parse_optional_punct(","):
                        break
                self._expect(")", "expected ')' to end region list")
        finally:
            self._op_stack.pop()
        attrs: dict[str, Attribute] = {}
        if self.at_punct("{"):
            self.parse_optional_attr_dict(attrs)
        type_loc = self.loc()
        self._expect(":", "expected ':' followed by operation type")
        ftype = self.parse_type()
        if not isinstance(ftype, FunctionType):
            self._fail("expected function type", type_loc)
        if len(ftype.inputs) != len(operands):
            n = len(operands)
            self._fail(
                f"expected {n} operand type{'' if n == 1 else 's'} but had {len(ftype.inputs)}",
                type_loc,
            )
        state.operands = [self.resolve_operand(u, t) for u, t in zip(operands, ftype.inputs)]
        state.result_types = list(ftype.results)
        if opdef is not None:
            for name in attrs:
                if name in props:
                    self._fail(
                        f"attribute '{name}' occurs more than once in the attribute list", loc
                    )
            state.attributes = {**props, **attrs}
        else:
            state.properties = props
            state.attributes = attrs
        op_loc = self.parse_optional_location()
        return self._build(state, op_loc)

    # ================================================================ top level

    def parse_top_level(self, no_implicit_module: bool = False) -> Operation:
        """The whole file: alias definitions and ops, wrapped in ``builtin.module`` unless asked."""
        from tilegen.runtime.attributes import StringAttr  # noqa: F401

        module_state = OpState("builtin.module", None, self.lexer.loc(0))
        self._push_scope(True)
        self._op_stack.append(module_state)
        self._default_dialect.append("cuda_tile")
        ops: list[Operation] = []
        while not self.at_eof:
            if self.tok.kind == lx.HASH and self._next_is_alias_def():
                self._parse_alias_def(attr=True)
            elif self.tok.kind == lx.EXCL and self._next_is_alias_def():
                self._parse_alias_def(attr=False)
            elif self.tok.kind == lx.PERCENT or self.tok.kind in (lx.STRING, lx.BARE):
                ops.append(self.parse_operation())
            else:
                self._fail("expected operation name in quotes")
        self._op_stack.pop()
        self._pop_scope()
        self._check_forward_refs()
        self._resolve_deferred()
        if no_implicit_module:
            if len(ops) != 1:
                self._fail(
                    "source must contain a single top-level operation, found: " + str(len(ops)),
                    self.lexer.loc(0),
                )
            return ops[0]
        if len(ops) == 1 and ops[0].name == "builtin.module":
            return ops[0]
        # MLIR locates the implicit module at "file":0:0.
        module_loc = FileLineColLoc(self.filename, 0, 0)
        module = Operation("builtin.module", regions=1, loc=module_loc, opdef=None)
        block = module.regions[0].block
        for op in ops:
            block.append(op)
        return module

    def _next_is_alias_def(self) -> bool:
        state = self.save()
        self._advance()
        ok = self.at_punct("=")
        self.restore(state)
        return ok

    def _parse_alias_def(self, attr: bool) -> None:
        tok = self._advance()
        name = tok.text[1:]
        loc = self.loc_at(tok)
        if "." in name:
            kind = "attribute" if attr else "type"
            self._fail(f"{kind} names with a '.' are reserved for dialect-defined names", loc)
        table = self.attr_aliases if attr else self.type_aliases
        if name in table:
            kind = "attribute" if attr else "type"
            self._fail(f"redefinition of {kind} alias id '{name}'", loc)
        self._expect("=")
        if attr:
            if self.at_keyword("loc"):
                from tilegen.runtime.asm.attr_syntax import parse_location

                table[name] = parse_location(self, allow_deferred=False)
            else:
                table[name] = self.parse_attribute()
        else:
            table[name] = self.parse_type()

    def defer_location(self, alias: str, at: FileLineColLoc) -> object:
        """Return a placeholder for ``loc(#alias)`` (attr_syntax resolves immediately if known)."""
        return _DeferredLoc(alias, at)

    def _resolve_deferred(self) -> None:
        for target, d in self._deferred:
            loc = self.attr_aliases.get(d.alias)
            if loc is None:
                self._fail(f"operation location alias was never defined", d.at)
            if not isinstance(loc, Location):
                self._fail(f"expected location, but found '{d.alias}'", d.at)
            target.loc = loc
        self._deferred.clear()


_RE_SSA_NAME_CHAR = re.compile(r"[A-Za-z_0-9$.\-]")
#: ``name<...>`` with at most three levels of ``<>`` and no string, comment or line break
_RE_TYPE_SPAN = re.compile(
    r'!?[A-Za-z_][A-Za-z_0-9$.]*<(?:[^<>"/\n]++|<(?:[^<>"/\n]++|<[^<>"/\n]*+>)*+>)*+>'
)
#: distinct type spellings memoised per parser (beyond them, types parse as usual)
_TYPE_CACHE_SIZE = 1024

_OP_NAMES: dict = {}


def _op_name(opdef: OpDef) -> str:
    """``opdef.name``, one string object per op kind (not one per parsed op)."""
    name = _OP_NAMES.get(id(opdef))
    if name is None:
        name = _OP_NAMES[id(opdef)] = sys.intern(opdef.name)
    return name


def _int_value(text: str) -> int:
    return int(text, 16) if text.startswith(("0x", "0X")) else int(text)


def _custom_parser(name: str) -> Optional[Callable]:
    try:
        from tilegen.runtime.asm import custom_ops
    except ImportError:
        return None
    return getattr(custom_ops, "PARSERS", {}).get(name)


def is_deferred_loc(x) -> bool:
    """True for the placeholder :meth:`OpParser.parse_optional_location` returns for a
    ``loc(#alias)`` defined later in the file (resolved when the file ends)."""
    return isinstance(x, _DeferredLoc)


# (below the classes: these modules name OpParser only for annotations)
from tilegen.runtime.asm import format as _format  # noqa: E402
from tilegen.runtime.asm import type_syntax as _type_syntax  # noqa: E402
