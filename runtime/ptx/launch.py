"""Launch a PTX entry over a grid in the SIMT simulator with the cuTile calling convention:
each array argument becomes (pointer, shape..., strides... in elements), each scalar one param,
each list of arrays (``ArrayList``) (pointer to its item table, length)."""

from __future__ import annotations

import re
import struct
import sys

import numpy as np

from functools import lru_cache

from tilegen.runtime.interp.calling import ArrayList, list_table
from tilegen.runtime.ptx import assemble as _assemble
from tilegen.runtime.ptx.check import check_module
from tilegen.runtime.ptx.parser import Addr, Entry, Module, Sym, parse_ptx
from tilegen.runtime.ptx.sim import tensormap
from tilegen.runtime.ptx.sim.banks import BankStats
from tilegen.runtime.ptx.sim.cta import CtaState, PtxSimError, run_cta
from tilegen.runtime.ptx.sim.memory import Heap

__all__ = ["ArrayList", "PtxSimError", "flat_params", "flatten_args", "run_ptx"]


def flat_params(args: list, place) -> list:
    """cuTile's flattened parameter values for ``args``: each array as (``place(array)`` -- its
    device address --, shape..., strides in elements...), each 0-d array as its scalar, each
    :class:`ArrayList` as (``place(table)``, length), its items placed first, in order, and the
    table (runtime/interp/calling.list_table) holding their addresses."""
    flat = []
    for a in args:
        if isinstance(a, ArrayList):
            addrs = [place(np.ascontiguousarray(x)) for x in a.items]
            flat += [place(list_table(addrs, a.items)), len(a.items)]
            continue
        a = np.asarray(a)
        if a.ndim == 0:
            flat.append(a.item())
            continue
        c = np.ascontiguousarray(a)
        flat += [place(c), *c.shape, *(s // c.itemsize for s in c.strides)]
    return flat


def flatten_args(args: list, heap: Heap) -> tuple[list, list]:
    """Flat param values for `args`, and for each array argument the (address, array) written
    to `heap` (for an :class:`ArrayList`, a list of those, one per item)."""
    placed = []

    def place(c: np.ndarray) -> int:
        addr = heap.alloc(c.nbytes)
        heap.write(addr, c.tobytes())
        placed.append((addr, c))
        return addr

    flat = flat_params(args, place)
    arrays, it = [], iter(placed)
    for a in args:
        if isinstance(a, ArrayList):
            arrays.append([next(it) for _ in a.items])
            next(it)  # its table
        elif np.asarray(a).ndim:
            arrays.append(next(it))
    return flat, arrays


def _pack(value, ptype: str) -> bytes:
    size = int(re.sub(r"\D", "", ptype) or 8) // 8
    if ptype.startswith("f") or isinstance(value, float):
        return struct.pack("<f" if size == 4 else "<d", float(value))
    return (int(value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def _block(entry: Entry) -> tuple[int, int, int]:
    dims = entry.directives.get("reqntid") or entry.directives.get("maxntid")
    if not dims:
        raise PtxSimError(f"entry {entry.name}: no .reqntid/.maxntid; block size unknown")
    return tuple((list(dims) + [1, 1])[:3])


def _cluster(entry: Entry) -> tuple[int, int, int]:
    """The entry's cluster shape (``.reqnctapercluster``; 1 x 1 x 1 without one)."""
    dims = entry.directives.get("reqnctapercluster") or [1]
    return tuple((list(dims) + [1, 1])[:3])


def _ctas(grid: tuple, cluster: tuple, clusters: bool, entry: Entry, file: str) -> tuple:
    """(the CTA grid, every CTA's coordinates in launch order): cluster by cluster, the CTAs of
    one cluster in rank order (x fastest), so a batch of whole clusters holds each cluster's
    CTAs side by side. ``clusters`` (``.blocksareclusters``): ``grid`` counts clusters."""
    if clusters:
        grid = tuple(g * c for g, c in zip(grid, cluster))
    elif any(g % c for g, c in zip(grid, cluster)):
        raise PtxSimError(
            f"{file}: entry {entry.name}: grid {grid} is not a multiple of its cluster shape "
            f"{cluster}"
        )
    cx, cy, cz = cluster
    coords = []
    for z in range(0, grid[2], cz):
        for y in range(0, grid[1], cy):
            for x in range(0, grid[0], cx):
                for k in range(cz):
                    for j in range(cy):
                        for i in range(cx):
                            coords.append((x + i, y + j, z + k))
    return grid, coords


def _explicit_maps(entry: Entry, args: list, arrays: list, nflat: int, maps, file: str):
    """Tensor maps from the caller's host-side descriptions, one per hidden param in order:
    {"array": index into `args`, "box": [outermost .. innermost], "swizzle": 0/32/64/128,
    "swizzle_atom": 16 (default) or 32 (128-byte swizzle of 32-byte atoms), "oob": "zero"
    (default) or "nan"}."""
    hidden = entry.params[nflat:]
    if len(maps) != len(hidden):
        raise PtxSimError(
            f"{file}: entry {entry.name} has {len(hidden)} tensor-map params, "
            f"{len(maps)} tensor maps were given"
        )
    index, k = {}, 0
    for i, a in enumerate(args):
        if isinstance(a, ArrayList):
            k += 1  # list items are addressed through their table, never by a tensor map
        elif np.asarray(a).ndim > 0:
            index[i] = arrays[k]
            k += 1
    out = []
    for m in maps:
        try:
            addr, arr = index[int(m["array"])]
            oob = m.get("oob", "zero")
            if oob not in ("zero", "nan"):
                raise ValueError(f"oob must be 'zero' or 'nan', got {oob!r}")
            out.append(
                tensormap.encode(
                    addr,
                    arr,
                    m.get("box"),
                    int(m.get("swizzle", 0)),
                    oob_nan=oob == "nan",
                    swizzle_atom=int(m.get("swizzle_atom", 16)),
                )
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PtxSimError(f"{file}: bad tensor map description {m!r}: {e}") from None
    return out


def _tensor_maps(entry: Entry, args: list, arrays: list, nflat: int, file: str) -> list[bytes]:
    """Tensor maps for hidden `.b8 [128]` params: tileiras passes one per array it loads with
    TMA, in order; those are the arrays whose own pointer param the kernel never reads."""
    hidden = entry.params[nflat:]
    if not hidden:
        return []
    if any(v.size != 128 for v in hidden):
        raise PtxSimError(
            f"{file}: entry {entry.name} has {len(entry.params)} params, the arguments "
            f"flatten to {nflat}, and the extra ones are not 128-byte tensor maps"
        )
    used = {
        op.base.name
        for ins in entry.body
        for op in ins.operands
        if isinstance(op, Addr) and isinstance(op.base, Sym)
    } | {op.name for ins in entry.body for op in ins.operands if isinstance(op, Sym)}
    pos, unread = 0, []
    it = iter(arrays)
    for a in args:
        if isinstance(a, ArrayList):
            next(it)
            pos += 2
            continue
        a = np.asarray(a)
        if a.ndim == 0:
            pos += 1
            continue
        addr, arr = next(it)
        if entry.params[pos].name not in used:
            unread.append(tensormap.encode(addr, arr))
        pos += 1 + 2 * a.ndim
    if len(unread) != len(hidden):
        raise PtxSimError(
            f"{file}: {len(hidden)} tensor-map params but {len(unread)} arrays the kernel "
            "does not address directly; cannot tell which array each map describes"
        )
    return unread


@lru_cache(maxsize=32)
def load(ptx: str, file: str = "<ptx>", check: bool = True) -> Module:
    """Parse (and, with `check`, operand-check: runtime/ptx/check.py) PTX once per text."""
    module = parse_ptx(ptx, file)
    if check:
        check_module(module, file)
    return module


#: at most this many lanes (threads of all CTAs simulated side by side)
BATCH_LANES = 4096


def _batch(entry: Entry, block: tuple, strict_async: bool) -> int:
    """How many CTAs to simulate side by side. CTAs are independent, so running several as one
    wider SIMT state (each with its own shared memory, barriers, tensor memory) is one valid
    interleaving, and costs about one CTA's interpreter overhead. One at a time where order is
    observable or tracked: printf output (ordered per CTA), the strict modes, and CTAs that are
    not whole warpgroups."""
    from tilegen.runtime.ptx.sim import tensor_ops

    threads = block[0] * block[1] * block[2]
    if strict_async or tensor_ops.STRICT_CP_ASYNC or threads % 128:
        return 1
    if any(ins.opcode.startswith("call") for ins in entry.body):
        return 1
    shared = sum(v.size + v.align for v in entry.shared) + 1024
    return max(1, min(BATCH_LANES // threads, (64 << 20) // shared))


class Context:
    """What outlives a launch, as in a CUDA context with the module loaded: the heap and the
    module's ``.global`` variables (allocated and initialized at the first launch that names
    them), and the launches' ``%gridid`` numbers. Successive :func:`run_ptx` calls with one
    context see each other's globals; without one, each call has its own."""

    def __init__(self) -> None:
        self.heap = Heap()
        self.globals: dict[str, int] = {}
        self.launches = 0

    def next_gridid(self) -> int:
        self.launches += 1
        return self.launches


def run_ptx(
    ptx: str,
    args: list,
    grid,
    entry_name: str | None = None,
    file: str = "<ptx>",
    max_steps: int = 2_000_000,
    stdout=None,
    tensor_maps: list | None = None,
    *,
    check: bool = True,
    assemble: bool | None = None,
    ptxas_flags: tuple = (),
    strict_async: bool = False,
    bank_stats: dict | None = None,
    context: Context | None = None,
    gridid: int | None = None,
) -> list[np.ndarray]:
    """Run `entry_name` (default: the only entry) on `args`; returns every array argument's
    contents after the launch, in argument order (scalars omitted; for an :class:`ArrayList`,
    the list of its items' contents). `tensor_maps` describes the hidden CUtensorMap params
    (see `_explicit_maps`); without it they are inferred for 1-D copies only.

    Nothing runs that ptxas would refuse: `check` applies the load-time operand rules of
    runtime/ptx/check.py, and `assemble` assembles the PTX with ptxas for its `.target`
    (runtime/ptx/assemble.py, cached per text; `ptxas_flags` are extra options its producer
    assembles it with): True requires ptxas, None (the default) uses it whenever it is
    installed, False skips it.

    `strict_async` keeps asynchronous operations (TMA and bulk copies, tcgen05.mma, wgmma's
    operand reads) in flight until something forces them, and checks every access against them
    (runtime/ptx/sim/hazards.py): reads before the mbarrier phase completes, missing
    fence.proxy.async, expect-tx byte counts that differ from the bytes delivered, and stages
    overwritten while still being read. Off by default: operations complete at issue.

    `bank_stats` (a dict) collects each shared-memory access line's wavefronts beside the
    fewest it could take (runtime/ptx/sim/banks.py: bank conflicts, per PTX line).

    `context` (a :class:`Context`) keeps the heap and the module's globals from one call to the
    next; each launch takes the context's next ``%gridid`` unless `gridid` names one."""
    if assemble is None:
        assemble = _assemble.find_ptxas() is not None
    module = load(ptx, file, check)
    if assemble:
        _assemble.require_assembles(ptx, file, tuple(ptxas_flags))
    if entry_name is None:
        if len(module.entries) != 1:
            raise PtxSimError(f"{file}: expected one .entry, found {len(module.entries)}")
        entry_name = next(iter(module.entries))
    entry = module.entries.get(entry_name)
    if entry is None:
        raise PtxSimError(f"{file}: no entry named {entry_name!r}")
    context = context or Context()
    heap = context.heap
    if gridid is None:
        gridid = context.next_gridid()
    flat, arrays = flatten_args(args, heap)
    if tensor_maps is not None:
        flat += _explicit_maps(entry, args, arrays, len(flat), tensor_maps, file)
    else:
        flat += _tensor_maps(entry, args, arrays, len(flat), file)
    params, addr = {}, 0x100
    for var, value in zip(entry.params, flat):
        params[var.name] = (addr, value if isinstance(value, bytes) else _pack(value, var.type))
        addr += 256
    gvars = context.globals
    for var in module.globals:
        if var.name in gvars:  # (an earlier launch in this context allocated it)
            continue
        gvars[var.name] = heap.alloc(var.size, max(var.align, 1))
        width = var.size // max(len(var.init), 1) if var.init else 1
        raw = b"".join(int(v).to_bytes(width, "little", signed=v < 0) for v in var.init)
        heap.write(gvars[var.name], raw[: var.size])
    grid = tuple((list(int(g) for g in grid) + [1, 1])[:3])
    block = _block(entry)
    cluster = _cluster(entry)
    csize = cluster[0] * cluster[1] * cluster[2]
    grid, coords = _ctas(grid, cluster, "blocksareclusters" in entry.directives, entry, file)
    # the CTAs of a cluster run side by side (they share memory and barriers): whole clusters
    per = max(1, _batch(entry, block, strict_async) // csize) * csize
    for i in range(0, len(coords), per):
        group = coords[i : i + per]
        st = CtaState(
            entry,
            heap,
            params,
            block,
            group[0],
            grid,
            globals=gvars,
            strict_async=strict_async,
            more_ctas=tuple(group[1:]),
            cluster=cluster,
            gridid=gridid,
        )
        if bank_stats is not None:
            st.bank_stats = BankStats(bank_stats)
        run_cta(st, max_steps, file)
        for text in st.printed:
            print(text, end="", file=stdout or sys.stdout)

    def read(addr: int, arr: np.ndarray) -> np.ndarray:
        return np.frombuffer(heap.read(addr, arr.nbytes), arr.dtype).reshape(arr.shape)

    return [[read(*x) for x in a] if isinstance(a, list) else read(*a) for a in arrays]
