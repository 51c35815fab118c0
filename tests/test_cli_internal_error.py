"""A compiler bug in any ``tilegen`` subcommand is one located line and exit 70, never a Python
traceback; ``TILEGEN_TRACEBACK=1`` re-raises for debugging."""

from __future__ import annotations

import pytest

import tilegen.commands.compile as compile_cmd
from tilegen.cli import main


def test_internal_error_is_one_line(monkeypatch, capsys):
    def boom(args):
        raise KeyError("no such handler")

    monkeypatch.setattr(compile_cmd, "run", boom)
    monkeypatch.delenv("TILEGEN_TRACEBACK", raising=False)
    assert main(["compile", "examples/vec_add.mlir", "--gpu-name=sm_90"]) == 70
    err = capsys.readouterr().err
    assert err.startswith("tilegen compile: internal compiler error: KeyError: 'no such handler'")
    assert "Traceback" not in err and err.count("\n") == 1


def test_traceback_on_request(monkeypatch):
    def boom(args):
        raise KeyError("x")

    monkeypatch.setattr(compile_cmd, "run", boom)
    monkeypatch.setenv("TILEGEN_TRACEBACK", "1")
    with pytest.raises(KeyError):
        main(["compile", "examples/vec_add.mlir", "--gpu-name=sm_90"])
