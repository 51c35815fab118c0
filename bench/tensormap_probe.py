"""What a CUtensorMap holds, byte by byte: the driver's encoding beside tilegen's device build.

tilegen builds its TMA maps on the device (docs/pipelines.md section 4): 128 zeroed bytes in
shared memory, every field written with ``tensormap.replace``. PTX has no ``tensormap.replace``
field for the L2 promotion the driver's ``cuTensorMapEncodeTiled`` takes, and the map's bit
layout is not documented. This probe reads both, on a GPU machine:

* ``--build DIR`` (here, with ptxas): a small sm_90a kernel that builds maps exactly as
  ``runtime/codegen/tma.build_tensormap`` does (optionally with one 32-bit word of the zeroed
  map preset first) and publishes them with ``tensormap.cp_fenceproxy``; its cubin goes to DIR.
* ``--run DIR`` (on the GPU machine, ctypes on libcuda): the driver's encodings of the same
  maps with each L2 promotion (none, 64, 128, 256 bytes) and each out-of-bounds fill, the
  device-built maps read back, and the bytes where they differ, as JSON on stdout.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path

KERNEL = "tensormap_probe"

#: (name, dims innermost first, byte stride of dim 1, box innermost first); f16, 128-byte swizzle
CASES = [
    ("a4096", (4096, 4096), 8192, (64, 128)),
    ("a8192", (8192, 8192), 16384, (64, 128)),
    ("small", (64, 64), 128, (64, 64)),
]
#: a 32-bit word preset in the zeroed map before the replaces: (name, byte offset, value)
PRESETS = [("none", 8, 0), ("tileiras_word", 8, 0x246312)]


def ptx() -> str:
    """The probe kernel: thread 0 builds one f16 2-D map with 128-byte swizzle in shared memory,
    the warp publishes it to ``out``."""
    r = "tensormap.replace.tile"
    s = "shared::cta.b1024"
    lines = [
        ".version 8.3",
        ".target sm_90a",
        ".address_size 64",
        f".visible .entry {KERNEL}(.param .u64 out, .param .u64 base, .param .u32 d0,",
        "    .param .u32 d1, .param .u64 stride, .param .u32 b0, .param .u32 b1,",
        "    .param .u32 preset_off, .param .u32 preset)",
        "{",
        "  .reg .b32 %r<12>;",
        "  .reg .b64 %rd<6>;",
        "  .reg .pred %p<2>;",
        "  .shared .align 128 .b8 map[128];",
        "  ld.param.u64 %rd1, [out];",
        "  ld.param.u64 %rd2, [base];",
        "  ld.param.u32 %r1, [d0];",
        "  ld.param.u32 %r2, [d1];",
        "  ld.param.u64 %rd3, [stride];",
        "  ld.param.u32 %r3, [b0];",
        "  ld.param.u32 %r4, [b1];",
        "  ld.param.u32 %r5, [preset_off];",
        "  ld.param.u32 %r6, [preset];",
        "  mov.u32 %r7, map;",
        "  mov.u32 %r8, %tid.x;",
        "  setp.ne.u32 %p1, %r8, 0;",
        "  @%p1 bra DONE;",
        "  mov.b32 %r9, 0;",
        *[f"  st.shared.v4.b32 [%r7+{o}], {{%r9, %r9, %r9, %r9}};" for o in range(0, 128, 16)],
        "  add.u32 %r10, %r7, %r5;",
        "  st.shared.b32 [%r10], %r6;",
        f"  {r}.global_address.{s}.b64 [%r7], %rd2;",
        f"  {r}.rank.{s}.b32 [%r7], 1;",
        f"  {r}.global_dim.{s}.b32 [%r7], 0, %r1;",
        f"  {r}.global_dim.{s}.b32 [%r7], 1, %r2;",
        f"  {r}.global_stride.{s}.b64 [%r7], 0, %rd3;",
        f"  {r}.box_dim.{s}.b32 [%r7], 0, %r3;",
        f"  {r}.box_dim.{s}.b32 [%r7], 1, %r4;",
        f"  {r}.element_stride.{s}.b32 [%r7], 0, 1;",
        f"  {r}.element_stride.{s}.b32 [%r7], 1, 1;",
        f"  {r}.elemtype.{s}.b32 [%r7], 6;",
        f"  {r}.interleave_layout.{s}.b32 [%r7], 0;",
        f"  {r}.swizzle_mode.{s}.b32 [%r7], 3;",
        f"  {r}.fill_mode.{s}.b32 [%r7], 0;",
        "DONE:",
        "  bar.warp.sync -1;",
        "  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%rd1], [%r7], 128;",
        "  ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def build(out: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check import nvidia_tool

    out.mkdir(parents=True, exist_ok=True)
    (out / "tensormap_probe.ptx").write_text(ptx())
    ptxas = nvidia_tool("ptxas")
    if ptxas is None:
        raise SystemExit("tensormap_probe: ptxas is not installed")
    cubin = out / "tensormap_probe.cubin"
    cmd = [str(ptxas), "-arch=sm_90a", str(out / "tensormap_probe.ptx"), "-o", str(cubin)]
    subprocess.run(cmd, check=True)
    return cubin


class _Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.ok(self.lib.cuInit(0))
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.ok(self.lib.cuDeviceGet(ctypes.byref(dev), 0))
        self.ok(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        self.ok(self.lib.cuCtxSetCurrent(ctx))

    def ok(self, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(f"CUDA driver error {rc}")

    def alloc(self, n: int) -> int:
        p = ctypes.c_uint64()
        self.ok(self.lib.cuMemAlloc_v2(ctypes.byref(p), n))
        return p.value

    def encode(self, base, dims, stride, box, promotion: int, fill: int = 0) -> bytes:
        m = (ctypes.c_uint64 * 16)()  # 128 bytes, 64-byte aligned by ctypes' array of u64
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        self.ok(
            self.lib.cuTensorMapEncodeTiled(
                ctypes.byref(m),
                6,  # CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                2,
                ctypes.c_void_p(base),
                (u64 * 2)(*dims),
                (u64 * 1)(stride),
                (u32 * 2)(*box),
                (u32 * 2)(1, 1),
                0,  # interleave none
                3,  # swizzle 128B
                promotion,
                fill,
            )
        )
        return bytes(m)

    def device_built(self, cubin: Path, base, dims, stride, box, preset: tuple) -> bytes:
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(self.lib.cuModuleLoadData(ctypes.byref(mod), cubin.read_bytes()))
        self.ok(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, KERNEL.encode()))
        out = self.alloc(128)
        self.ok(self.lib.cuMemsetD8_v2(ctypes.c_uint64(out), 0xAB, 128))
        vals = [
            ctypes.c_uint64(out),
            ctypes.c_uint64(base),
            ctypes.c_uint32(dims[0]),
            ctypes.c_uint32(dims[1]),
            ctypes.c_uint64(stride),
            ctypes.c_uint32(box[0]),
            ctypes.c_uint32(box[1]),
            ctypes.c_uint32(preset[1]),
            ctypes.c_uint32(preset[2]),
        ]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        self.ok(self.lib.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None))
        self.ok(self.lib.cuCtxSynchronize())
        host = (ctypes.c_uint8 * 128)()
        self.ok(self.lib.cuMemcpyDtoH_v2(host, ctypes.c_uint64(out), 128))
        return bytes(host)


def _words(b: bytes) -> list[str]:
    return [f"{int.from_bytes(b[i:i + 4], 'little'):08x}" for i in range(0, 128, 4)]


def _diff(a: bytes, b: bytes) -> dict:
    return {
        f"+{i * 4:#04x}": [x, y] for i, (x, y) in enumerate(zip(_words(a), _words(b))) if x != y
    }


def run(payload: Path) -> dict:
    cuda = _Cuda()
    base = cuda.alloc(1 << 20)  # 16-byte aligned; the maps are only encoded, never used
    res = {"cases": {}}
    for name, dims, stride, box in CASES:
        row = {"driver": {}, "device": {}}
        for promo in range(4):
            row["driver"][f"l2_{promo}"] = _words(cuda.encode(base, dims, stride, box, promo))
        row["driver"]["fill_nan"] = _words(cuda.encode(base, dims, stride, box, 0, 1))
        for preset in PRESETS:
            built = cuda.device_built(
                payload / "tensormap_probe.cubin", base, dims, stride, box, preset
            )
            row["device"][preset[0]] = _words(built)
        d0 = cuda.encode(base, dims, stride, box, 0)
        row["device_vs_driver_l2_0"] = _diff(
            d0,
            bytes.fromhex(
                "".join(w[6:8] + w[4:6] + w[2:4] + w[0:2] for w in row["device"]["none"])
            ),
        )
        for promo in (1, 2, 3):
            row[f"driver_l2_0_vs_l2_{promo}"] = _diff(
                d0, cuda.encode(base, dims, stride, box, promo)
            )
        res["cases"][name] = row
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", type=Path, help="write the probe's PTX and cubin here (ptxas)")
    p.add_argument("--run", type=Path, help="run the probe of this directory on the GPU")
    args = p.parse_args(argv)
    if args.build:
        print(build(args.build))
    if args.run:
        print(json.dumps(run(args.run), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
