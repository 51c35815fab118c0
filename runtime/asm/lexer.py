"""MLIR tokens with file/line/col, produced on demand from the source text."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right as _bisect_right

from tilegen.runtime.attributes import FileLineColLoc
from tilegen.runtime.limits import integer_literal_error

# Token kinds
EOF_ = "eof"
BARE = "bare_identifier"
PERCENT = "percent_identifier"  # %x, %x#3 (the #N suffix is a separate token)
CARET = "caret_identifier"  # ^bb0
AT = "at_identifier"  # @sym, @"quoted"
HASH = "hash_identifier"  # #alias, #dialect.x
EXCL = "exclamation_identifier"  # !alias, !dialect.x
STRING = "string"
INTEGER = "integer"
FLOAT = "float"
PUNCT = "punct"
ERROR = "error"

_PUNCTS = (
    "->",
    "...",
    "::",
    ",",
    ":",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    "{",
    "}",
    "=",
    "?",
    "*",
    "+",
    "-",
    "|",
)

_PUNCT_BY_CHAR: dict[str, tuple[str, ...]] = {}
for _p in _PUNCTS:  # longest spellings first for each leading character
    _PUNCT_BY_CHAR.setdefault(_p[0], ())
    _PUNCT_BY_CHAR[_p[0]] = tuple(sorted(_PUNCT_BY_CHAR[_p[0]] + (_p,), key=len, reverse=True))
_RE_DIGITS = re.compile(r"[0-9]+")
_RE_NEWLINE = re.compile("\n")
#: One match per well-formed token (group name = token kind); anything else takes the slow path.
#: (Strings are matched as ``"[^"\\\n]*(?:\\.[^"\\\n]*)*"``: a repeated single-character class
#: costs ``re`` no backtracking state per character, where ``(?:a|b)*`` costs hundreds of bytes.)
_RE_FAST = re.compile(
    r"(?>(?:[ \t\r\n]+|//[^\n]*)*)(?:"  # atomic: no backtracking into whitespace
    r"(?P<bare_identifier>[A-Za-z_][A-Za-z_0-9$.]*)"
    r"|(?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<integer>0x[0-9A-Fa-f]+|[0-9]+)"
    r"|(?P<percent_identifier>%[A-Za-z_0-9$.\-]+)"
    r"|(?P<caret_identifier>\^[A-Za-z_0-9$.\-]+)"
    r"|(?P<hash_identifier>\#(?:[A-Za-z_][A-Za-z_0-9$.]*|[0-9]+))"
    r"|(?P<exclamation_identifier>![A-Za-z_][A-Za-z_0-9$.]*)"
    r"|(?P<at_identifier>@(?:[A-Za-z_][A-Za-z_0-9$.]*|\"[^\"\\\n]*(?:\\[^\n][^\"\\\n]*)*\"))"
    r"|(?P<string>\"[^\"\\\n]*(?:\\[^\n][^\"\\\n]*)*\")"
    r"|(?P<punct>->|\.\.\.|::|[,:()\[\]<>{}=?*+\-|])"
    r")"
)
_RE_FAST_MATCH = _RE_FAST.match
#: (the named groups are _RE_FAST's only captures: ``lastgroup`` is the token kind)
_RE_BARE = re.compile(r"[A-Za-z_][A-Za-z_0-9$.]*")
_RE_SUFFIX = re.compile(r"[A-Za-z_0-9$.\-]+")
_RE_NUM = re.compile(r"0x[0-9A-Fa-f]+|[0-9]+(\.[0-9]*([eE][+-]?[0-9]+)?)?")
_RE_WS = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)+")


class Token:
    """One token: ``kind``, exact source spelling ``text``, offset ``pos`` into the source.

    A plain slotted class rather than a frozen dataclass: the lexer makes one per token and a
    frozen dataclass's ``__init__`` (``object.__setattr__`` per field) is ~4x slower."""

    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind = kind
        self.text = text  # exact source spelling
        self.pos = pos  # offset into the source

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Token:
            return NotImplemented
        return self.kind == other.kind and self.text == other.text and self.pos == other.pos

    def __hash__(self) -> int:
        return hash((self.kind, self.text, self.pos))

    def __repr__(self) -> str:
        return f"Token(kind={self.kind!r}, text={self.text!r}, pos={self.pos!r})"

    @property
    def spelling(self) -> str:
        """Identifier without its sigil (``%x`` -> ``x``), string without quotes (undecoded)."""
        if self.kind in (PERCENT, CARET, HASH, EXCL):
            return self.text[1:]
        if self.kind == AT:
            return self.text[1:]
        return self.text

    def is_punct(self, p: str) -> bool:
        return self.kind == PUNCT and self.text == p

    def is_keyword(self, kw: str | None = None) -> bool:
        return self.kind == BARE and (kw is None or self.text == kw)


class Lexer:
    """Turns source text into tokens; ``loc(pos)`` gives a FileLineColLoc for any offset."""

    def __init__(self, text: str, filename: str = "<stdin>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        #: offsets of the line starts up to ``_scanned`` (found as locations are asked for: an
        #: input refused at its first token does not pay for its line table)
        self._line_starts = array("q", [0])
        self._scanned = 0
        self._locs: dict[int, FileLineColLoc] = {}

    def _scan_lines(self, pos: int) -> None:
        """Extend the line table past ``pos`` (in steps of at least 64 KiB)."""
        text, start = self.text, self._scanned
        end = min(len(text), max(pos + 1, start + (1 << 16)))
        self._line_starts.extend(m.end() for m in _RE_NEWLINE.finditer(text, start, end))
        self._scanned = end

    def loc(self, pos: int) -> FileLineColLoc:
        loc = self._locs.get(pos)  # parsers ask for the same token's location repeatedly
        if loc is None:
            if pos >= self._scanned and self._scanned < len(self.text):
                self._scan_lines(pos)
            starts = self._line_starts
            i = _bisect_right(starts, pos) - 1
            if len(self._locs) >= 64:  # recent tokens only: memory stays proportional to the IR
                self._locs.clear()
            loc = self._locs[pos] = FileLineColLoc(self.filename, i + 1, pos - starts[i] + 1)
        return loc

    def reset(self, pos: int) -> None:
        self.pos = pos

    def next(self) -> Token:
        """The next token (an ``error`` token carries its message in ``text``)."""
        text = self.text
        m = _RE_FAST_MATCH(text, self.pos)
        if m is not None:
            kind = m.lastgroup
            if kind is not None:
                start, end = m.span(kind)
                self.pos = end
                if kind == INTEGER or kind == HASH:  # bounded (runtime/limits.py)
                    return _checked_number(Token(kind, text[start:end], start))
                return Token(kind, text[start:end], start)
        tok = self._next_slow()
        return _checked_number(tok) if tok.kind in (INTEGER, HASH) else tok

    def _next_slow(self) -> Token:
        """Token scanning with MLIR's error messages for malformed input."""
        text = self.text
        m = _RE_WS.match(text, self.pos)
        if m:
            self.pos = m.end()
        start = self.pos
        if start >= len(text):
            return Token(EOF_, "", len(text))
        c = text[start]
        if (c.isascii() and c.isalpha()) or c == "_":
            m = _RE_BARE.match(text, start)
            return self._tok(BARE, m.end())
        if "0" <= c <= "9":
            m = _RE_NUM.match(text, start)
            kind = FLOAT if "." in m.group(0) and not m.group(0).startswith("0x") else INTEGER
            return self._tok(kind, m.end())
        if c in "%^#!":
            kind = {"%": PERCENT, "^": CARET, "#": HASH, "!": EXCL}[c]
            if c == "%" or c == "^":
                m = _RE_SUFFIX.match(text, start + 1)
            else:
                m = _RE_BARE.match(text, start + 1) or _RE_DIGITS.match(text, start + 1)
            if not m:
                if c == "!" and text.startswith('!"', start):
                    return self._tok(ERROR, start + 1, "unexpected character")
                return self._tok(ERROR, start + 1, f"invalid {_SIGIL_WHAT[c]}")
            return self._tok(kind, m.end())
        if c == "@":
            if start + 1 < len(text) and text[start + 1] == '"':
                end = self._string_end(start + 1)
                if end < 0:
                    return self._tok(ERROR, len(text), "expected '\"' in string literal")
                return self._tok(AT, end)
            m = _RE_BARE.match(text, start + 1)
            if not m:
                return self._tok(
                    ERROR, start + 1, "@ identifier expected to start with letter or '_'"
                )
            return self._tok(AT, m.end())
        if c == '"':
            end = self._string_end(start)
            if end < 0:
                return self._tok(ERROR, len(text), "expected '\"' in string literal")
            return self._tok(STRING, end)
        for p in _PUNCT_BY_CHAR.get(c, ()):
            if text.startswith(p, start):
                return self._tok(PUNCT, start + len(p))
        return self._tok(ERROR, start + 1, "unexpected character")

    def _tok(self, kind: str, end: int, message: str | None = None) -> Token:
        tok = Token(kind, message if kind == ERROR else self.text[self.pos : end], self.pos)
        self.pos = end
        return tok

    def _string_end(self, start: int) -> int:
        """Offset after the closing quote of the string starting at ``start``; -1 if unterminated."""
        text, i, n = self.text, start + 1, len(self.text)
        while i < n:
            c = text[i]
            if c == '"':
                return i + 1
            if c == "\n":
                return -1
            if c == "\\":
                i += 2
                continue
            i += 1
        return -1


def _checked_number(tok: Token) -> Token:
    """``tok``, or an error token when it is an integer literal (``123``, ``0x1F``, the ``#N``
    of a result number) over :data:`~tilegen.runtime.limits.MAX_INTEGER_BITS`."""
    text = tok.text if tok.kind == INTEGER else tok.text[1:]
    if len(text) <= 64 or (tok.kind == HASH and not text.isdigit()):
        return tok
    message = integer_literal_error(text)
    return tok if message is None else Token(ERROR, message, tok.pos)


_SIGIL_WHAT = {"%": "SSA name", "^": "block name", "#": "attribute name", "!": "type identifier"}


_RE_ESCAPE = re.compile(rb'\\(["\\nt]|[0-9A-Fa-f]{2})?')
_SIMPLE_ESCAPES = {b'"': b'"', b"\\": b"\\", b"n": b"\n", b"t": b"\t"}


def _unescape(m: "re.Match[bytes]") -> bytes:
    e = m.group(1)
    if e is None:  # a backslash before anything else stays as written
        return b"\\"
    return _SIMPLE_ESCAPES.get(e) or bytes([int(e, 16)])


def decode_string(spelling: str) -> str:
    """Decode a quoted MLIR string literal (``"a\\n\\22"``) into its value."""
    body = spelling[1:-1]
    if "\\" not in body:
        return body
    raw = _RE_ESCAPE.sub(_unescape, body.encode("utf-8", errors="surrogateescape"))
    return raw.decode("utf-8", errors="surrogateescape")


_RE_UNPRINTABLE = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")


def _escape_byte(m: "re.Match[bytes]") -> bytes:
    b = m.group(0)
    return b"\\\\" if b == b"\\" else b"\\%02X" % b[0]


def encode_string(value: str) -> str:
    """Quote ``value`` as llvm::printEscapedString does (printable ASCII kept, ``\\\\`` for a
    backslash, ``\\XX`` hex for ``"`` and everything else)."""
    raw = value.encode("utf-8", errors="surrogateescape")
    if _RE_UNPRINTABLE.search(raw) is None:
        return '"' + value + '"'
    return '"' + _RE_UNPRINTABLE.sub(_escape_byte, raw).decode("ascii") + '"'
