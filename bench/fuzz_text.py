#!/usr/bin/env python3
"""Fuzz the MLIR text path, in process, with mutated real inputs (not a test).

Seeds: ``examples/*.mlir``, the cuTile corpus printouts (``../shared`` or ``$TILEGEN_SHARED``,
wrapped in ``cuda_tile.module``) and every ``// -----`` chunk of NVIDIA's
``test/Dialect/CudaTile`` lit tests (their ``*_invalid.mlir`` chunks sit next to each verifier
rule). Each input gets 1-4 mutations:

* ``number``: an integer literal (a shape dimension, an attribute, an index, a result number)
  replaced by a hostile value (0, -1, 3, 2^31-1, 2^31, 2^63, a 5,000-digit number, ...);
* ``token``: a token deleted, duplicated or swapped with another of the same input;
* ``char``: a truncation, deletion, duplication or stray punctuation (the old mutator);
* ``nest``: the input's body wrapped in hundreds of nested ``if`` regions.

``check`` runs tilegen-opt's pipeline on one input (parse, verify, print) and, when that
succeeds, the bytecode round trip (write, read, verify, print) and ``--canonicalize``. The
result is ``ok``, ``rejected`` (located diagnostics), ``inconsistent: ...`` (accepted as text,
refused after the bytecode round trip, other than by the writer's refusals of what bytecode
cannot hold), ``crash: ...`` (an ``internal error`` diagnostic, an unlocated error from the
text pipeline, or an exception) or ``hang`` (over ``--timeout`` seconds; inputs over 5 s are
also counted as ``slow``).
Usage::

    .venv/bin/python bench/fuzz_text.py --seconds 600
    .venv/bin/python bench/fuzz_text.py --seconds 60 --save out/   # keep crashes and hangs

The summary line gives inputs, outcomes, crashes, hangs, the slowest input and peak RSS.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from fuzz_bytecode import Hang, _Timer, shared_dir  # noqa: E402

#: values a mutated integer literal takes
HOSTILE_NUMBERS = [
    "0",
    "1",
    "-1",
    "3",
    "7",
    "-2",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "16777216",
    "33554432",
    "0x7FFFFFFF",
    "0xFFFFFFFFFFFFFFFF",
    "9" * 5000,
]
_RE_INT = re.compile(r"(?<![A-Za-z_0-9.%#^@!$])-?(?:0x[0-9A-Fa-f]+|[0-9]+)(?![0-9A-Za-z_.])")
_RE_TOKEN = re.compile(r"%[A-Za-z_0-9$.\-#]+|@[A-Za-z_0-9$.]+|[A-Za-z_][A-Za-z_0-9$.]*|\S")


def seed_texts() -> list[tuple[str, str]]:
    """(name, text) of every seed: examples, corpus printouts, lit-test chunks."""
    out = []
    for path in sorted(glob.glob(str(REPO / "examples" / "*.mlir"))):
        out.append((os.path.basename(path), Path(path).read_text()))
    corpus = shared_dir() / "corpus" / "cutile" / "out"
    for path in sorted(glob.glob(str(corpus / "*.mlir"))):
        body = Path(path).read_text()
        out.append((os.path.basename(path), "cuda_tile.module @kernels {\n" + body + "\n}\n"))
    lit = shared_dir() / "conformance" / "cuda-tile" / "test" / "Dialect" / "CudaTile"
    for path in sorted(glob.glob(str(lit / "*.mlir"))):
        text = Path(path).read_text()
        for i, chunk in enumerate(re.split(r"^// -----\s*$", text, flags=re.M)):
            if chunk.strip():
                out.append((f"{os.path.basename(path)}#{i}", chunk))
    return out


# --------------------------------------------------------------------------- mutators


def _mutate_number(text: str, rng: random.Random) -> str:
    spots = list(_RE_INT.finditer(text))
    if not spots:
        return text
    m = rng.choice(spots)
    return text[: m.start()] + rng.choice(HOSTILE_NUMBERS) + text[m.end() :]


def _mutate_token(text: str, rng: random.Random) -> str:
    toks = list(_RE_TOKEN.finditer(text))
    if not toks:
        return text
    m = rng.choice(toks)
    kind = rng.randrange(3)
    if kind == 0:
        return text[: m.start()] + text[m.end() :]
    if kind == 1:
        return text[: m.end()] + " " + m.group(0) + text[m.end() :]
    other = rng.choice(toks).group(0)
    return text[: m.start()] + other + text[m.end() :]


def _mutate_char(text: str, rng: random.Random) -> str:
    if not text:
        return text
    i = rng.randrange(len(text))
    kind = rng.randrange(4)
    if kind == 0:
        return text[:i]
    if kind == 1:
        return text[:i] + text[i + rng.randint(1, 12) :]
    if kind == 2:
        return text[:i] + text[i : i + 16] + text[i:]
    return text[:i] + rng.choice('<>{}()[],:=%@#!"^-x0?') + text[i:]


def _mutate_nest(text: str, rng: random.Random) -> str:
    """Wrap the body of the first entry in ``depth`` nested ifs on a constant condition."""
    m = re.search(r"entry @[^{]*\{\n", text)
    if not m:
        return text
    end = text.rfind("return")
    if end < m.end():
        return text
    depth = rng.choice([50, 300, 1000])
    head = "%fuzz_c = constant <i1: true> : tile<i1>\n" + "if %fuzz_c {\n" * depth
    return text[: m.end()] + head + text[m.end() : end] + "}\n" * depth + text[end:]


MUTATORS = {
    "number": _mutate_number,
    "token": _mutate_token,
    "char": _mutate_char,
    "nest": _mutate_nest,
}
WEIGHTS = {"number": 5, "token": 3, "char": 3, "nest": 1}


def mutate(text: str, rng: random.Random) -> str:
    names = list(WEIGHTS)
    for _ in range(rng.randint(1, 4)):
        name = rng.choices(names, [WEIGHTS[n] for n in names])[0]
        text = MUTATORS[name](text, rng)
    return text


# --------------------------------------------------------------------------- one input


#: what the bytecode writer says (unlocated, as NVIDIA's writer) about IR the format cannot
#: hold: unregistered types and ops, or features newer than the version written
WRITER_REFUSALS = (
    "unsupported type in bytecode writer",
    "only ops from the 'cuda_tile' dialect",
    "only function and global ops are allowed",
    "operation not supported in bytecode",
    "unsupported location",
    "unsupported attribute type",
    # what cuda-tile-translate refuses as input while cuda-tile-opt (with
    # --allow-unregistered-dialect, as this campaign runs it) accepts: a top level that is not
    # one cuda_tile module, and unregistered ops
    "expected a single CUDA Tile IR module in the MLIR module",
    "expected a CUDA Tile IR module, but got",
    "operation being parsed with an unregistered dialect",
    "unregistered operation",
)


def _diagnostics_problem(diags) -> Optional[str]:
    """An internal error or an error without a file:line:col location, else None."""
    from tilegen.runtime.diagnostics import file_line_col

    for d in diags:
        if "internal error" in d.message:
            return d.message
        if d.severity == "error" and file_line_col(d.loc) is None:
            if d.message.startswith(("verification failed", "failed to")):
                continue
            return f"unlocated error: {d.message}"
    return None


def check(text: str, timeout: float = 30.0) -> str:
    """'ok' | 'rejected' | 'crash: ...' | 'hang' for one input through tilegen-opt's pipeline
    and, when it is accepted, the bytecode round trip and the canonicalizer, on the deep stack
    the tools run on (a hang leaves its worker thread behind; it is counted, not stopped)."""
    from tilegen.runtime.limits import deep_stack

    try:
        with _Timer(timeout):
            return deep_stack(_check, text)
    except Hang:
        return "hang"
    except Exception as e:  # noqa: BLE001 - run_chunk should have turned it into a diagnostic
        return "crash: " + "".join(traceback.format_exception_only(type(e), e)).strip()


def _check(text: str) -> str:
    from tilegen.tools import driver, opt, translate

    name = "fuzz.mlir"
    source = driver.Source(name, text)
    chunk = driver.Chunk(text, 1, text.count("\n") + 1)
    options = opt.OptOptions(filename=name, allow_unregistered=True)
    r = driver.run_chunk(source, chunk, lambda t, e: opt.process_chunk(t, e, options), verify=False)
    problem = _diagnostics_problem(r.diagnostics)
    if problem:
        return "crash: " + problem
    if r.output is None:
        if not any(d.severity == "error" for d in r.diagnostics):
            return "crash: rejected without an error"
        return "rejected"
    topts = translate.TranslateOptions(filename=name, version=translate.check_version(None))
    r = driver.run_chunk(source, chunk, lambda t, e: translate.roundtrip(t, e, topts), verify=False)
    internal = [d.message for d in r.diagnostics if "internal error" in d.message]
    if internal:
        return "crash: round trip: " + internal[0]
    refusals = [d.message for d in r.diagnostics if d.severity == "error"]
    if refusals and not refusals[0].startswith(WRITER_REFUSALS):
        # accepted as text, refused once written and read back (bytecode has no locations)
        return "inconsistent: round trip: " + refusals[0]
    options = opt.OptOptions(
        filename=name, allow_unregistered=True, passes="builtin.module(canonicalize)"
    )
    r = driver.run_chunk(source, chunk, lambda t, e: opt.process_chunk(t, e, options), verify=False)
    problem = _diagnostics_problem(r.diagnostics)
    if problem:
        return "crash: canonicalize: " + problem
    return "ok"


# --------------------------------------------------------------------------- campaign


#: an input that takes longer than this (wall clock) is counted as ``slow``
SLOW_S = 5.0


def run_campaign(
    seconds: float = 60.0,
    seed: int = 1,
    timeout: float = 30.0,
    max_inputs: int = 0,
    save: Optional[str] = None,
    pool: Optional[list[tuple[str, str]]] = None,
) -> dict:
    """Random mutants of the seeds; returns the figures and up to 20 ``failures``."""
    rng = random.Random(seed)
    pool = pool or seed_texts()
    stats = {"inputs": 0, "ok": 0, "rejected": 0, "inconsistent": 0, "crash": 0, "hang": 0}
    stats["slow"] = 0
    stats["slowest_s"] = 0.0
    failures: list = []
    seen: set = set()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    if save:
        os.makedirs(save, exist_ok=True)
    while time.monotonic() - start < seconds and (not max_inputs or stats["inputs"] < max_inputs):
        name, text = pool[rng.randrange(len(pool))]
        s = rng.randrange(2**32)
        mutant = mutate(text, random.Random(s))
        t0 = time.monotonic()
        result = check(mutant, timeout)
        took = time.monotonic() - t0
        stats["slowest_s"] = max(stats["slowest_s"], took)
        stats["slow"] += took > SLOW_S
        stats["inputs"] += 1
        key = result.split(":")[0]
        stats[key] += 1
        if key in ("crash", "hang", "inconsistent"):
            note = {"file": name, "seed": s, "result": result[:500]}
            sig = re.sub(r"\d+", "N", result[:120])
            if sig not in seen and len(failures) < 20:
                seen.add(sig)
                failures.append(note)
            if save:
                base = os.path.join(save, f"{key}-{stats['inputs']:07d}")
                Path(base + ".mlir").write_text(mutant)
                Path(base + ".json").write_text(json.dumps(note))
    stats["elapsed_s"] = round(time.monotonic() - start, 1)
    stats["slowest_s"] = round(stats["slowest_s"], 3)
    stats["inputs_per_minute"] = round(stats["inputs"] * 60 / max(stats["elapsed_s"], 0.1))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stats["peak_rss_mb"] = round(rss / 1024, 1)
    stats["rss_growth_mb"] = round((rss - rss0) / 1024, 1)
    stats["failures"] = failures
    return stats


def replay(name: str, seed: int, pool: Optional[list[tuple[str, str]]] = None) -> str:
    """The mutant a failure note describes (``{"file": name, "seed": seed}``)."""
    pool = pool or seed_texts()
    text = dict(pool)[name]
    return mutate(text, random.Random(seed))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget of the run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a hang")
    ap.add_argument("--max-inputs", type=int, default=0)
    ap.add_argument("--save", metavar="DIR", help="write crashes and hangs here")
    ap.add_argument("--replay", nargs=2, metavar=("FILE", "SEED"), help="print one mutant")
    args = ap.parse_args(argv)
    if args.replay:
        sys.stdout.write(replay(args.replay[0], int(args.replay[1])))
        return 0
    stats = run_campaign(args.seconds, args.seed, args.timeout, args.max_inputs, args.save)
    failures = stats.pop("failures")
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    for note in failures:
        print(json.dumps(note), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
