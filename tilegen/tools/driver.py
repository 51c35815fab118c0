"""Plumbing shared by ``tilegen-opt`` and ``tilegen-translate``, with MLIR's tool semantics.

* :class:`CommandLine`: LLVM ``cl``-style options (``-flag`` and ``--flag``, ``-opt=value`` or
  ``-opt value``, boolean ``-flag=false``), one positional input (``-`` is stdin).
* :func:`split_input`: ``--split-input-file`` chunks, padded so locations keep the original line.
* :class:`DiagnosticVerifier`: ``--verify-diagnostics`` (``expected-error @below {{...}}``).
* :func:`run_buffer` / :func:`run_tool`: process every chunk, print or verify diagnostics, join
  outputs with ``// -----`` and turn any Python exception into a located ``internal error``.
"""

from __future__ import annotations

import re
import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional, TextIO

from tilegen.runtime.attributes import FileLineColLoc, UnknownLoc
from tilegen.runtime.diagnostics import (
    Diagnostic,
    DiagnosticEngine,
    DiagnosticError,
    file_line_col,
    format_location,
)

SPLIT_MARKER = "// -----"

# ---------------------------------------------------------------------------------------------
# Command line


class UsageError(Exception):
    """A command-line problem; the tool prints it and exits 1, as LLVM's cl does."""


@dataclass
class _Opt:
    names: tuple[str, ...]
    dest: str
    kind: str  # "flag" | "value" | "optional-value"
    help: str
    metavar: str = "VALUE"
    default: object = None


class CommandLine:
    """A tiny LLVM-``cl``-compatible option parser (no abbreviations, no option clustering)."""

    def __init__(self, prog: str, description: str):
        self.prog = prog
        self.description = description
        self._opts: list[_Opt] = []
        self._by_name: dict[str, _Opt] = {}

    def _add(self, opt: _Opt) -> None:
        self._opts.append(opt)
        for n in opt.names:
            self._by_name[n] = opt

    def flag(self, *names: str, dest: str, help: str) -> None:
        self._add(_Opt(names, dest, "flag", help, default=False))

    def option(self, *names: str, dest: str, help: str, metavar="VALUE", default=None) -> None:
        self._add(_Opt(names, dest, "value", help, metavar, default))

    def optional_value(self, *names: str, dest: str, help: str, implicit: str) -> None:
        """``-name`` alone sets ``implicit``; ``-name=v`` sets ``v`` (e.g. ``-split-input-file``)."""
        self._add(_Opt(names, dest, "optional-value", help, implicit, None))

    def help_text(self) -> str:
        lines = [
            f"OVERVIEW: {self.description}",
            "",
            f"USAGE: {self.prog} [options] <input file>",
            "",
        ]
        lines.append("OPTIONS:")
        for o in self._opts:
            spelled = ", ".join(
                "--" + n + ("=<%s>" % o.metavar if o.kind == "value" else "") for n in o.names
            )
            lines.append(f"  {spelled:<38} - {o.help}")
        lines.append(f"  {'--help':<38} - display available options")
        lines.append(f"  {'--version':<38} - display the version")
        return "\n".join(lines)

    def parse(self, argv: list[str]) -> dict:
        values: dict = {o.dest: o.default for o in self._opts}
        values["input"] = None
        values["help"] = False
        values["version"] = False
        i = 0
        positional_only = False
        while i < len(argv):
            arg = argv[i]
            i += 1
            if positional_only or arg == "-" or not arg.startswith("-"):
                if values["input"] is not None:
                    raise UsageError(
                        f"{self.prog}: Too many positional arguments specified!\n"
                        f"Can specify at most 1 positional arguments: See: {self.prog} --help"
                    )
                values["input"] = arg
                continue
            if arg == "--":
                positional_only = True
                continue
            body = arg[2:] if arg.startswith("--") else arg[1:]
            name, eq, val = body.partition("=")
            if name in ("help", "h"):
                values["help"] = True
                continue
            if name == "version":
                values["version"] = True
                continue
            opt = self._by_name.get(name)
            if opt is None:
                raise UsageError(
                    f"{self.prog}: Unknown command line argument '{arg}'.  "
                    f"Try: '{self.prog} --help'"
                )
            if opt.kind == "flag":
                if eq:
                    low = val.lower()
                    if low not in ("true", "false", "1", "0"):
                        raise UsageError(
                            f"{self.prog}: for the --{name} option: '{val}' is invalid value "
                            "for boolean argument! Try 0 or 1"
                        )
                    values[opt.dest] = low in ("true", "1")
                else:
                    values[opt.dest] = True
            elif opt.kind == "optional-value":
                values[opt.dest] = val if eq else opt.metavar
            else:
                if not eq:
                    if i >= len(argv):
                        raise UsageError(f"{self.prog}: for the --{name} option: requires a value!")
                    val = argv[i]
                    i += 1
                values[opt.dest] = val
        if values["input"] is None:
            values["input"] = "-"
        return values


# ---------------------------------------------------------------------------------------------
# Input


@dataclass
class Source:
    """One input buffer: the name used in locations and its full text."""

    name: str
    text: str

    def line(self, lineno: int) -> Optional[str]:
        if not hasattr(self, "_lines"):
            self._lines = self.text.split("\n")
        if 1 <= lineno <= len(self._lines):
            return self._lines[lineno - 1].rstrip("\r")
        return None


def read_input_bytes(path: str) -> bytes:
    """The raw input (``-`` is stdin); raises UsageError when the file cannot be opened."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"could not open input file '{path}': {e.strerror}") from None


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def decode_source(name: str, data: bytes) -> Source:
    """Decode UTF-8 text; a bad byte or a NUL becomes a located DiagnosticError (the driver's
    rule, runtime/driver.decode_text)."""
    from tilegen.runtime.driver import decode_text

    return Source(name, decode_text(name, data))


@dataclass
class Chunk:
    """A ``--split-input-file`` piece. ``text`` is padded with newlines so its line N is line N
    of the whole file; ``first_line``..``last_line`` are the lines it really owns."""

    text: str
    first_line: int
    last_line: int


def split_input(text: str, enabled: bool, marker: str = SPLIT_MARKER) -> list[Chunk]:
    lines = text.split("\n")
    if not enabled:
        return [Chunk(text, 1, len(lines))]
    chunks: list[Chunk] = []
    start = 0
    for idx, line in enumerate(lines + [None]):
        if line is None or line.rstrip("\r") == marker:
            body = "\n".join(lines[start:idx])
            chunks.append(Chunk("\n" * start + body, start + 1, idx))
            start = idx + 1
    return chunks


# ---------------------------------------------------------------------------------------------
# --verify-diagnostics

_EXPECTED_RE = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}$"
)


@dataclass
class Expected:
    """One ``expected-<kind>`` annotation."""

    kind: str
    line: int  # the line it applies to (0 for @unknown)
    text: str
    loc: FileLineColLoc  # where the annotation itself is written
    regex: Optional[re.Pattern] = None
    unknown_loc: bool = False
    matched: bool = False

    def matches(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


def _compile_expected_regex(text: str) -> re.Pattern:
    """MLIR's ``-re`` form: ``{{...}}`` pieces are regexes, the rest is literal."""
    out: list[str] = []
    rest = text
    while rest:
        start = rest.find("{{")
        if start < 0:
            out.append(re.escape(rest))
            break
        out.append(re.escape(rest[:start]))
        rest = rest[start + 2 :]
        end = rest.find("}}")
        if end < 0:
            raise ValueError("found start of regex with no end '}}'")
        out.append("(" + rest[:end] + ")")
        rest = rest[end + 2 :]
    return re.compile("".join(out))


def parse_expectations(source: Source, chunk: Chunk) -> tuple[list[Expected], list[Diagnostic]]:
    """All annotations in ``chunk`` with the line each applies to, plus syntax errors in them."""
    expected: list[Expected] = []
    errors: list[Diagnostic] = []
    below: list[Expected] = []
    last_plain = chunk.first_line - 1
    for lineno in range(chunk.first_line, chunk.last_line + 1):
        line = source.line(lineno) or ""
        m = _EXPECTED_RE.search(line.rstrip())
        if m is None:
            for e in below:
                e.line = lineno
            below.clear()
            last_plain = lineno
            continue
        loc = FileLineColLoc(source.name, lineno, m.start() + 1)
        e = Expected(m.group(1), lineno, m.group(5), loc)
        if m.group(2):
            try:
                e.regex = _compile_expected_regex(e.text)
            except (ValueError, re.error) as err:
                errors.append(Diagnostic("error", f"invalid regex: {err}", loc))
                continue
        anchor = m.group(4)
        if anchor:
            if anchor[0] in "+-":
                e.line += int(anchor) if anchor[0] == "+" else -int(anchor[1:])
            elif anchor == "unknown":
                e.unknown_loc = True
                e.line = 0
            elif anchor == "above":
                e.line = last_plain
            else:  # below: the next line that is not itself an annotation
                below.append(e)
                e.line = chunk.last_line + 1
        expected.append(e)
    return expected, errors


@dataclass
class ProducedCheck:
    """How one produced diagnostic fared against the expectations."""

    diag: Diagnostic
    matched: Optional[Expected] = None
    near_miss: Optional[Expected] = None  # same line and text, other severity


class DiagnosticVerifier:
    """MLIR's ``SourceMgrDiagnosticVerifierHandler`` for one chunk."""

    def __init__(self, source: Source, chunk: Chunk):
        self.source = source
        self.expected, self.errors = parse_expectations(source, chunk)
        self.checks: list[ProducedCheck] = []

    def process(self, diag: Diagnostic) -> None:
        """Match a produced diagnostic and each of its notes."""
        self._process_one(diag, diag.loc)
        for note in diag.notes:
            self._process_one(note, note.loc or diag.loc)

    def _process_one(self, diag: Diagnostic, loc) -> None:
        check = ProducedCheck(Diagnostic(diag.severity, diag.message, loc))
        self.checks.append(check)
        flc = file_line_col(loc)
        if flc is not None:
            if flc.file != self.source.name:
                return
            candidates = [e for e in self.expected if not e.unknown_loc and e.line == flc.line]
        elif loc is None or isinstance(loc, UnknownLoc):
            candidates = [e for e in self.expected if e.unknown_loc]
        else:
            return
        for e in candidates:
            if e.matches(diag.message):
                if e.kind == diag.severity:
                    e.matched = True
                    check.matched = e
                    return
                check.near_miss = e

    def failures(self) -> list[Diagnostic]:
        """The errors MLIR prints when expectations and produced diagnostics disagree."""
        out = list(self.errors)
        for c in self.checks:
            if c.matched is not None:
                continue
            if c.near_miss is not None:
                out.append(
                    Diagnostic(
                        "error",
                        f"'{c.diag.severity}' diagnostic emitted when expecting a "
                        f"'{c.near_miss.kind}'",
                        c.near_miss.loc,
                    )
                )
            else:
                out.append(
                    Diagnostic(
                        "error", f"unexpected {c.diag.severity}: {c.diag.message}", c.diag.loc
                    )
                )
        for e in self.expected:
            if not e.matched:
                out.append(
                    Diagnostic("error", f'expected {e.kind} "{e.text}" was not produced', e.loc)
                )
        return out


# ---------------------------------------------------------------------------------------------
# Rendering


def render(diag: Diagnostic, source: Optional[Source], echo: bool = True) -> str:
    """``FILE:LINE:COL: error: MSG`` plus, as MLIR does, the source line and a caret."""
    parts = [_render_one(diag, diag.loc, source, echo)]
    for n in diag.notes:
        parts.append(_render_one(n, n.loc or diag.loc, source, echo))
    return "\n".join(parts)


def _render_one(diag: Diagnostic, loc, source: Optional[Source], echo: bool) -> str:
    flc = file_line_col(loc)
    if flc is None and (loc is None or isinstance(loc, UnknownLoc)):
        head = (
            f"error: {diag.message}"
            if diag.severity == "error"
            else f"{diag.severity}: {diag.message}"
        )
        return head
    text = f"{format_location(loc)}: {diag.severity}: {diag.message}"
    if echo and source is not None and flc is not None and flc.file == source.name:
        src = source.line(flc.line)
        # as LLVM's SourceMgr: a line longer than 4096 characters is not echoed
        if src is not None and src.strip() and len(src) <= 4096:
            caret = "".join(c if c == "\t" else " " for c in src[: max(flc.col - 1, 0)]) + "^"
            text += f"\n{src}\n{caret}"
    return text


# ---------------------------------------------------------------------------------------------
# Running chunks

#: ``process(chunk_text, engine) -> printed output or None``; diagnostics go to ``engine``.
ChunkProcessor = Callable[[str, DiagnosticEngine], Optional[str]]


@dataclass
class ChunkResult:
    chunk: Chunk
    output: Optional[str]
    diagnostics: list[Diagnostic]
    verifier: Optional[DiagnosticVerifier] = None

    @property
    def ok(self) -> bool:
        if self.verifier is not None:
            return not self.verifier.failures()
        return self.output is not None and not any(d.severity == "error" for d in self.diagnostics)


def internal_error(exc: BaseException, name: str, line: int) -> Diagnostic:
    """A Python exception as a located diagnostic (the traceback's last frame as a note)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    d = Diagnostic(
        "error",
        f"internal error: {type(exc).__name__}: {exc}",
        FileLineColLoc(name, line, 1),
    )
    d.attach_note(f"raised at {where}; please report this as a tilegen bug")
    return d


def run_chunk(source: Source, chunk: Chunk, process: ChunkProcessor, verify: bool) -> ChunkResult:
    """Process one chunk, never raising: exceptions become diagnostics."""
    engine = DiagnosticEngine()
    output: Optional[str] = None
    try:
        output = process(chunk.text, engine)
    except DiagnosticError as e:
        engine.diagnostics.extend(e.preceding)
        engine.diagnostics.append(e.diag)
    except RecursionError as e:
        engine.diagnostics.append(
            Diagnostic(
                "error",
                f"input nests too deeply to process ({e})",
                FileLineColLoc(source.name, chunk.first_line, 1),
            )
        )
    except Exception as e:  # noqa: BLE001 - never show a traceback to the user
        engine.diagnostics.append(internal_error(e, source.name, chunk.first_line))
    if any(d.severity == "error" for d in engine.diagnostics):
        output = None
    result = ChunkResult(chunk, output, list(engine.diagnostics))
    if verify:
        result.verifier = DiagnosticVerifier(source, chunk)
        for d in result.diagnostics:
            result.verifier.process(d)
    return result


def run_buffer(
    source: Source,
    process: ChunkProcessor,
    *,
    split: Optional[str] = None,
    verify: bool = False,
) -> list[ChunkResult]:
    """Run ``process`` over the input (every chunk when ``split`` is the marker)."""
    chunks = split_input(source.text, split is not None, split or SPLIT_MARKER)
    return [run_chunk(source, c, process, verify) for c in chunks]


def report(
    source: Source,
    results: list[ChunkResult],
    out: TextIO,
    err: TextIO,
    *,
    split: Optional[str] = None,
    output_marker: str = SPLIT_MARKER,
) -> int:
    """Write outputs and diagnostics as MLIR tools do; return the exit code."""
    status = 0
    pieces: list[str] = []
    for r in results:
        if r.verifier is not None:
            for f in r.verifier.failures():
                print(render(f, source), file=err)
        else:
            for d in r.diagnostics:
                print(render(d, source), file=err)
        if not r.ok:
            status = 1
        pieces.append(r.output or "")
    if split is not None:
        out.write((output_marker + "\n").join(pieces))
    else:
        out.write(pieces[0] if pieces else "")
    return status


def find_tool(name: str) -> Optional[str]:
    """An executable next to this Python (the venv), in an installed NVIDIA wheel
    (``site-packages/nvidia/*/bin``, where ``tileiras``/``tileirdisasm`` live), or on PATH."""
    import glob
    import os
    import shutil

    local = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(local):
        return local
    for site in sys.path:
        hits = sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", name)))
        if hits:
            return hits[0]
    return shutil.which(name)


def write_output(path: Optional[str], text: "str | list[str]") -> None:
    """Write ``text`` (or its pieces, one by one: no joined copy) to ``path`` or stdout."""
    pieces = [text] if isinstance(text, str) else text
    if path is None or path == "-":
        for piece in pieces:
            sys.stdout.write(piece)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            for piece in pieces:
                f.write(piece)
    except OSError as e:
        raise UsageError(f"could not open output file '{path}': {e.strerror}") from None


def _tilegen_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilegen")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "unknown"


def run_tool(
    prog: str,
    cl: CommandLine,
    argv: Optional[list[str]],
    body: Callable[[dict], int],
) -> int:
    """Parse options, call ``body``, map usage errors and stray exceptions to exit code 1."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = cl.parse(argv)
        if opts["help"]:
            print(cl.help_text())
            return 0
        if opts["version"]:
            print(f"{prog} (tilegen {_tilegen_version()}), compatible with cuda-tile's tools")
            return 0
        from tilegen.runtime.limits import deep_stack

        return deep_stack(body, opts)  # deeply nested IR must not meet Python's limits
    except UsageError as e:
        print(str(e) if str(e).startswith(prog) else f"{prog}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # noqa: BLE001
        d = internal_error(e, "<command line>", 0)
        print(render(d, None), file=sys.stderr)
        return 1
