"""The simulator's own 128-byte tensor map (NOT NVIDIA's opaque CUtensorMap): what the launcher
writes into a hidden `.param .b8 [128]` so `cp.async.bulk.tensor` can find its global tensor.

Layout (little-endian): b"TGTM", rank u32, element size u32, swizzle u32 (bytes: 0, 32, 64 or
128), address u64, dims[5] u64 (innermost first, in elements), strides[5] u64 (bytes), box[5]
u32 (innermost first; all 0 when the box is unknown: 1-D copies then take the mbarrier's
expected bytes), flags u32 (bit 0: out-of-bounds elements read as NaN instead of zero, the
CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA fill; bit 1: the 128-byte swizzle moves
32-byte atoms, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B). The box and swizzle are what NVIDIA's host code puts into the real
CUtensorMap (tileiras compiles them into its --nv-host object); callers pass them to
`launch.run_ptx(tensor_maps=...)`."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"TGTM"
_FMT = "<4sIII Q 5Q 5Q 5I I"
SWIZZLES = (0, 32, 64, 128)


@dataclass(frozen=True)
class TensorMap:
    address: int
    elem_size: int
    dims: tuple[int, ...]  # innermost first
    strides: tuple[int, ...]  # bytes, innermost first
    box: tuple[int, ...] = ()  # elements per dim, innermost first; () when unknown
    swizzle: int = 0  # bytes of the shared-memory swizzle span (0: none)
    oob_nan: bool = False  # out-of-bounds elements read as NaN (else zero)
    swizzle_atom: int = 16  # bytes the swizzle moves as a unit (32: 128B_ATOM_32B)


def encode(
    address: int,
    array: np.ndarray,
    box=None,
    swizzle: int = 0,
    oob_nan: bool = False,
    swizzle_atom: int = 16,
) -> bytes:
    """The map of `array` at `address`; `box` is outermost-first like the array's shape."""
    dims = list(array.shape[::-1]) + [1] * (5 - array.ndim)
    strides = list(array.strides[::-1]) + [0] * (5 - array.ndim)
    if swizzle not in SWIZZLES:
        raise ValueError(f"tensor map swizzle must be one of {SWIZZLES} bytes, got {swizzle}")
    if swizzle_atom not in (16, 32) or (swizzle_atom == 32 and swizzle != 128):
        raise ValueError("32-byte swizzle atoms exist for the 128-byte swizzle only")
    boxes = [0] * 5
    if box is not None:
        if len(box) != array.ndim or any(int(b) < 1 or int(b) > 256 for b in box):
            raise ValueError(
                f"tensor map box {list(box)} must give 1..256 per dim of {array.shape}"
            )
        boxes = [int(b) for b in box[::-1]] + [0] * (5 - array.ndim)
    raw = struct.pack(
        _FMT,
        MAGIC,
        array.ndim,
        array.itemsize,
        swizzle,
        address,
        *dims,
        *strides,
        *boxes,
        int(bool(oob_nan)) | (2 if swizzle_atom == 32 else 0),
    )
    return raw.ljust(128, b"\0")


def decode(raw: bytes) -> TensorMap | None:
    if len(raw) < struct.calcsize(_FMT) or raw[:4] != MAGIC:
        return None
    magic, rank, esize, swz, addr, *rest = struct.unpack(_FMT, raw[: struct.calcsize(_FMT)])
    box = tuple(rest[10 : 10 + rank]) if rest[10] else ()
    flags = rest[15]
    return TensorMap(
        addr,
        esize,
        tuple(rest[:rank]),
        tuple(rest[5 : 5 + rank]),
        box,
        swz,
        bool(flags & 1),
        32 if flags & 2 else 16,
    )


# -- device-built maps (tensormap.replace / tensormap.cp_fenceproxy) ----------------------------
#: byte offset and width of each field `tensormap.replace` writes, in the layout above
_FIELD = {
    "global_address": (16, 8),
    "rank": (4, 4),
    "global_dim": (24, 8),
    "global_stride": (64, 8),
    "box_dim": (104, 4),
    "elemtype": (8, 4),
    "swizzle_mode": (12, 4),
}
#: CUtensorMapDataType -> element bytes (tensormap.replace .elemtype)
_ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 8, 10: 2, 11: 4, 12: 4}


def replace(st, ins, mask) -> None:
    """``tensormap.replace.tile.<field>.shared::cta.b1024.<type> [map], [ord,] value``."""
    from tilegen.runtime.ptx.sim.asyncproxy import shared_addrs
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    field = next(
        (p for p in ins.parts if p in _FIELD or p in _CHECKED or p == "swizzle_atomicity"), None
    )
    if field is None or "shared::cta" not in ins.parts:
        raise PtxSimError(f"unsupported tensor-map update {ins.opcode!r}")
    base = shared_addrs(st, ins.operands[0], mask).astype(np.int64)
    ordinal = st.read(ins.operands[1], "u32")[mask].astype(np.int64) if len(ins.operands) > 2 else 0
    value = st.read(ins.operands[-1], ins.parts[-1].replace("b", "u"))[mask].astype(np.uint64)
    if field == "swizzle_atomicity":  # 0: 16-byte atoms, 1: 32-byte (flags bit 1)
        if (value > 1).any():
            raise PtxSimError(
                "tensormap.replace.swizzle_atomicity: only 16 and 32 bytes are simulated"
            )
        flags = st.shared.raw_load(base + 124, 4).astype(np.uint64)
        flags = (flags & ~np.uint64(2)) | (value.astype(np.uint64) << np.uint64(1))
        st.shared.raw_store(base + 124, 4, flags)
        return
    if field in _CHECKED:
        if (value != _CHECKED[field]).any():
            raise PtxSimError(f"tensormap.replace.{field}: only {_CHECKED[field]} is simulated")
        return
    st.shared.raw_store(base, 4, np.full(base.size, int.from_bytes(MAGIC, "little"), np.uint64))
    off, width = _FIELD[field]
    if field == "rank":
        value = value + 1
    elif field == "global_stride":
        ordinal = ordinal + 1  # the strides of dims 1.. (dim 0 is the element size)
    elif field == "elemtype":
        esz = np.array([_ELEM_BYTES.get(int(v), 0) for v in value], np.uint64)
        st.shared.raw_store(base + 64, 8, esz)
        value = esz
    elif field == "swizzle_mode":
        value = np.array([(0, 32, 64, 128)[int(v) & 3] for v in value], np.uint64)
    st.shared.raw_store(base + off + width * ordinal, width, value)


#: fields the simulator keeps at one value (element strides 1, no interleave, zero fill)
_CHECKED = {"element_stride": 1, "interleave_layout": 0, "fill_mode": 0}


def copy_to_global(st, ins, mask) -> None:
    """``tensormap.cp_fenceproxy.global.shared::cta... [global], [shared], 128``."""
    from tilegen.runtime.ptx.sim.asyncproxy import addrs, shared_addrs

    dst = addrs(st, ins.operands[0], mask)
    src = shared_addrs(st, ins.operands[1], mask)
    for d, s_ in sorted(set(zip(dst.tolist(), src.tolist()))):
        raw = st.shared.raw_load(np.array([s_ + i for i in range(0, 128, 8)]), 8)
        st.heap.write(int(d), raw.astype(np.uint64).tobytes())
