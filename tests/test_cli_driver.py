"""tilegen.tools.driver: option parsing, --split-input-file, --verify-diagnostics, rendering.

These use a fake chunk processor, so they do not depend on the parser."""

from __future__ import annotations

import io

import pytest

from tilegen.runtime.attributes import FileLineColLoc, UnknownLoc
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticError
from tilegen.tools import driver


def _cl() -> driver.CommandLine:
    cl = driver.CommandLine("tool", "test tool")
    cl.option("o", dest="output", help="out", default="-")
    cl.flag("verify-diagnostics", dest="verify", help="v")
    cl.optional_value("split-input-file", dest="split", help="s", implicit="// -----")
    cl.option("pass-pipeline", dest="pipeline", help="p")
    return cl


def test_command_line_spellings():
    o = _cl().parse(["-verify-diagnostics", "--split-input-file", "in.mlir", "-o", "x"])
    assert (o["verify"], o["split"], o["input"], o["output"]) == (True, "// -----", "in.mlir", "x")
    o = _cl().parse(["--verify-diagnostics=false", "-o=y", "--pass-pipeline=a(b, c)"])
    assert (o["verify"], o["output"], o["pipeline"], o["input"]) == (False, "y", "a(b, c)", "-")
    assert _cl().parse(["-split-input-file=// ====="])["split"] == "// ====="


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-verify"], "Unknown command line argument '-verify'"),
        (["a", "b"], "Too many positional arguments"),
        (["-o"], "requires a value"),
        (["-verify-diagnostics=maybe"], "invalid value for boolean argument"),
    ],
)
def test_command_line_errors(argv, message):
    with pytest.raises(driver.UsageError, match=message):
        _cl().parse(argv)


TEXT = """first
// -----
second
third
// -----
// -----  not a marker
fourth"""


def test_split_keeps_original_line_numbers():
    chunks = driver.split_input(TEXT, True)
    assert [(c.first_line, c.last_line) for c in chunks] == [(1, 1), (3, 4), (6, 7)]
    assert chunks[1].text.split("\n")[2] == "second"  # line 3 of the file is line 3 here
    assert chunks[2].text.split("\n")[6] == "fourth"
    assert len(driver.split_input(TEXT, False)) == 1


ANNOTATED = """\
op_a  // expected-error {{same line}}
// expected-error @below {{below skips annotations}}
// expected-note @below {{note two lines down}}
op_b
op_c
// expected-warning @above {{above}}
// expected-remark @-3 {{minus three}}
// expected-error @+2 {{plus two}}

op_d
// expected-error-re @below {{value {{[0-9]+}} too big}}
op_e
// expected-error @unknown {{nowhere}}"""


def test_expectation_anchors():
    src = driver.Source("t.mlir", ANNOTATED)
    exp, errs = driver.parse_expectations(src, driver.split_input(ANNOTATED, False)[0])
    assert errs == []
    got = [(e.kind, e.line, e.text) for e in exp]
    assert got == [
        ("error", 1, "same line"),
        ("error", 4, "below skips annotations"),
        ("note", 4, "note two lines down"),
        ("warning", 5, "above"),
        ("remark", 4, "minus three"),
        ("error", 10, "plus two"),
        ("error", 12, "value {{[0-9]+}} too big"),
        ("error", 0, "nowhere"),
    ]
    assert exp[0].loc == FileLineColLoc("t.mlir", 1, 10)  # column of 'expected-'
    assert exp[6].matches("op 'x': value 123 too big") and not exp[6].matches("value x too big")
    assert exp[7].unknown_loc


def _verify(text: str, produced: list[Diagnostic]) -> list[str]:
    src = driver.Source("t.mlir", text)
    v = driver.DiagnosticVerifier(src, driver.split_input(text, False)[0])
    for d in produced:
        v.process(d)
    return [driver.render(f, src, echo=False) for f in v.failures()]


def _at(line: int, col: int = 1) -> FileLineColLoc:
    return FileLineColLoc("t.mlir", line, col)


def test_verify_all_matched_substring_and_notes():
    text = "x // expected-error {{bad}}\n// expected-note @below {{prior use}}\ny"
    err = Diagnostic("error", "'cuda_tile.x' op is bad here", _at(1, 3))
    err.attach_note("prior use here", _at(3, 1))
    assert _verify(text, [err]) == []


def test_verify_reports_mlir_messages():
    text = "x // expected-error {{wanted}}\ny"
    fails = _verify(text, [Diagnostic("error", "something else", _at(2, 4))])
    assert fails == [
        "t.mlir:2:4: error: unexpected error: something else",
        't.mlir:1:6: error: expected error "wanted" was not produced',
    ]


def test_verify_wrong_line_and_severity():
    text = "x // expected-error {{msg}}\ny"
    assert _verify(text, [Diagnostic("error", "msg", _at(2))]) == [
        "t.mlir:2:1: error: unexpected error: msg",
        't.mlir:1:6: error: expected error "msg" was not produced',
    ]
    assert _verify(text, [Diagnostic("warning", "msg", _at(1))])[0] == (
        "t.mlir:1:6: error: 'warning' diagnostic emitted when expecting a 'error'"
    )


def test_verify_unknown_location():
    text = "// expected-error @unknown {{lost}}"
    assert _verify(text, [Diagnostic("error", "lost it", UnknownLoc())]) == []
    assert _verify(text, [Diagnostic("error", "lost it", _at(1))])[0].startswith(
        "t.mlir:1:1: error: unexpected error"
    )


def _proc(text: str, engine) -> str | None:
    """Fake tool: fails on a line saying 'bad', crashes on 'crash', else echoes line count."""
    for i, line in enumerate(text.split("\n"), 1):
        if line.startswith("bad"):
            engine.error("bad line", FileLineColLoc("t.mlir", i, 1))
            return None
        if line.startswith("crash"):
            raise KeyError("boom")
        if line.startswith("raise"):
            raise DiagnosticError(
                Diagnostic("error", "parse error", FileLineColLoc("t.mlir", i, 2))
            )
    return f"ok {len(text.strip().splitlines())}\n"


def _run(text: str, split: bool, verify: bool = False) -> tuple[int, str, str]:
    src = driver.Source("t.mlir", text)
    marker = driver.SPLIT_MARKER if split else None
    results = driver.run_buffer(src, _proc, split=marker, verify=verify)
    out, err = io.StringIO(), io.StringIO()
    rc = driver.report(src, results, out, err, split=marker)
    return rc, out.getvalue(), err.getvalue()


def test_split_outputs_joined_and_errors_located():
    rc, out, err = _run("a\n// -----\nb\nbad here\n// -----\nc", split=True)
    assert rc == 1
    assert out == "ok 1\n// -----\n// -----\nok 1\n"
    assert err == "t.mlir:4:1: error: bad line\nbad here\n^\n"


def test_exceptions_become_located_internal_errors():
    rc, out, err = _run("a\n// -----\nx\ncrash", split=True)
    assert rc == 1 and "Traceback" not in err
    assert err.startswith("t.mlir:3:1: error: internal error: KeyError: 'boom'")
    rc, _, err = _run("x\nraise", split=False)
    assert rc == 1 and err.startswith("t.mlir:2:2: error: parse error\nraise\n ^")


def test_verify_mode_exit_codes():
    ok = "bad // expected-error {{bad line}}\n// -----\nfine"
    assert _run(ok, split=True, verify=True)[0] == 0
    rc, _, err = _run("bad\n// -----\nfine // expected-error {{nope}}", split=True, verify=True)
    assert rc == 1
    assert "t.mlir:1:1: error: unexpected error: bad line" in err
    assert 't.mlir:3:9: error: expected error "nope" was not produced' in err


def test_decode_rejects_binary_with_location():
    with pytest.raises(DiagnosticError) as ei:
        driver.decode_source("b.mlir", b"ok\nab\xff\xfe")
    assert (
        driver.render(ei.value.diag, None) == "b.mlir:2:3: error: invalid UTF-8 byte 0xff in source"
    )
    with pytest.raises(DiagnosticError) as ei:
        driver.decode_source("b.mlir", b"x\x00y")
    assert driver.render(ei.value.diag, None).startswith("b.mlir:1:2: error: unexpected NUL")
