"""TMA for the nv_tileas pipelines (docs/pipelines.md): stage layouts, tensor maps, bulk copies.

PTX forms (PTX ISA 8.x, each assembled by ptxas in tests/test_codegen_tma_pipeline.py):

* ``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst],
  [map, {c0, ...}], [mbar]`` - a box of the tensor (coordinates innermost first, in elements)
  lands in shared memory row-major (innermost fastest), swizzled; elements outside the tensor
  read as zero; the bytes are credited to ``mbar``'s transaction count.
* ``prefetch.tensormap [map]``.
* device-side maps: ``tensormap.replace.tile.<field>.shared::cta.b1024.<type>`` on a zeroed
  128-byte map in shared memory, ``tensormap.cp_fenceproxy.global.shared::cta.tensormap::
  generic.release.gpu.sync.aligned`` into a global slot, ``fence.proxy.tensormap::generic.
  acquire.gpu`` before the first copy through it.

The functions emit into an emitter with ``ins(text)``, ``new(cls)``, ``new_label(prefix)``,
``label(name)`` and ``need_isa(version)`` (runtime/codegen/core.py's Emitter, or the standalone
:class:`tilegen.runtime.codegen.pipeline.PtxBuilder`).
"""

from __future__ import annotations

from typing import Sequence, Union

from tilegen.runtime.records import dataclass

#: swizzle spans (bytes) a TMA copy and a wgmma/tcgen05 descriptor agree on
SWIZZLES = (0, 32, 64, 128)
#: CUtensorMapSwizzle codes (tensormap.replace .swizzle_mode)
SWIZZLE_CODE = {0: 0, 32: 1, 64: 2, 128: 3}
#: CUtensorMapDataType codes (tensormap.replace .elemtype) by tilegen element name; 8-bit
#: floats travel as u8
ELEMTYPE_CODE = {
    "i8": 0,
    "f8E4M3FN": 0,
    "f8E5M2": 0,
    "i16": 1,
    "i32": 3,
    "i64": 5,
    "f16": 6,
    "f32": 7,
    "f64": 9,
    "bf16": 10,
    "tf32": 11,
}
#: bytes of one CUtensorMap
TENSORMAP_BYTES = 128

Operand = Union[str, int]


def swizzle_span(inner_bytes: int) -> int:
    """The swizzle of a stage whose rows (the box's innermost extent) are ``inner_bytes``: the
    widest of 128/64/32 bytes that the row fills (a copy's row may not exceed its swizzle; wider
    rows are split in 128-byte columns by :func:`column_boxes`), else none."""
    for span in (128, 64, 32):
        if inner_bytes % span == 0:
            return span
    return 0


def swizzle_address(addr: int, span: int) -> int:
    """Physical shared address of logical ``addr`` in a stage written with swizzle ``span``:
    16-byte chunk bits [4, 4+b) XOR bits [7, 7+b), b = log2(span / 16). Stage buffers are
    aligned to ``8 * span`` bytes so the pattern starts at their first row."""
    if span == 0:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[span]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def swizzled_reg(em, off, span: int):
    """The physical byte offset (b32 register) of logical ``off`` in a buffer written with
    swizzle ``span`` (:func:`swizzle_address`; buffers are 1024-aligned)."""
    if span == 0:
        return off
    bits = {32: 1, 64: 2, 128: 3}[span]
    t = em.new("b32")
    em.ins(f"shr.u32 {t}, {off}, 7")
    em.ins(f"and.b32 {t}, {t}, {(1 << bits) - 1}")
    em.ins(f"shl.b32 {t}, {t}, 4")
    r = em.new("b32")
    em.ins(f"xor.b32 {r}, {off}, {t}")
    return r


@dataclass(frozen=True)
class TmaBox:
    """One TMA copy: ``box`` extents outermost first, ``elem`` a tilegen element name."""

    box: tuple
    elem_bytes: int
    swizzle: int

    @property
    def rank(self) -> int:
        return len(self.box)

    @property
    def inner_bytes(self) -> int:
        return self.box[-1] * self.elem_bytes

    @property
    def bytes(self) -> int:
        n = self.elem_bytes
        for d in self.box:
            n *= d
        return n

    @property
    def alignment(self) -> int:
        """Shared-memory alignment of its destination (the swizzle pattern repeats every 8
        rows; 128 bytes at least)."""
        return max(128, 8 * self.swizzle)


def column_boxes(tile: Sequence[int], elem_bytes: int) -> list[tuple[int, TmaBox]]:
    """The copies of one tile: [(inner element offset, box)]. Rows of at most 128 bytes are one
    box swizzled by their width; wider rows are cut into 128-byte columns (each box then covers
    every outer index of one column: smem holds the columns one after the other)."""
    tile = tuple(int(d) for d in tile)
    inner = tile[-1] * elem_bytes
    if inner <= 128:
        return [(0, TmaBox(tile, elem_bytes, swizzle_span(inner)))]
    if inner % 128:
        raise ValueError(f"a {inner}-byte tile row is not a multiple of 128 bytes")
    cols = 128 // elem_bytes
    return [(c * cols, TmaBox(tile[:-1] + (cols,), elem_bytes, 128)) for c in range(inner // 128)]


# --------------------------------------------------------------------------- copies


def tma_load(
    em,
    dst: Operand,
    tmap: Operand,
    coords: Sequence[Operand],
    mbar: Operand,
    pair: bool = False,
    multicast: Operand | None = None,
    pred: str | None = None,
) -> None:
    """``dst`` (shared address), ``tmap`` (generic address of the map: a param or global
    slot), ``coords`` innermost first (s32), ``mbar`` (shared address of the full barrier;
    with ``pair``, a shared::cluster address in either CTA of the pair: ``.cta_group::2``).
    ``multicast``: a b16 CTA mask, the box lands at ``dst``'s offset in each of those CTAs and
    completes on the barrier at ``mbar``'s offset there; ``pred`` guards the copy."""
    # sm_120 (no CTA pairs): the CTA's own window, ``.shared::cta`` (PTX 8.6). With
    # ``.shared::cluster`` ptxas guards each copy with a check of the destination's CTA and an
    # out-of-line call (a stack frame; setmaxnreg then ignored: docs/pipelines.md section 31)
    local = getattr(em, "sm", 0) == 120 and not pair and not multicast
    em.need_isa("8.6" if pair or local else "8.0")
    rank = len(coords)
    cs = ", ".join(str(c) for c in coords)
    mods = ".cta_group::2" if pair else ".multicast::cluster" if multicast else ""
    tail = f", {multicast}" if multicast else ""
    guard = f"@{pred} " if pred else ""
    space = "shared::cta" if local else "shared::cluster"
    em.ins(
        f"{guard}cp.async.bulk.tensor.{rank}d.{space}.global.tile.mbarrier::complete_tx"
        f"::bytes{mods} [{dst}], [{tmap}, {{{cs}}}], [{mbar}]{tail}"
    )


def tma_store(em, tmap: Operand, coords: Sequence[Operand], src: Operand) -> None:
    """Shared -> global box copy (epilogue stores); completes with ``bulk_commit``/``bulk_wait``."""
    em.need_isa("8.0")
    cs = ", ".join(str(c) for c in coords)
    em.ins(
        f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group [{tmap}, {{{cs}}}], [{src}]"
    )


def bulk_commit(em) -> None:
    em.ins("cp.async.bulk.commit_group")


def bulk_wait_read(em, pending: int = 0) -> None:
    """Wait until the shared sources of all but ``pending`` bulk groups were read."""
    em.ins(f"cp.async.bulk.wait_group.read {pending}")


def prefetch_tensormap(em, tmap: Operand) -> None:
    em.ins(f"prefetch.tensormap [{tmap}]")


def fence_proxy_async(em) -> None:
    """Generic-proxy shared writes before async-proxy reads (TMA store, wgmma, tcgen05)."""
    em.ins("fence.proxy.async.shared::cta")


# --------------------------------------------------------------------------- device-side maps


@dataclass(frozen=True)
class TensorMapSpec:
    """What a device-built map needs: registers or constants per field, innermost dim first."""

    elem: str
    elem_bytes: int
    #: b64 register: the tensor's base address
    base: Operand
    #: b32 per dimension (innermost first)
    dims: tuple
    #: b64 byte strides of dims 1.. (dim 0 is unit-stride)
    strides: tuple
    #: box extents innermost first
    box: tuple
    swizzle: int
    #: bytes the 128-byte swizzle moves as a unit: 16, or 32 (CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
    #: what tcgen05's 128B_BASE32B descriptors read: an MN-major tf32 operand)
    swizzle_atom: int = 16


def build_tensormap(em, smem_map: Operand, spec: TensorMapSpec) -> None:
    """Emit the device-side creation of one CUtensorMap in shared memory by one thread (the
    caller branches around it): zero the 128 bytes at ``smem_map`` (128-byte aligned) and write
    every field with tensormap.replace (rank - 1, dims and box innermost first, byte strides of
    dims 1.., unit element strides, element type, no interleave, swizzle, zero fill).
    :func:`publish_tensormap` then copies it to global memory."""
    em.need_isa("8.3")
    rank = len(spec.dims)
    z = em.new("b32")
    em.ins(f"mov.b32 {z}, 0")
    for off in range(0, TENSORMAP_BYTES, 16):
        em.ins(f"st.shared.v4.b32 [{smem_map}+{off}], {{{z}, {z}, {z}, {z}}}")
    r = "tensormap.replace.tile"
    sfx = "shared::cta.b1024"
    em.ins(f"{r}.global_address.{sfx}.b64 [{smem_map}], {spec.base}")
    em.ins(f"{r}.rank.{sfx}.b32 [{smem_map}], {rank - 1}")
    for i, d in enumerate(spec.dims):
        em.ins(f"{r}.global_dim.{sfx}.b32 [{smem_map}], {i}, {d}")
    for i, s in enumerate(spec.strides):
        em.ins(f"{r}.global_stride.{sfx}.b64 [{smem_map}], {i}, {s}")
    for i, b in enumerate(spec.box):
        em.ins(f"{r}.box_dim.{sfx}.b32 [{smem_map}], {i}, {b}")
    for i in range(rank):
        em.ins(f"{r}.element_stride.{sfx}.b32 [{smem_map}], {i}, 1")
    em.ins(f"{r}.elemtype.{sfx}.b32 [{smem_map}], {ELEMTYPE_CODE[spec.elem]}")
    em.ins(f"{r}.interleave_layout.{sfx}.b32 [{smem_map}], 0")
    em.ins(f"{r}.swizzle_mode.{sfx}.b32 [{smem_map}], {SWIZZLE_CODE[spec.swizzle]}")
    if spec.swizzle_atom == 32:  # .swizzle_atomicity 1: 32-byte atoms (PTX ISA 8.6)
        em.need_isa("8.6")
        em.ins(f"{r}.swizzle_atomicity.{sfx}.b32 [{smem_map}], 1")
    em.ins(f"{r}.fill_mode.{sfx}.b32 [{smem_map}], 0")


def publish_tensormap(em, global_slot: Operand, smem_map: Operand) -> None:
    """Copy a map built in shared memory to its global slot with the release fence of the
    tensormap proxy (a whole warp: ``.sync.aligned``)."""
    em.need_isa("8.3")
    em.ins(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
        f"[{global_slot}], [{smem_map}], {TENSORMAP_BYTES}"
    )


def acquire_tensormap(em, global_slot: Operand) -> None:
    """Before the first copy through a published map: the thread issuing copies acquires it."""
    em.need_isa("8.3")
    em.ins(f"fence.proxy.tensormap::generic.acquire.gpu [{global_slot}], {TENSORMAP_BYTES}")


def claim_slot(em, bitmap: str, slots: int, label_prefix: str = "claim", meanwhile=None) -> str:
    """A per-SM tensor-map slot no other resident CTA holds: atomically set a free bit of this
    SM's word in the ``.global`` array ``bitmap`` (one b32 per SM; ``slots`` <= 32 resident
    CTAs). Returns a b32 register with ``smid * slots + bit``. :func:`release_slot` frees it.

    The first ``atom.cas`` guesses the word empty (the common case: the SM's other CTAs, if
    any, left) and takes bit 0; ``meanwhile()`` emits work that does not need the slot (the
    maps' construction) between that exchange and the use of its result, so the global round
    trip overlaps it. A failed exchange returns the word, the next guess; only a full word is
    re-read (``ld.volatile``) until a bit frees."""
    smid, word, addr, old, bit, mask, new, got = (
        em.new(c) for c in ("b32", "b64", "b64", "b32", "b32", "b32", "b32", "b32")
    )
    p = em.new("pred")
    em.ins(f"mov.u32 {smid}, %smid")
    em.ins(f"mul.wide.u32 {word}, {smid}, 4")
    em.ins(f"mov.u64 {addr}, {bitmap}")
    em.ins(f"add.s64 {addr}, {addr}, {word}")
    em.ins(f"mov.b32 {bit}, 0")
    em.ins(f"atom.global.cas.b32 {got}, [{addr}], 0, 1")
    if meanwhile is not None:
        meanwhile()
    top, full, done = (em.new_label(label_prefix + x) for x in ("", "_full", "_done"))
    em.ins(f"setp.eq.u32 {p}, {got}, 0")
    em.ins(f"@{p} bra {done}")
    em.ins(f"mov.b32 {old}, {got}")
    em.label(top)
    em.ins(f"not.b32 {mask}, {old}")
    # lowest clear bit of old: the leading zeros of the bit-reversed complement (32 when full)
    em.ins(f"brev.b32 {mask}, {mask}")
    em.ins(f"clz.b32 {bit}, {mask}")
    em.ins(f"setp.ge.u32 {p}, {bit}, {slots}")
    em.ins(f"@{p} bra {full}")
    em.ins(f"shl.b32 {mask}, 1, {bit}")
    em.ins(f"or.b32 {new}, {old}, {mask}")
    em.ins(f"atom.global.cas.b32 {got}, [{addr}], {old}, {new}")
    em.ins(f"setp.eq.u32 {p}, {got}, {old}")
    em.ins(f"@{p} bra {done}")
    em.ins(f"mov.b32 {old}, {got}")
    em.ins(f"bra {top}")
    em.label(full)  # every slot held: wait until a CTA frees one
    em.ins(f"ld.volatile.global.u32 {old}, [{addr}]")
    em.ins(f"bra {top}")
    em.label(done)
    slot = em.new("b32")
    em.ins(f"mad.lo.u32 {slot}, {smid}, {slots}, {bit}")
    return slot


def release_slot(em, bitmap: str, slot: Operand, slots: int) -> None:
    smid, bit, mask, word, addr, old = (
        em.new(c) for c in ("b32", "b32", "b32", "b64", "b64", "b32")
    )
    em.ins(f"div.u32 {smid}, {slot}, {slots}")
    em.ins(f"rem.u32 {bit}, {slot}, {slots}")
    em.ins(f"shl.b32 {mask}, 1, {bit}")
    em.ins(f"not.b32 {mask}, {mask}")
    em.ins(f"mul.wide.u32 {word}, {smid}, 4")
    em.ins(f"mov.u64 {addr}, {bitmap}")
    em.ins(f"add.s64 {addr}, {addr}, {word}")
    em.ins(f"atom.global.and.b32 {old}, [{addr}], {mask}")
