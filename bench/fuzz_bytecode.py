#!/usr/bin/env python3
"""Fuzz the Tile IR bytecode reader (and the writer on whatever still reads) with mutated corpus files.

Each input is a real cuTile ``.tileirbc`` file with 1-8 mutations (bit flips, byte overwrites,
big varints spliced in, insertions, deletions, truncation, section-length edits). The reader must
either return a module or raise ``BytecodeError``; a module that reads must re-encode at its
version (or raise ``BytecodeWriteError``) and read back. Anything else is a crash; an input that
takes longer than ``--timeout`` seconds is a hang. Usage::

    .venv/bin/python bench/fuzz_bytecode.py --seconds 600          # time-boxed random run
    .venv/bin/python bench/fuzz_bytecode.py --hypothesis 20000     # hypothesis-driven run
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import signal
import sys
import time
import traceback

from tilegen.runtime.paths import conformance_tests, corpus_out  # noqa: E402

CORPUS = os.environ.get("TILEGEN_CORPUS") or str(corpus_out())
FIXTURES = os.environ.get("TILEGEN_BYTECODE_FIXTURES", str(conformance_tests() / "Bytecode"))

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


def seeds() -> list[bytes]:
    paths = sorted(glob.glob(os.path.join(CORPUS, "*.tileirbc")))
    paths += sorted(glob.glob(os.path.join(FIXTURES, "**", "*.tileirbc"), recursive=True))
    paths += sorted(glob.glob(os.path.join(FIXTURES, "**", "*.bc"), recursive=True))
    return [open(p, "rb").read() for p in paths]


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


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def check(data: bytes, timeout: float = 5.0, pipeline: bool = False) -> str:
    """'ok' | 'rejected' | 'crash: ...' | 'hang' for one input. ``pipeline`` runs the whole
    ``tilegen disasm`` path (reader, verifier, printer) instead of reader + writer."""
    from tilegen.runtime.bytecode import BytecodeError, read_bytecode, read_version, write_bytecode
    from tilegen.runtime.bytecode import layouts as L

    use_alarm = hasattr(signal, "setitimer") and timeout > 0
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        if pipeline:
            from tilegen.commands.disasm import disassemble

            text, errors = disassemble(data, "fuzz")
            internal = [e for e in errors if "internal error" in e]
            if internal:
                return "crash: " + internal[0]
            return "ok" if text is not None else "rejected"
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
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def run_random(
    seconds: float, seed: int, timeout: float, max_inputs: int = 0, pipeline: bool = False
) -> dict:
    rng = random.Random(seed)
    pool = seeds()
    stats = {"inputs": 0, "ok": 0, "rejected": 0, "crash": 0, "hang": 0, "slowest_s": 0.0}
    failures = []
    start = time.monotonic()
    while time.monotonic() - start < seconds and (not max_inputs or stats["inputs"] < max_inputs):
        data = mutate(rng.choice(pool), rng)
        t0 = time.monotonic()
        result = check(data, timeout, pipeline)
        stats["slowest_s"] = max(stats["slowest_s"], time.monotonic() - t0)
        stats["inputs"] += 1
        key = result.split(":")[0]
        stats[key] += 1
        if key in ("crash", "hang") and len(failures) < 20:
            failures.append((result, data))
    stats["elapsed_s"] = round(time.monotonic() - start, 1)
    stats["slowest_s"] = round(stats["slowest_s"], 3)
    stats["failures"] = failures
    return stats


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
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget of the random run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds before an input is a hang")
    ap.add_argument("--max-inputs", type=int, default=0)
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="fuzz the whole `tilegen disasm` path (reader + verifier + printer)",
    )
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
    stats = run_random(args.seconds, args.seed, args.timeout, args.max_inputs, args.pipeline)
    failures = stats.pop("failures")
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    for result, data in failures:
        print(result, data[:64].hex(), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
