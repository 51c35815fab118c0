"""``make demo`` keeps working: every stage runs and agrees (bytecode stages included)."""

from __future__ import annotations

from tilegen import demo


def test_demo_runs_clean(capsys):
    rc = demo.main()
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    assert "re-parsing the output prints identical text" in out
    assert "vec_add_invalid.mlir:25:15: error: use of value '%tile'" in out
    assert "every expected-* annotation matched" in out
    assert out.rstrip().endswith("demo OK")
