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


#: a slot word: bit 0 held, bit 1 maps inside, bits 2.. the ``%gridid`` of the launch whose CTA
#: built them (:func:`claim_slot`)
SLOT_HELD, SLOT_MAPS = 1, 2


def slot_words(slots: int, max_sms: int) -> int:
    """b64 words of a kernel's slot array: one a slot, ``slots`` an SM."""
    return slots * max_sms


def _tag(em, share: bool) -> str | int:
    """The free word of a slot holding this launch's maps (``%gridid``, unique to a launch in
    its context, shifted past the two flag bits), or 0 where maps are not shared."""
    if not share:
        return 0
    g = em.new("b64")
    em.ins(f"mov.u64 {g}, %gridid")
    em.ins(f"shl.b64 {g}, {g}, 2")
    em.ins(f"or.b64 {g}, {g}, {SLOT_MAPS}")
    return g


def claim_slot(
    em,
    words: str,
    slots: int,
    label_prefix: str = "claim",
    meanwhile=None,
    share: bool = False,
) -> tuple:
    """A per-SM tensor-map slot no other resident CTA holds, in the ``.global`` b64 array
    ``words`` (``slots`` words an SM, ``slots`` <= 32 resident CTAs: :func:`slot_words`).
    Returns (b32 register ``smid * slots + i``, predicate: the slot already holds this launch's
    maps, or None without ``share``). :func:`release_slot` frees it.

    A word is its flags (:data:`SLOT_HELD`, :data:`SLOT_MAPS`) and, with ``share``, the
    ``%gridid`` of the launch whose CTA built the maps inside. Every exchange is
    ``atom.acquire.gpu.cas``. The first guesses slot 0 free and holding this launch's maps
    (the common case: the CTA before on this SM was of the same launch); if it held them,
    the CTA uses them as they are: they equal what it would build, since ``share`` is only
    asked for where every map's fields are the same in every CTA of a launch
    (runtime/rewrite/ir_utils.launch_uniform). ``meanwhile()`` emits work that does not need
    the slot (the maps' construction) between that exchange and the use of its result, so the
    global round trip overlaps it. Where an SM has more than one slot, slot 1 is guessed by a
    second exchange at the same time (at occupancy 2 the neighbour holds one of the two); if
    both succeed, slot 1 is given back as it was. A free word holding other maps is taken with
    what it read; a held one sends the claim on to the SM's next slot (``nanosleep`` after a
    round of held words)."""
    smid, base, addr, off, got, expect, mine = (
        em.new(c) for c in ("b32", "b64", "b64", "b64", "b64", "b64", "b64")
    )
    i, p, low = em.new("b32"), em.new("pred"), em.new("b64")
    tag = _tag(em, share)
    em.ins(f"mov.u32 {smid}, %smid")
    em.ins(f"mul.wide.u32 {off}, {smid}, {8 * slots}")
    em.ins(f"mov.u64 {base}, {words}")
    em.ins(f"add.s64 {base}, {base}, {off}")
    em.ins(f"mov.b32 {i}, 0")
    em.ins(f"mov.b64 {expect}, {tag}")
    em.ins(f"or.b64 {mine}, {expect}, {SLOT_HELD}")
    em.ins(f"mov.b64 {addr}, {base}")
    em.ins(f"atom.acquire.gpu.global.cas.b64 {got}, [{addr}], {expect}, {mine}")
    if slots > 1:  # slot 1 guessed at the same time (its neighbour may hold slot 0)
        addr1, got1 = em.new("b64"), em.new("b64")
        em.ins(f"add.s64 {addr1}, {base}, 8")
        em.ins(f"atom.acquire.gpu.global.cas.b64 {got1}, [{addr1}], {expect}, {mine}")
    if meanwhile is not None:
        meanwhile()
    top, held, done = (em.new_label(label_prefix + x) for x in ("", "_held", "_done"))
    if slots > 1:
        first = em.new_label(label_prefix + "_first")
        em.ins(f"setp.eq.u64 {p}, {got1}, {expect}")
        em.ins(f"@!{p} bra {top}")  # (slot 1 not taken: slot 0's answer decides, as below)
        em.ins(f"setp.eq.u64 {p}, {got}, {expect}")
        em.ins(f"@!{p} bra {first}")
        # both taken: slot 1 back as it was (a release where it hands on the maps it holds)
        em.ins(f"st.{'release' if share else 'relaxed'}.gpu.global.b64 [{addr1}], {expect}")
        em.ins(f"bra {done}")
        em.label(first)
        em.ins(f"mov.b32 {i}, 1")
        em.ins(f"bra {done}")
    em.label(top)
    em.ins(f"setp.eq.u64 {p}, {got}, {expect}")
    em.ins(f"@{p} bra {done}")
    em.ins(f"and.b64 {low}, {got}, {SLOT_HELD}")
    em.ins(f"setp.ne.u64 {p}, {low}, 0")
    em.ins(f"@{p} bra {held}")
    # free, other maps inside: take it as it is
    em.ins(f"mov.b64 {expect}, {got}")
    em.ins(f"atom.acquire.gpu.global.cas.b64 {got}, [{addr}], {expect}, {mine}")
    em.ins(f"bra {top}")
    em.label(held)  # held by another CTA: the SM's next slot (a round of them: wait a little)
    em.ins(f"add.u32 {i}, {i}, 1")
    em.ins(f"setp.eq.u32 {p}, {i}, {slots}")
    em.ins(f"@{p} mov.b32 {i}, 0")
    em.ins(f"@{p} nanosleep.u32 256")
    em.ins(f"mad.wide.u32 {addr}, {i}, 8, {base}")
    em.ins(f"mov.b64 {expect}, {tag}")
    em.ins(f"atom.acquire.gpu.global.cas.b64 {got}, [{addr}], {expect}, {mine}")
    em.ins(f"bra {top}")
    em.label(done)
    slot = em.new("b32")
    em.ins(f"mad.lo.u32 {slot}, {smid}, {slots}, {i}")
    if not share:
        return slot, None
    hit = em.new("pred")
    em.ins(f"setp.eq.u64 {hit}, {expect}, {tag}")
    return slot, hit


def release_slot(em, words: str, slot: Operand, share: bool = False) -> None:
    """Free the claimed ``slot``: its word back to free, still naming this launch's maps
    where they are shared. The store is relaxed; with ``share`` the claiming thread issued
    ``fence.acq_rel.gpu`` after the maps were in place (:func:`maps_in_place`), which makes
    the two a release: a CTA that finds the word acquires the maps with it."""
    addr = em.new("b64")
    em.ins(f"mov.u64 {addr}, {words}")
    em.ins(f"mad.wide.u32 {addr}, {slot}, 8, {addr}")
    em.ins(f"st.relaxed.gpu.global.b64 [{addr}], {_tag(em, share)}")


def maps_in_place(em) -> None:
    """The claiming thread, once the slot's maps are in place (published by this CTA, or
    acquired with the slot): the release half of :func:`release_slot`'s store."""
    em.ins("fence.acq_rel.gpu")
