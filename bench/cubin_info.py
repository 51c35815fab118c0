"""A tiny reader for NVIDIA cubin (ELF64) files, numpy-free and tilegen-free.

Reads, per kernel: the register count (``EIATTR_REGCOUNT`` in ``.nv.info``), the CTA size
(``EIATTR_REQNTID`` / ``EIATTR_MAX_THREADS`` in ``.nv.info.<kernel>``) and the number of 16-byte
instruction words in ``.text.<kernel>`` (sm_70+ SASS encodes every instruction in 16 bytes).
Also counts SASS instructions in ``cuobjdump -sass`` / ``nvdisasm`` text.

``python bench/cubin_info.py K.cubin ...`` prints what it reads.
"""

from __future__ import annotations

import re
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

# .nv.info attribute codes (values as printed by ``cuobjdump -elf``)
EIATTR_MAX_THREADS = 0x05
EIATTR_REQNTID = 0x10
EIATTR_REGCOUNT = 0x2F
# .nv.info entry formats
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


@dataclass
class KernelInfo:
    name: str
    text_bytes: int = 0
    registers: int | None = None
    reqntid: tuple[int, ...] | None = None
    max_threads: tuple[int, ...] | None = None

    @property
    def instruction_words(self) -> int:
        return self.text_bytes // 16

    @property
    def threads(self) -> int | None:
        dims = self.reqntid or self.max_threads
        if dims is None:
            return None
        n = 1
        for d in dims:
            n *= d
        return n


@dataclass
class CubinInfo:
    kernels: dict[str, KernelInfo] = field(default_factory=dict)


def _sections(data: bytes) -> list[tuple[str, int, bytes, int, int]]:
    """(name, type, contents, link, info) per section of an ELF64 little-endian file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize
        )
        body = b"" if typ == 8 else data[off : off + size]  # SHT_NOBITS
        raw.append((name, typ, body, link, info))
    strtab = raw[shstrndx][2]

    def cstr(tab: bytes, i: int) -> str:
        return tab[i : tab.index(b"\0", i)].decode()

    return [(cstr(strtab, n), t, b, link, info) for n, t, b, link, info in raw]


def _symbols(sections) -> list[str]:
    for _name, typ, body, link, _info in sections:
        if typ == 2:  # SHT_SYMTAB
            strtab = sections[link][2]
            out = []
            for off in range(0, len(body), 24):
                st_name = struct.unpack_from("<I", body, off)[0]
                out.append(strtab[st_name : strtab.index(b"\0", st_name)].decode())
            return out
    return []


def _nv_info(body: bytes):
    """(attribute, value bytes) per entry of a .nv.info section."""
    pos = 0
    while pos + 4 <= len(body):
        fmt, attr = body[pos], body[pos + 1]
        if fmt == _EIFMT_SVAL:
            size = struct.unpack_from("<H", body, pos + 2)[0]
            yield attr, body[pos + 4 : pos + 4 + size]
            pos += 4 + size
        else:
            yield attr, body[pos + 2 : pos + 4]
            pos += 4


def read_cubin(data: bytes) -> CubinInfo:
    sections = _sections(data)
    symbols = _symbols(sections)
    info = CubinInfo()

    def kernel(name: str) -> KernelInfo:
        return info.kernels.setdefault(name, KernelInfo(name))

    for name, _typ, body, _link, _info in sections:
        if name.startswith(".text."):
            kernel(name[len(".text.") :]).text_bytes = len(body)
    for name, _typ, body, _link, _info in sections:
        if name == ".nv.info":
            for attr, value in _nv_info(body):
                if attr == EIATTR_REGCOUNT and len(value) >= 8:
                    sym, count = struct.unpack_from("<II", value)
                    if sym < len(symbols) and symbols[sym] in info.kernels:
                        kernel(symbols[sym]).registers = count
        elif name.startswith(".nv.info."):
            k = kernel(name[len(".nv.info.") :])
            for attr, value in _nv_info(body):
                dims = tuple(struct.unpack_from(f"<{len(value) // 4}I", value))
                if attr == EIATTR_REQNTID:
                    k.reqntid = dims
                elif attr == EIATTR_MAX_THREADS:
                    k.max_threads = dims
    return info


def only_kernel(data: bytes) -> KernelInfo:
    kernels = read_cubin(data).kernels
    if len(kernels) != 1:
        raise ValueError(f"expected one kernel in the cubin, found {sorted(kernels)}")
    return next(iter(kernels.values()))


_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def count_sass(text: str) -> tuple[int, int]:
    """(instructions, instructions other than NOP) in ``cuobjdump -sass`` / ``nvdisasm`` text."""
    total = nops = 0
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            total += 1
            nops += m.group(1).split(".")[0] == "NOP"
    return total, total - nops


def main(argv: list[str]) -> int:
    for path in argv:
        for k in read_cubin(Path(path).read_bytes()).kernels.values():
            print(
                f"{path}: {k.name}: regs={k.registers} threads={k.threads} "
                f"instruction_words={k.instruction_words}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
