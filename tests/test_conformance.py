"""The conformance harness: classification of expected diagnostics, RUN-line handling, lit
plumbing, and a no-regression floor on NVIDIA's test/Dialect/CudaTile suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen import conformance
from tilegen.runtime.attributes import FileLineColLoc
from tilegen.tools import opt

ROOT = conformance.tests_root()
needs_shared = pytest.mark.skipif(
    ROOT is None, reason="../shared/conformance/cuda-tile/test is not on this machine"
)

#: Floors from measured numbers (08:25 UTC: 28 of 28 files, 833 of 833 expected-errors; one file
#: and four errors of slack for work in flight). Never lower them to hide a regression.
MIN_DIALECT_PASS = 27
MIN_DIALECT_ERRORS_HIT = 829
#: Bytecode suite, measured 09:17 UTC: 27 of 30 files pass (list_versions unsupported; two expect
#: a 13.3 build's "[13.1 - 13.3]" version range), 3 of 3 expected-errors. Never lower them.
MIN_BYTECODE_PASS = 27
MIN_BYTECODE_ERRORS_HIT = 3


def test_run_lines_join_continuations(tmp_path):
    p = tmp_path / "t.mlir"
    p.write_text(
        "// RUN: cuda-tile-opt %s -split-input-file \\\n"
        "// RUN:   -verify-diagnostics -Werr-hints\n"
        "// RUN: cuda-tile-opt %s | FileCheck %s\n"
    )
    assert conformance.run_lines(p) == [
        "cuda-tile-opt %s -split-input-file  -verify-diagnostics -Werr-hints",
        "cuda-tile-opt %s | FileCheck %s",
    ]
    assert conformance.verify_run_line(p) == [
        str(p),
        "-split-input-file",
        "-verify-diagnostics",
        "-Werr-hints",
    ]


def test_unsupported_reasons(monkeypatch):
    assert conformance.unsupported_reason("Dialect/CudaTile/ops.mlir") is None
    # a pass-gated test is unsupported exactly while tilegen-opt lacks the pass
    monkeypatch.setattr(conformance, "supported_passes", lambda: set())
    assert "fuse-fma" in conformance.unsupported_reason("Transforms/fuse-fma.mlir")
    monkeypatch.setattr(conformance, "supported_passes", lambda: {"fuse-fma"})
    assert conformance.unsupported_reason("Transforms/fuse-fma.mlir") is None


def test_check_diagnostics_classifies_every_expectation(tmp_path, monkeypatch):
    text = (
        "// RUN: cuda-tile-opt %s -verify-diagnostics -split-input-file\n"
        "// expected-error @below {{hit me}}\n"
        "line2\n"
        "// -----\n"
        "// expected-error @below {{right text}}\n"
        "line5\n"
        "// expected-error @below {{not emitted}}\n"
        "line7\n"
        "// expected-warning @below {{severity}}\n"
        "line9\n"
    )
    path = tmp_path / "x.mlir"
    path.write_text(text)
    produced = {
        3: ("error", "please hit me now"),
        6: ("error", "wrong text"),
        9: ("error", "severity"),
    }

    def fake(chunk_text, engine, opts):
        for i, line in enumerate(chunk_text.split("\n"), 1):
            if i in produced and line:
                engine.emit(produced[i][0], produced[i][1], FileLineColLoc(str(path), i, 1))
        if "line5" in chunk_text:
            engine.error("stray", FileLineColLoc(str(path), 8, 1))
        return None

    monkeypatch.setattr(opt, "process_chunk", fake)
    rep = conformance.check_diagnostics(path)
    got = [(o.line, o.kind, o.status, o.produced) for o in rep.outcomes]
    assert got == [
        (3, "error", "hit", []),
        (6, "error", "wrong-text", ["wrong text"]),
        (8, "error", "wrong-text", ["stray"]),
        (10, "warning", "missed", []),
    ]
    # the error on line 9 (expecting a warning on line 10) and the others are unexpected
    assert sorted(u[:2] for u in rep.unexpected) == [(6, "error"), (8, "error"), (9, "error")]
    assert rep.count("error", "hit") == 1 and rep.count("error") == 3
    assert (rep.failures, rep.chunks) == (1, 2)


@needs_shared
def test_expectation_counts_match_the_reference():
    total: dict[str, int] = {}
    for p in sorted((ROOT / conformance.DIALECT_DIR).glob("*.mlir")):
        for k, n in conformance.count_expectations(p).items():
            total[k] = total.get(k, 0) + n
    assert total == {"error": 833, "note": 210, "warning": 16}


@needs_shared
def test_dialect_suite_does_not_regress():
    rows, _ = conformance.evaluate([conformance.DIALECT_DIR], fast=True)
    t = conformance.totals(rows)
    assert t["files"] == 28 and t["errors_expected"] == 833
    assert all(r.reason for r in rows if r.status == "UNSUPPORTED")
    assert t["pass"] >= MIN_DIALECT_PASS, t
    assert t["errors_hit"] >= MIN_DIALECT_ERRORS_HIT, t
    md = conformance.render_markdown(rows)
    assert f"**{t['pass']} of 28**" in md and md.count("| `Dialect/CudaTile/") == 28


@needs_shared
def test_bytecode_suite_does_not_regress():
    rows, _ = conformance.evaluate(["Bytecode"], fast=True)
    t = conformance.totals(rows, "Bytecode")
    assert t["files"] == 30 and t["errors_expected"] == 3
    assert all(r.reason for r in rows if r.status == "UNSUPPORTED")
    assert t["pass"] >= MIN_BYTECODE_PASS, t
    assert t["errors_hit"] >= MIN_BYTECODE_ERRORS_HIT, t


@needs_shared
def test_in_process_verdict_matches_lit():
    rels = ["Dialect/CudaTile/permute_invalid.mlir", "Dialect/CudaTile/get_shape_invalid.mlir"]
    lit = conformance.run_lit(rels)
    for rel in rels:
        assert conformance.verify_only(ROOT / rel)
        rep = conformance.check_diagnostics(ROOT / rel)
        assert lit[rel][0] == ("PASS" if rep.failures == 0 else "FAIL"), lit[rel][1][-2000:]


REPO = Path(__file__).resolve().parent.parent


def _py(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *cmd], capture_output=True, text=True, **kw)


def test_portable_not():
    not_script = str(REPO / "conformance" / "bin" / "not")
    assert _py([not_script, sys.executable, "-c", "raise SystemExit(3)"]).returncode == 0
    assert _py([not_script, sys.executable, "-c", "pass"]).returncode == 1


def test_round_trip_script(tmp_path):
    script = str(REPO / "conformance" / "round_trip_test.py")
    example = str(REPO / "examples" / "vec_add.mlir")
    proc = _py([script, example, str(tmp_path / "rt")])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "rt.out.tilebc").read_bytes()[:8] == b"\x7fTileIR\x00"
    # a reference printer that disagrees must make the script fail and show the diff
    fake = tmp_path / "fake-opt"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nout = sys.argv[sys.argv.index('-o') + 1]\n"
        "open(out, 'w').write('cuda_tile.module @other {\\n}\\n')\n"
    )
    fake.chmod(0o755)
    proc = _py(
        [script, example, str(tmp_path / "rt2")], env=dict(os.environ, TILEGEN_OPT=str(fake))
    )
    assert proc.returncode == 1 and "@other" in proc.stdout, proc.stdout + proc.stderr


@needs_shared
def test_harness_fails_mutated_tests(tmp_path, monkeypatch):
    """Negative control: the same tests with one expectation changed must FAIL under lit."""
    dst = tmp_path / "test" / conformance.DIALECT_DIR
    dst.mkdir(parents=True)
    src = ROOT / conformance.DIALECT_DIR
    types = (src / "types.mlir").read_text().replace("CHECK-SAME: ptr<i1>", "CHECK-SAME: ptr<i2>")
    (dst / "types.mlir").write_text(types)
    permute = (src / "permute_invalid.mlir").read_text()
    (dst / "permute_invalid.mlir").write_text(
        permute.replace("have same rank}}", "have same ranks}}")
    )
    (dst / "ok.mlir").write_text((src / "permute_invalid.mlir").read_text())
    monkeypatch.setenv("TILEGEN_CONFORMANCE_TESTS", str(tmp_path / "test"))
    rels = [
        f"{conformance.DIALECT_DIR}/{n}" for n in ("types.mlir", "permute_invalid.mlir", "ok.mlir")
    ]
    got = {rel: status for rel, (status, _) in conformance.run_lit(rels).items()}
    assert got == {rels[0]: "FAIL", rels[1]: "FAIL", rels[2]: "PASS"}
    rep = conformance.check_diagnostics(dst / "permute_invalid.mlir")
    assert [o.status for o in rep.outcomes].count("wrong-text") == 1 and len(rep.unexpected) == 1


@needs_shared
def test_translate_verify_files_are_counted_via_the_process():
    rel = "Bytecode/invalid_not_self_contained.mlir"
    rep = conformance.check_diagnostics(ROOT / rel)
    assert (rep.count("error"), rep.count("remark")) == (2, 2)
    lit = conformance.run_lit([rel])
    assert lit[rel][0] == ("PASS" if rep.failures == 0 else "FAIL")


def _llvm_filecheck() -> bool:
    import sysconfig

    return os.access(
        os.path.join(sysconfig.get_paths()["purelib"], "llvm", "bin", "FileCheck"), os.X_OK
    )


@needs_shared
def test_transforms_suite_passes_under_llvm_filecheck():
    """NVIDIA's Transforms tests (canonicalize pipeline pieces, fuse-fma, loop_split, debuginfo)
    under lit; with LLVM's FileCheck (the `mlir` extra) all three pass -- the Python port
    mis-scopes one CHECK-NOT in loop_split.mlir."""
    rels = [
        "Transforms/fuse-fma.mlir",
        "Transforms/loop_split.mlir",
        "Transforms/synthesize-debuginfo-scopes.mlir",
    ]
    got = conformance.run_lit(rels)
    want = rels if _llvm_filecheck() else rels[::2]
    assert [r for r in rels if got.get(r, ("?",))[0] == "PASS"] == want, {
        r: got.get(r, ("missing",))[0] for r in rels
    }
