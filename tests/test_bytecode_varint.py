"""Primitive encodings: canonical varints, zig-zag, bounded cursor reads."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegen.runtime.bytecode.errors import BytecodeError
from tilegen.runtime.bytecode.varint import (
    Cursor,
    Writer,
    encode_svarint,
    encode_varint,
    unzigzag,
    zigzag,
)


@pytest.mark.parametrize(
    "value,encoded",
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (130, b"\x82\x01"),
        (2**64 - 1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_canonical_bytes(value, encoded):
    assert encode_varint(value) == encoded
    assert Cursor(encoded).varint() == value


@given(st.integers(min_value=0, max_value=2**64 - 1))
@settings(max_examples=300, deadline=None)
def test_varint_roundtrip_and_shortest(value):
    data = encode_varint(value)
    assert Cursor(data).varint() == value
    assert len(data) == max(1, -(-value.bit_length() // 7))  # no redundant continuation bytes
    assert data[-1] & 0x80 == 0


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
@settings(max_examples=300, deadline=None)
def test_svarint_roundtrip(value):
    assert unzigzag(zigzag(value)) == value
    assert Cursor(encode_svarint(value)).svarint() == value


def test_zigzag_small_values():
    assert [zigzag(v) for v in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


def test_truncated_and_overlong_varints_fail_cleanly():
    with pytest.raises(BytecodeError, match="unexpected end"):
        Cursor(b"\x80\x80").varint()
    with pytest.raises(BytecodeError):
        Cursor(b"\xff" * 11 + b"\x01").varint()  # would shift past bit 63


def test_varint_maximum_message():
    with pytest.raises(
        BytecodeError,
        match=r"varint value exceeds maximum supported capacity\. "
        r"\(expected value less than 5, got 6\)\.",
    ):
        Cursor(b"\x06").varint(maximum=5)


def test_le_array_count_is_checked_before_allocation():
    # claims 2^40 eight-byte elements in a 12-byte buffer
    data = encode_varint(2**40) + b"\x00" * 6
    with pytest.raises(BytecodeError, match=r"array size in bytecode \(1099511627776\) exceeds"):
        Cursor(data).le_array("q")


def test_writer_alignment_padding():
    w = Writer()
    w.u8(1)
    w.align(4, 0xCB)
    assert w.getvalue() == b"\x01\xcb\xcb\xcb"
    c = Cursor(w.getvalue())
    c.u8()
    c.skip_to_alignment(4)
    assert c.at_end()
