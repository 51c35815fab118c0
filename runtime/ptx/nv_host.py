"""Tensor-map descriptions out of a tileiras `--nv-host` object (x86-64 Linux, needs `cc`).

tileiras compiles, next to the PTX, a small host object whose per-kernel callback
(`__CUDA_TILEIR_FUNC_CALLBACKS[i]` + 0x28, "ON_ARGUMENTS_CHANGE") writes the 128-byte
CUtensorMaps of the kernel's hidden params into the launch's param buffer. The box shape and
swizzle are compile-time constants of that code; nothing in the PTX carries them. This module
links the object into a shared library, runs the callback once on a probe param buffer
(every 4-byte slot holds 0x1000 + 4 * its offset, so each field read back names the param it
came from) and decodes the fields the simulator needs:

    word 0: global address   word 1: bits 4-6 rank-1, bits 13-14 swizzle (0, 32B, 64B, 128B),
            bit 19 the 128-byte swizzle of 32-byte atoms (seen on tf32 MN-major maps for sm_100,
            whose tcgen05 descriptors then say 128B_BASE32B)
    word 4/5: dims-1 (32 bits each, innermost first)
    word 6: bits 56-63 box[0]-1   word 7: 8 bits per box[1..4]-1

The decoding was inferred from tileiras 13.5's objects and is checked on every use: the dims
must name the shape params of the array whose pointer the map holds. The result feeds
`run_ptx(tensor_maps=...)`."""

from __future__ import annotations

import ctypes
import re
import struct
import subprocess
import tempfile
from pathlib import Path

_SWIZZLE = {0: 0, 1: 32, 2: 64, 3: 128}


class HostMapError(RuntimeError):
    pass


def _param_offsets(ptx: str) -> list[tuple[str, int, int]]:
    """(name, byte offset, size) of the single entry's params in the CUDA param buffer."""
    m = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise HostMapError("no .entry in the PTX")
    out, off = [], 0
    for decl in m.group(1).split(","):
        name = decl.split()[-1]
        arr = re.search(r"\[(\d+)\]", name)
        if arr:
            size, align = int(arr.group(1)), int(re.search(r"\.align\s+(\d+)", decl).group(1))
            name = name[: name.index("[")]
        else:
            size = int(re.search(r"\.[bsuf](\d+)", decl).group(1)) // 8
            align = size
        off = (off + align - 1) // align * align
        out.append((name, off, size))
        off += size
    return out


def tensor_maps(host_object: Path, ptx: str, array_ranks: list[int]) -> list[dict]:
    """[{"array", "box", "swizzle"}] for the hidden map params, in order. `array_ranks` are
    the ranks of the kernel's arguments in order (0 for scalars), as passed to run_ptx."""
    params = _param_offsets(ptx)
    with tempfile.TemporaryDirectory() as tmp:
        so = Path(tmp) / "host.so"
        r = subprocess.run(
            ["cc", "-shared", "-o", str(so), str(host_object)], capture_output=True, text=True
        )
        if r.returncode != 0:
            raise HostMapError(f"cannot link {host_object}: {r.stderr.strip()}")
        lib = ctypes.CDLL(str(so))
        base = ctypes.addressof(ctypes.c_void_p.in_dll(lib, "__CUDA_TILEIR_CALLBACKS"))
        words = struct.unpack("<9Q", ctypes.string_at(base, 0x48))
        funcs = struct.unpack("<8Q", ctypes.string_at(words[5], 0x40))
        sig = ctypes.CFUNCTYPE(*([ctypes.c_int] + [ctypes.c_void_p] * 4))
        probe = (ctypes.c_uint32 * 2048)(*[0x1000 + 16 * i for i in range(2048)])
        rc = sig(funcs[5])(None, None, None, ctypes.addressof(probe))
        if rc != 0:
            raise HostMapError(f"the host callback returned {rc}")
        raw = bytes(probe)
    # which argument owns the pointer param at each byte offset
    arg_of, pos = {}, 0
    for i, rank in enumerate(array_ranks):
        if rank == 0:
            pos += 1
            continue
        arg_of[params[pos][1]] = (i, pos, rank)
        pos += 1 + 2 * rank
    changed = [
        off
        for off in range(0, len(raw), 8)
        if struct.unpack_from("<Q", raw, off)[0]
        != (0x1000 + 4 * off) | ((0x1000 + 4 * off + 16) << 32)
    ]
    nhidden = sum(1 for name, _, size in params if size == 128)
    starts = []
    for off in changed:
        if not starts or off >= starts[-1] + 128:
            starts.append(off)
    if len(starts) != nhidden:
        raise HostMapError(f"the host callback wrote {len(starts)} maps, the entry has {nhidden}")
    out = []
    for k, start in enumerate(starts):
        w = struct.unpack_from("<16Q", raw, start)
        addr = w[0] & 0xFFFFFFFF  # the probe's 64-bit pointer value: low half names it
        if (addr - 0x1000) % 4 or addr < 0x1000:
            raise HostMapError(f"map {k}: address field {addr:#x} names no param")
        poff = (addr - 0x1000) // 4
        if poff not in arg_of:
            raise HostMapError(f"map {k}: address field names no array param (offset {poff})")
        arg, ppos, rank = arg_of[poff]
        mrank = ((w[1] >> 4) & 7) + 1
        dims = [(w[4] & 0xFFFFFFFF) + 1, (w[4] >> 32) + 1, (w[5] & 0xFFFFFFFF) + 1]
        want = [0x1000 + 4 * params[ppos + 1 + d][1] for d in range(rank)][::-1]
        probes = {0x1000 + 4 * off for _, off, _ in params}
        bad = [d for d, w_ in zip(dims[:rank], want) if d != w_ and d in probes]
        if mrank != rank or bad:  # other values are shapes tileiras knew at compile time
            raise HostMapError(
                f"map for argument {arg}: decoded rank {mrank} dims {dims[:rank]} do not match "
                "the array's shape params; the CUtensorMap decoding does not fit this object"
            )
        box = [(w[6] >> 56) + 1] + [((w[7] >> (8 * i)) & 0xFF) + 1 for i in range(rank - 1)]
        desc = {"array": arg, "box": box[::-1], "swizzle": _SWIZZLE[(w[1] >> 13) & 3]}
        if (w[1] >> 19) & 1:
            desc["swizzle_atom"] = 32
        out.append(desc)
    return out
