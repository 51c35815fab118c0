#!/usr/bin/env python3
"""Fuzz the Tile IR bytecode reader, in process, with mutated corpus files (not a test).

Inputs are real ``.tileirbc`` files (the cuTile corpus and NVIDIA's bytecode fixtures under
``../shared``, or ``$TILEGEN_SHARED``) changed in one of two ways:

* ``random``: 1-8 structural mutations (bit flips, byte overwrites, big varints spliced in,
  insertions, deletions, truncation, duplicated chunks, header pokes);
* ``sweep``: every field the reader reads from a file (each varint, byte and little-endian word:
  counts, lengths, offsets, indices, tags, shapes; found by tracing the reader,
  ``varint.TRACE``) replaced in turn by each hostile value (0, 1, 2^31-1, 2^32, 2^64-1, the
  file size, ...).

``check`` runs one input through the reader and the writer (or, with ``pipeline``, through the
whole ``tilegen disasm`` path: reader, verifier, printer) and must end in a module or a
``BytecodeError``; anything else is a crash, an input over ``--timeout`` seconds a hang.
``--differential`` also runs NVIDIA's ``tileirdisasm`` on every input and compares the verdicts
(accept or reject) with tilegen's ``disasm``: NVIDIA rejecting what tilegen accepts is a *miss*
(the goal is none), the reverse is counted as *stricter*. Usage::

    .venv/bin/python bench/fuzz_bytecode.py --seconds 600                 # random mutations
    .venv/bin/python bench/fuzz_bytecode.py --mode sweep --differential   # every field, vs NVIDIA
    .venv/bin/python bench/fuzz_bytecode.py --mode both --differential --seconds 300 --save out/
    .venv/bin/python bench/fuzz_bytecode.py --hypothesis 20000            # hypothesis-driven run

The summary line gives inputs, outcomes, internal errors (crashes), hangs, the slowest input,
the process's peak RSS and, in differential mode, the verdict agreement; ``--save DIR`` keeps
every crash, hang and miss as a file with a JSON note of how it was made.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Iterator, Optional

REPO = Path(__file__).resolve().parent.parent

from tilegen.runtime.paths import conformance_tests, corpus_out, shared_path  # noqa: E402


def shared_dir() -> Path:
    """``$TILEGEN_SHARED``, else ``../shared`` beside the repository (tilegen.runtime.paths)."""
    return shared_path()


def corpus_dir() -> Path:
    return Path(os.environ.get("TILEGEN_CORPUS") or corpus_out())


def fixtures_dir() -> Path:
    return Path(os.environ.get("TILEGEN_BYTECODE_FIXTURES") or conformance_tests() / "Bytecode")


#: varint encodings that stress count/length checks
BIG_VARINTS = [
    bytes([0xFF] * 9 + [0x01]),  # 2^64 - 1
    bytes([0x80, 0x80, 0x80, 0x80, 0x10]),  # 2^32
    bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),  # 2^32 - 1
    bytes([0xFF, 0xFF, 0x03]),  # 65535
    bytes([0x80] * 12),  # unterminated
    bytes([0x7F]),
    bytes([0x00]),
]

#: values a swept varint field takes (the file size and size + 1 are added per file)
HOSTILE_VARINTS = (0, 1, 2, 3, 0x7F, 0x80, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1)
#: values a swept byte takes
HOSTILE_BYTES = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF)


def seed_paths() -> list[str]:
    paths = sorted(glob.glob(str(corpus_dir() / "*.tileirbc")))
    fx = str(fixtures_dir())
    paths += sorted(glob.glob(os.path.join(fx, "**", "*.tileirbc"), recursive=True))
    paths += sorted(glob.glob(os.path.join(fx, "**", "*.bc"), recursive=True))
    return paths


def seeds() -> list[bytes]:
    return [open(p, "rb").read() for p in seed_paths()]


def named_seeds() -> list[tuple[str, bytes]]:
    return [(os.path.basename(p), open(p, "rb").read()) for p in seed_paths()]


# --------------------------------------------------------------------------- mutators


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Apply 1-8 random structural mutations to ``data``."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not buf:
            buf = bytearray(b"\x7fTileIR\x00")
        kind = rng.randrange(8)
        pos = rng.randrange(len(buf))
        if kind == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buf[pos] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xCB, rng.randrange(256)])
        elif kind == 2:
            v = rng.choice(BIG_VARINTS)
            buf[pos : pos + rng.randint(1, 3)] = v
        elif kind == 3:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif kind == 4:
            del buf[pos : pos + rng.randint(1, 32)]
        elif kind == 5:
            del buf[pos:]
        elif kind == 6:  # duplicate a chunk elsewhere (repeated sections, deep nesting)
            end = min(len(buf), pos + rng.randint(1, 64))
            at = rng.randrange(len(buf))
            buf[at:at] = buf[pos:end]
        else:  # poke the header's version / tag
            if len(buf) >= 12:
                buf[rng.randrange(8, 12)] = rng.randrange(256)
    return bytes(buf)


def field_map(data: bytes) -> list[tuple[int, int, str, str]]:
    """Every field the reader reads from ``data``: (file offset, byte length, kind, what), where
    kind is ``varint``, ``u8`` or a struct format (``I``, ``Q``, ``i``, ``q``, ``H``) and what
    names the field (the reader's message should reading it fail)."""
    from tilegen.runtime.bytecode import BytecodeError, read_bytecode
    from tilegen.runtime.bytecode import varint as V

    V.TRACE = []
    try:
        read_bytecode(data, "trace")
    except BytecodeError:
        pass
    finally:
        fields, V.TRACE = V.TRACE, None
    return sorted(set(fields))


def _word_values(fmt: str) -> list[int]:
    bits = struct.calcsize("<" + fmt) * 8
    if fmt.islower():  # signed
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return sorted({0, 1, -1, 2, 3, lo, hi, lo + 1})
    return sorted({0, 1, 2, 3, 2**bits - 1, 2 ** (bits - 1), 2**bits - 2})


def sweep(data: bytes, rng: Optional[random.Random] = None) -> Iterator[tuple[bytes, dict]]:
    """Each field of ``data`` set to each hostile value: (mutant, how it was made); in file
    order, or in ``rng``'s shuffled order (a time-boxed run then samples the whole file)."""
    from tilegen.runtime.bytecode.varint import encode_varint

    size = len(data)
    fields = field_map(data)
    if rng is not None:
        rng.shuffle(fields)
    for off, length, kind, what in fields:
        if kind == "varint":
            values = sorted(set(HOSTILE_VARINTS) | {size, size + 1})
            encode = encode_varint
        elif kind == "u8":
            values, encode = HOSTILE_BYTES, lambda v: bytes([v])
        else:
            values = _word_values(kind)
            encode = lambda v, f=kind: struct.pack("<" + f, v)  # noqa: E731
        original = data[off : off + length]
        for v in values:
            new = encode(v)
            if new == original:
                continue
            yield data[:off] + new + data[off + length :], {
                "field": off,
                "length": length,
                "kind": kind,
                "value": v,
                "what": what,
            }


def apply_recipe(data: bytes, recipe: dict) -> bytes:
    """Rebuild a mutant from its recipe (``sweep``'s note, or ``{"seed": N}`` for ``mutate``)."""
    if "seed" in recipe:
        return mutate(data, random.Random(recipe["seed"]))
    from tilegen.runtime.bytecode.varint import encode_varint

    off, length, kind, v = recipe["field"], recipe["length"], recipe["kind"], recipe["value"]
    if kind == "varint":
        new = encode_varint(v)
    elif kind == "u8":
        new = bytes([v])
    else:
        new = struct.pack("<" + kind, v)
    return data[:off] + new + data[off + length :]


# --------------------------------------------------------------------------- one input


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


class _Timer:
    """SIGALRM after ``timeout`` seconds (main thread only; a no-op elsewhere)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.armed = False

    def __enter__(self):
        import threading

        if (
            hasattr(signal, "setitimer")
            and self.timeout > 0
            and threading.current_thread() is threading.main_thread()
        ):
            self.old = signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


def check(data: bytes, timeout: float = 5.0, pipeline: bool = False) -> str:
    """'ok' | 'rejected' | 'crash: ...' | 'hang' for one input. ``pipeline`` runs the whole
    ``tilegen disasm`` path (reader, verifier, printer) instead of reader + writer."""
    from tilegen.runtime.bytecode import BytecodeError, read_bytecode, read_version, write_bytecode
    from tilegen.runtime.bytecode import layouts as L

    try:
        with _Timer(timeout):
            if pipeline:
                accepted, errors = tilegen_verdict(data)
                internal = [e for e in errors if "internal error" in e]
                if internal:
                    return "crash: " + internal[0]
                return "ok" if accepted else "rejected"
            try:
                module = read_bytecode(data, "fuzz")
            except BytecodeError:
                return "rejected"
            version = read_version(data)
            if version in L.WRITE_VERSIONS:
                try:
                    out = write_bytecode(module, version)
                except BytecodeError:
                    return "ok"
                read_bytecode(out, "rewritten")
            return "ok"
    except Hang:
        return "hang"
    except Exception as e:  # noqa: BLE001 - this is what we are looking for
        return "crash: " + "".join(traceback.format_exception_only(type(e), e)).strip()


def tilegen_verdict(data: bytes, name: str = "fuzz.tileirbc") -> tuple[bool, list[str]]:
    """(accepted, error lines) of ``tilegen disasm`` (reader, verifier, printer) on ``data``."""
    from tilegen.commands.disasm import disassemble

    try:
        text, errors = disassemble(data, name)
    except Exception as e:  # noqa: BLE001 - disassemble itself should never raise
        return False, [f"internal error: {type(e).__name__}: {e}"]
    return text is not None, [line for e in errors for line in e.split("\n")]  # notes: lines


def nvidia_tool(name: str = "tileirdisasm") -> Optional[str]:
    """NVIDIA's tool from the venv's nvidia-cuda-tileiras wheel, or PATH."""
    import shutil

    here = Path(sys.executable).parent.parent
    for cand in sorted(here.glob(f"lib/python3*/site-packages/nvidia/*/bin/{name}")):
        return str(cand)
    return shutil.which(name)


def nvidia_verdict(data: bytes, tool: str, workdir: str) -> tuple[bool, list[str]]:
    """(accepted, error lines) of NVIDIA's ``tileirdisasm`` on ``data``."""
    path = os.path.join(workdir, "fuzz.tileirbc")
    with open(path, "wb") as f:
        f.write(data)
    try:
        proc = subprocess.run(
            [tool, path], capture_output=True, text=True, errors="replace", timeout=60
        )
    except subprocess.TimeoutExpired:
        return False, ["tileirdisasm: timeout"]
    lines = [ln for ln in proc.stderr.splitlines() if "error: " in ln]
    return proc.returncode == 0, lines


_TG_LINE = re.compile(r"^.*?: (?:error|note): (.*?)(?: \(at byte offset (\d+)\))?$", re.S)
_NV_OFFSET = re.compile(r"^error at offset (\d+): (.*)$", re.S)


def _message(line: str) -> str:
    """A diagnostic line of either tool as ``error at offset N: MESSAGE`` (or ``MESSAGE`` when
    it has no offset): tilegen's ``FILE: error: MESSAGE (at byte offset N)`` and NVIDIA's
    ``error: error at offset N: MESSAGE`` compare equal when they say the same thing."""
    i = line.find("error: ")
    if i < 0:
        return line
    if " (at byte offset " in line:
        m = _TG_LINE.match(line)
        if m and m.group(2) is not None:
            return f"error at offset {m.group(2)}: {m.group(1)}"
    return line[i + len("error: ") :]


# --------------------------------------------------------------------------- campaigns


def inputs(mode: str, seed: int, pool: list[tuple[str, bytes]]) -> Iterator[tuple[bytes, dict]]:
    """Endless random mutants, or every sweep mutant of every seed file, or both interleaved."""
    rng = random.Random(seed)

    def randoms():
        while True:
            name, data = pool[rng.randrange(len(pool))]
            s = rng.randrange(2**32)
            yield mutate(data, random.Random(s)), {"file": name, "seed": s}

    def sweeps():  # round-robin over the files, so that a time-boxed run reaches them all
        order = random.Random(seed)
        running = [(name, sweep(data, order)) for name, data in pool]
        while running:
            still = []
            for name, gen in running:
                for mutant, note in gen:
                    note["file"] = name
                    yield mutant, note
                    still.append((name, gen))
                    break
            running = still

    if mode == "random":
        yield from randoms()
    elif mode == "sweep":
        yield from sweeps()
    else:
        r, s = randoms(), sweeps()
        for item in s:
            yield item
            yield next(r)
        yield from r


def run_campaign(
    seconds: float = 60.0,
    seed: int = 1,
    timeout: float = 5.0,
    max_inputs: int = 0,
    pipeline: bool = False,
    mode: str = "random",
    differential: bool = False,
    save: Optional[str] = None,
    pool: Optional[list[tuple[str, bytes]]] = None,
) -> dict:
    """Run a campaign; returns the figures (and up to 20 ``failures`` as (kind, data, note))."""
    pool = pool or named_seeds()
    tool = nvidia_tool() if differential else None
    if differential and tool is None:
        raise SystemExit("fuzz_bytecode: --differential needs NVIDIA's tileirdisasm")
    stats = {"inputs": 0, "ok": 0, "rejected": 0, "crash": 0, "hang": 0, "slowest_s": 0.0}
    if differential:
        stats.update(nv_rejected=0, tg_also_rejected=0, missed=0, stricter=0, same_message=0)
    failures: list = []
    stricter: list = []  # inputs tilegen rejects and NVIDIA accepts (up to 10)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="fuzz_bytecode_")
    if save:
        os.makedirs(save, exist_ok=True)
    try:
        for data, note in inputs(mode, seed, pool):
            if time.monotonic() - start >= seconds or (
                max_inputs and stats["inputs"] >= max_inputs
            ):
                break
            t0 = time.monotonic()
            result = check(data, timeout, pipeline or differential)
            stats["slowest_s"] = max(stats["slowest_s"], time.monotonic() - t0)
            stats["inputs"] += 1
            key = result.split(":")[0]
            stats[key] += 1
            kind = key if key in ("crash", "hang") else None
            if differential and key != "hang":
                nv_ok, nv_errors = nvidia_verdict(data, tool, workdir)
                if not nv_ok:
                    stats["nv_rejected"] += 1
                    if key != "ok":
                        stats["tg_also_rejected"] += 1
                        _, tg_errors = tilegen_verdict(data)
                        if (
                            tg_errors
                            and nv_errors
                            and _message(tg_errors[0]) == _message(nv_errors[0])
                        ):
                            stats["same_message"] += 1
                    else:
                        stats["missed"] += 1
                        kind = kind or "miss"
                        note = dict(note, nvidia=nv_errors[:2])
                elif key != "ok":
                    stats["stricter"] += 1
                    if len(stricter) < 10:
                        _, tg_errors = tilegen_verdict(data)
                        stricter.append(dict(note, tilegen=tg_errors[:1]))
            if kind is not None:
                if len(failures) < 20:
                    failures.append((kind if kind != "crash" else result, data, note))
                if save:
                    base = os.path.join(save, f"{kind}-{stats['inputs']:07d}")
                    with open(base + ".tileirbc", "wb") as f:
                        f.write(data)
                    with open(base + ".json", "w") as f:
                        json.dump(dict(note, result=result), f, default=str)
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    stats["elapsed_s"] = round(time.monotonic() - start, 1)
    stats["slowest_s"] = round(stats["slowest_s"], 3)
    stats["inputs_per_minute"] = round(stats["inputs"] * 60 / max(stats["elapsed_s"], 0.1))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stats["peak_rss_mb"] = round(rss / 1024, 1)
    stats["rss_growth_mb"] = round((rss - rss0) / 1024, 1)
    if differential:
        n = stats["nv_rejected"]
        stats["agreement_on_nv_rejected"] = (
            f"{100.0 * stats['tg_also_rejected'] / n:.2f}%" if n else "-"
        )
    stats["failures"] = failures
    stats["stricter_examples"] = stricter
    return stats


def run_random(
    seconds: float, seed: int, timeout: float, max_inputs: int = 0, pipeline: bool = False
) -> dict:
    """The random campaign (kept for tests/test_bytecode_fuzz.py)."""
    return run_campaign(seconds, seed, timeout, max_inputs, pipeline)


def run_hypothesis(examples: int, timeout: float) -> dict:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pool = seeds()
    stats = {"inputs": 0, "crash": 0, "hang": 0}

    @settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(st.integers(0, len(pool) - 1), st.randoms(use_true_random=False))
    def one(i, rnd):
        result = check(mutate(pool[i], rnd), timeout)
        stats["inputs"] += 1
        assert not result.startswith(("crash", "hang")), result

    one()
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget of the run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds before an input is a hang")
    ap.add_argument("--max-inputs", type=int, default=0)
    ap.add_argument("--mode", choices=("random", "sweep", "both"), default="random")
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="fuzz the whole `tilegen disasm` path (reader + verifier + printer)",
    )
    ap.add_argument(
        "--differential",
        action="store_true",
        help="compare each verdict with NVIDIA's tileirdisasm (implies --pipeline)",
    )
    ap.add_argument("--save", metavar="DIR", help="write crashes, hangs and misses here")
    ap.add_argument("--files", nargs="*", help="seed files (default: the corpus and fixtures)")
    ap.add_argument(
        "--hypothesis",
        type=int,
        default=0,
        metavar="N",
        help="run N hypothesis examples instead of the random loop",
    )
    args = ap.parse_args(argv)
    if args.hypothesis:
        stats = run_hypothesis(args.hypothesis, args.timeout)
        print(f"hypothesis: {stats['inputs']} inputs, 0 crashes, 0 hangs")
        return 0
    pool = [(os.path.basename(p), open(p, "rb").read()) for p in args.files] if args.files else None
    stats = run_campaign(
        args.seconds,
        args.seed,
        args.timeout,
        args.max_inputs,
        args.pipeline,
        args.mode,
        args.differential,
        args.save,
        pool,
    )
    failures = stats.pop("failures")
    stricter = stats.pop("stricter_examples")
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    for note in stricter:
        print("stricter", json.dumps(note, default=str), file=sys.stderr)
    for result, data, note in failures:
        print(result, json.dumps(note, default=str), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
