"""Debug-info verification of functions and modules (types_attrs.md sec. 4) on built IR."""

from __future__ import annotations

from tilegen.runtime.attributes import (
    CallSiteLoc,
    DenseElementsAttr,
    DICompileUnitAttr,
    DIFileAttr,
    DILexicalBlockAttr,
    DILocAttr,
    DISubprogramAttr,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    StringAttr,
    TypeAttr,
)
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.types import F32, FunctionType, TileType
from tilegen.runtime.verify import verify_module

FILE = DIFileAttr("foo.py", "/tmp/")
CU = DICompileUnitAttr(FILE)
SP = DISubprogramAttr(FILE, 1, "test", "test", CU, 2)
OTHER = DISubprogramAttr(FILE, 13, "invalid", "invalid", CU, 14)
BLOCK = DILexicalBlockAttr(SP, FILE, 3, 4)
SRC = FileLineColLoc("/tmp/foo.py", 7, 8)


def di(scope, line=7):
    return DILocAttr(FileLineColLoc("/tmp/foo.py", line, 8), scope)


def entry(name="test", loc=None, ret_loc=None):
    block = Block()
    block.append(Operation("cuda_tile.return", loc=ret_loc or SRC))
    attrs = {"sym_name": StringAttr(name), "function_type": TypeAttr(FunctionType((), ()))}
    return Operation("cuda_tile.entry", attributes=attrs, regions=[Region([block])], loc=loc or SRC)


def module(*ops):
    block = Block()
    for o in ops:
        block.append(o)
    return Operation(
        "cuda_tile.module",
        attributes={"sym_name": StringAttr("kernels")},
        regions=[Region([block])],
        loc=SRC,
    )


def messages(m) -> list[str]:
    diag = DiagnosticEngine()
    verify_module(m, diag)
    return [d.message for d in diag.diagnostics]


def test_function_scope_must_be_subprogram():
    for loc in (di(BLOCK), NameLoc("entry_loc", di(BLOCK)), FusedLoc((SRC, di(BLOCK)))):
        (msg,) = messages(module(entry(loc=loc)))
        assert msg.startswith("'cuda_tile.entry' op invalid function debug info scope: ")
        assert msg.endswith("Function location must have cuda_tile.di_subprogram debug info scope.")


def test_function_name_must_match_linkage_name():
    (msg,) = messages(module(entry(name="foo", loc=di(SP))))
    assert 'Function name "foo" does not match subprogram scope linkage name "test".' in msg


def test_callsite_function_location():
    (msg,) = messages(module(entry(loc=CallSiteLoc(SRC, SRC))))
    assert msg.startswith("'cuda_tile.entry' op invalid function debug info location: ")
    assert msg.endswith("Function location must not be a CallSiteLoc.")


def test_op_scopes_against_function_scope():
    (msg,) = messages(module(entry(loc=SRC, ret_loc=di(SP, 9))))
    assert msg.startswith("'cuda_tile.return' op invalid operation debug info scope: ")
    assert msg.endswith(
        "Operation has debug info scope, but function debug info scope is undefined."
    )
    (msg,) = messages(module(entry(loc=di(SP), ret_loc=di(OTHER, 9))))
    assert msg.startswith("invalid operation debug info scope: ")
    assert "Operation debug info scope does not match function debug info scope: " in msg
    # a lexical block resolves to its subprogram, which matches
    assert messages(module(entry(loc=di(SP), ret_loc=di(BLOCK, 9)))) == []


def test_globals_must_not_have_scope():
    g = Operation(
        "cuda_tile.global",
        attributes={
            "sym_name": StringAttr("g"),
            "value": DenseElementsAttr(TileType((2,), F32), (0.0,)),
        },
        loc=di(SP),
    )
    (msg,) = messages(module(g, entry()))
    assert msg.startswith("'cuda_tile.global' op invalid operation debug info scope: ")
    assert msg.endswith("Global variables must not have scope.")
