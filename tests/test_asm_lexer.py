"""Lexer: token kinds, exact spellings, locations, string escapes, lexical errors."""

from __future__ import annotations

import pytest

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.asm import parse_module
from tilegen.runtime.diagnostics import DiagnosticError


def tokens(text: str) -> list[tuple[str, str]]:
    lexer = lx.Lexer(text, "t.mlir")
    out = []
    while True:
        tok = lexer.next()
        if tok.kind == lx.EOF_:
            return out
        out.append((tok.kind, tok.text))


def test_identifiers_and_sigils():
    toks = tokens(
        'cuda_tile.testing$func %x#2 %arg0 ^bb1 @sym @"q s" #loc3 #cuda_tile.div_by !cuda_tile.tile'
    )
    assert toks == [
        (lx.BARE, "cuda_tile.testing$func"),
        (lx.PERCENT, "%x"),
        (lx.HASH, "#2"),
        (lx.PERCENT, "%arg0"),
        (lx.CARET, "^bb1"),
        (lx.AT, "@sym"),
        (lx.AT, '@"q s"'),
        (lx.HASH, "#loc3"),
        (lx.HASH, "#cuda_tile.div_by"),
        (lx.EXCL, "!cuda_tile.tile"),
    ]


def test_numbers_punctuation_and_comments():
    toks = tokens("42 0x7F800000 1.5e+03 2. -> ... :: // a comment\n-1")
    assert toks == [
        (lx.INTEGER, "42"),
        (lx.INTEGER, "0x7F800000"),
        (lx.FLOAT, "1.5e+03"),
        (lx.FLOAT, "2."),
        (lx.PUNCT, "->"),
        (lx.PUNCT, "..."),
        (lx.PUNCT, "::"),
        (lx.PUNCT, "-"),
        (lx.INTEGER, "1"),
    ]


def test_locations_are_one_based():
    lexer = lx.Lexer("a\n  bc", "f.mlir")
    lexer.next()
    tok = lexer.next()
    loc = lexer.loc(tok.pos)
    assert (loc.file, loc.line, loc.col) == ("f.mlir", 2, 3)


@pytest.mark.parametrize(
    "value",
    ["plain", 'quote " inside', "back\\slash", "new\nline\ttab", "caf\u00e9", "\x00\x7f"],
)
def test_string_escapes_round_trip(value):
    spelled = lx.encode_string(value)
    assert lx.decode_string(spelled) == value
    assert "\n" not in spelled


def test_string_escapes_match_mlir_printer():
    assert lx.encode_string('a"b\n') == '"a\\22b\\0A"'
    assert lx.encode_string("a\\b") == '"a\\\\b"'
    assert lx.decode_string('"x\\n\\t\\22"') == 'x\n\t"'


@pytest.mark.parametrize(
    "text,line,col,message",
    [
        ('"a"() {s = "abc} : () -> ()', 1, 12, "expected '\"' in string literal"),
        ("\n  \x01", 2, 3, "unexpected character"),
        ("\n\xff", 2, 1, "unexpected character"),
        ("%", 1, 1, "invalid SSA name"),
    ],
)
def test_lexical_errors_are_located(text, line, col, message):
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "t.mlir", allow_unregistered=True)
    diag = info.value.diag
    assert (diag.loc.line, diag.loc.col) == (line, col)
    assert diag.message == message
