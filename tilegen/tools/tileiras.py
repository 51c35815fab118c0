"""``tilegen-tileiras``: tilegen behind NVIDIA ``tileiras``'s command line.

``tilegen-tileiras --gpu-name=sm_90 [-O3] [--lineinfo] kernel.tileirbc -o kernel.cubin``. The
options, their spellings (LLVM ``cl`` style: one or two dashes, ``--opt=value`` or ``--opt
value``, ``-O3`` prefix form) and the exit codes follow the real tool (CUDA 13.5):

====  ==============================================================================
 1    bad command line (unknown option, bad value, no/too many inputs), unreadable input
 2    missing or unsupported --gpu-name, invalid -O, -g above -O0, unwritable output,
      an option tileiras has that tilegen deliberately refuses (--preview, -l,
      --apply-controls)
 3    the input is not Tile IR (bad or truncated bytecode, unparsable text) or does not verify
 5    a valid module tilegen cannot compile (unsupported op, ptxas failure, internal error)
====  ==============================================================================

Differences from tileiras are deliberate and listed in docs/tileiras_shim.md (MLIR text input is
accepted; remarks are accepted but none are produced; --lineinfo, -g and --sanitize=memcheck are
described in docs/debugging.md).
Set ``TILEGEN_SHIM_LOG=FILE`` to append one JSON line per invocation (argv, exit code, seconds).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional

EXIT_USAGE, EXIT_CONFIG, EXIT_INPUT, EXIT_COMPILE = 1, 2, 3, 5  # mirrored in tilegen.api
DEFAULT_OUTPUT = "elf.o"  # tileiras's default when -o is absent

from tilegen.runtime.targets import GPU_NAMES, TARGET_NAMES  # noqa: E402

REMARK_CATEGORIES = ("none", "all", "memory", "tensorcore")

#: canonical option -> (aliases, takes a value, allowed values or None, help)
OPTIONS: dict[str, tuple[tuple[str, ...], bool, Optional[tuple[str, ...]], str]] = {
    "help": (("help-list", "help-hidden", "help-list-hidden"), False, None, "display options"),
    "version": ((), False, None, "display the version of this program"),
    "list-versions": ((), False, None, "list all supported bytecode versions and exit"),
    "gpu-name": (("arch",), True, TARGET_NAMES, "name of the NVIDIA GPU to generate code for"),
    "opt-level": (("O",), True, None, "optimization level 0-3 (default 3)"),
    "output-file": (("o",), True, None, "name of the output file (default elf.o)"),
    "lineinfo": ((), False, None, ".file/.loc line information from the input's locations"),
    "device-debug": (("g",), False, None, "debug information (DWARF); needs -O0, as tileiras"),
    "host-arch": ((), True, ("x86_64", "aarch64"), "accepted and ignored (no host code)"),
    "host-os": ((), True, ("linux", "windows"), "accepted and ignored (no host code)"),
    "remark-format": ((), True, ("command-line", "yaml"), "accepted; tilegen has no remarks"),
    "remarks": ((), True, REMARK_CATEGORIES, "accepted; tilegen has no remarks"),
    "remarks-analysis": ((), True, REMARK_CATEGORIES, "accepted; tilegen has no remarks"),
    "remarks-failed": ((), True, REMARK_CATEGORIES, "accepted; tilegen has no remarks"),
    "remarks-missed": ((), True, REMARK_CATEGORIES, "accepted; tilegen has no remarks"),
    "remarks-passed": ((), True, REMARK_CATEGORIES, "accepted; tilegen has no remarks"),
    "remarks-output-file": ((), True, None, "YAML remarks file (written empty)"),
    "preview": ((), True, None, "refused: tilegen has no preview features (exit 2)"),
    "l": ((), True, None, "refused: tile libraries need the SIMT preview (exit 2)"),
    "sanitize": (
        (),
        True,
        ("memcheck",),
        "bounds checks on global pointer accesses (docs/debugging.md)",
    ),
    "apply-controls": ((), True, None, "refused: no libNVVM/ptxas control files (exit 2)"),
}
#: options whose value must be glued on (``-O3``), as in tileiras
PREFIX_ONLY = {"O"}
REFUSED = {
    "apply-controls": "--apply-controls (ACF files for libNVVM/ptxas) is not supported by tilegen",
    "l": "tile libraries (-l) need the SIMT preview, which tilegen does not support",
}
PREVIEW_FEATURES = ("simt",)
_ALIASES = {alias: name for name, (aliases, *_rest) in OPTIONS.items() for alias in aliases}


class UsageError(Exception):
    pass


def _prog() -> str:
    return os.environ.get("TILEGEN_TILEIRAS_PROG") or "tilegen-tileiras"


def parse_args(argv: list[str]) -> tuple[dict, list[str]]:
    """(options: canonical name -> value or list of values, positionals); raises UsageError
    with tileiras's wording."""
    opts: dict = {}
    positionals: list[str] = []
    i = 0
    only_positionals = False
    while i < len(argv):
        arg = argv[i]
        i += 1
        if only_positionals or not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        if arg == "--":
            only_positionals = True
            continue
        body = arg[2:] if arg.startswith("--") else arg[1:]
        key, eq, value = body.partition("=")
        if not eq and body[:1] in PREFIX_ONLY and len(body) > 1:
            key, value, eq = body[:1], body[1:], "="
        name = _ALIASES.get(key, key)
        dashed = ("-" if len(key) == 1 else "--") + key
        if name not in OPTIONS:
            raise UsageError(f"Unknown command line argument '{arg}'.  Try: '{_prog()} --help'")
        _aliases, takes_value, choices, _help = OPTIONS[name]
        if not takes_value:
            if eq:
                raise UsageError(f"for the {dashed} option: may not have a value '{value}'!")
            opts[name] = True
            continue
        if not eq:
            if key in PREFIX_ONLY or i >= len(argv):
                raise UsageError(f"for the {dashed} option: requires a value!")
            value = argv[i]
            i += 1
        if choices is not None and value not in choices:
            known = f" (accepted: {', '.join(choices)})" if name == "gpu-name" else ""
            raise UsageError(f"for the {dashed} option: Cannot find option named '{value}'!{known}")
        if name == "opt-level":
            try:
                value = int(value, 0)
            except ValueError:
                raise UsageError(
                    f"for the {dashed} option: '{value}' value invalid for integer argument!"
                ) from None
        if name == "preview":
            for feature in value.split(","):
                if feature not in PREVIEW_FEATURES:
                    raise UsageError(
                        f"for the --preview option: unknown preview feature '{feature}'; "
                        f"supported features: {', '.join(PREVIEW_FEATURES)}"
                    )
        if name in ("l", "preview"):
            opts.setdefault(name, []).append(value)
        else:
            opts[name] = value
    return opts, positionals


def help_text() -> str:
    lines = [
        "OVERVIEW: tilegen-tileiras: tilegen behind NVIDIA tileiras's command line",
        "",
        "USAGE: tilegen-tileiras [options] <tile bytecode or MLIR text file>",
        "",
        "OPTIONS:",
    ]
    for name, (aliases, takes_value, choices, text) in OPTIONS.items():
        if name in ("l",):
            spelling = "-l <path>"
        else:
            spelling = f"--{name}" + ("=<value>" if takes_value else "")
        alias_text = ", ".join(("-" if len(a) == 1 else "--") + a for a in aliases)
        lines.append(f"  {spelling:<30} - {text}" + (f" (alias: {alias_text})" if aliases else ""))
        for choice in choices or ():
            lines.append(f"    ={choice}")
    lines.append("")
    lines.append("Exit codes: 0 ok, 1 usage, 2 configuration, 3 invalid input, 5 compile failure.")
    return "\n".join(lines) + "\n"


def _err(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _write_empty_remarks(opts: dict) -> None:
    """cuTile passes --remark-format=yaml --remarks=all --remarks-output-file=F and reads F
    back; tilegen has no remarks, so F is an empty YAML stream."""
    if opts.get("remark-format") != "yaml":
        return
    categories = [
        opts.get(k, "none")
        for k in OPTIONS
        if k.startswith("remarks") and k != "remarks-output-file"
    ]
    if all(c == "none" for c in categories):
        return
    try:
        with open(opts.get("remarks-output-file", "tileir_remarks.yaml"), "w"):
            pass
    except OSError:
        pass


def run(argv: list[str]) -> int:
    try:
        opts, positionals = parse_args(argv)
    except UsageError as e:
        print(f"{_prog()}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if opts.get("help"):
        sys.stdout.write(help_text())
        return 0
    if opts.get("version"):
        from tilegen.version import compiler_version

        sys.stdout.write(compiler_version())
        return 0
    if opts.get("list-versions"):
        from tilegen.version import readable_bytecode_versions

        sys.stdout.write("".join(v + "\n" for v in readable_bytecode_versions()))
        return 0
    if len(positionals) > 1:
        print(
            f"{_prog()}: Too many positional arguments specified!\n"
            f"Can specify at most 1 positional arguments: See: {_prog()} --help",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not positionals:
        _err("no input file provided")
        return EXIT_USAGE
    for name, message in REFUSED.items():
        if name in opts:
            _err(message)
            return EXIT_CONFIG
    if "preview" in opts:
        _err("preview features (--preview=simt) are not supported by tilegen")
        return EXIT_CONFIG

    from tilegen import api
    from tilegen.runtime.driver import read_input

    path = positionals[0]
    fields = dict(
        opt_level=opts.get("opt-level", api.DEFAULT_OPT_LEVEL),
        lineinfo=bool(opts.get("lineinfo")),
        device_debug=bool(opts.get("device-debug")),
        sanitize=opts.get("sanitize"),
    )
    try:
        api.CompileOptions(**fields)  # -O and -g are checked before the input is read
        data = read_input(path, allow_stdin=False)
        gpu_name = opts.get("gpu-name")
        if gpu_name is None:
            _err(
                "no GPU architecture given: pass --gpu-name=sm_XX (one of "
                + ", ".join(GPU_NAMES)
                + ")"
            )
            return EXIT_CONFIG
        result = api.compile(
            data,
            options=api.CompileOptions(target=gpu_name, **fields),
            cache=os.environ.get("TILEGEN_TILEIRAS_CACHE", "0") not in ("0", ""),
            name=path,
        )
    except api.CompileError as e:
        for d in e.diagnostics:
            print(d.format(), file=sys.stderr)
        if e.exit_code == EXIT_COMPILE:
            _err("failed to compile Tile IR program")
        elif e.stage == "verify":
            _err("verification failed for the cuda_tile module")
        return e.exit_code
    for d in result.diagnostics:
        print(d.format(), file=sys.stderr)
    output = opts.get("output-file", DEFAULT_OUTPUT)
    try:
        with open(output, "wb") as f:
            f.write(result.cubin)
    except OSError as e:
        _err(f"cannot open output file '{output}': {e.strerror or e}")
        return EXIT_CONFIG
    _write_empty_remarks(opts)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    if argv is None:
        # the console script: a warm server runs it if there is one (tilegen/server.py)
        from tilegen import server

        rc = server.run_remote("tileiras", sys.argv[1:])
        if rc is not None:
            return rc
        rc = main(sys.argv[1:])
        server.start()
        return rc
    argv = list(argv)
    start = time.perf_counter()
    try:
        from tilegen.runtime.limits import deep_stack  # deeply nested IR: runtime/limits.py

        rc = deep_stack(run, argv)
    except KeyboardInterrupt:
        rc = 130
    except Exception as e:  # noqa: BLE001 - never a traceback (TILEGEN_TRACEBACK=1 shows it)
        if os.environ.get("TILEGEN_TRACEBACK"):
            raise
        _err(f"internal compiler error: {type(e).__name__}: {e}")
        rc = EXIT_COMPILE
    log = os.environ.get("TILEGEN_SHIM_LOG")
    if log:
        import json

        try:
            with open(log, "a") as f:
                record = {"argv": argv, "rc": rc, "seconds": time.perf_counter() - start}
                f.write(json.dumps(record) + "\n")
        except OSError:
            pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
