"""The one target-name rule: which ``--gpu-name`` values tilegen accepts, everywhere.

The names NVIDIA ``tileiras`` 13.5 accepts (:data:`GPU_NAMES`, from ``tileiras --help``), plus
the arch-specific ``a`` and family-specific ``f`` variants ptxas 13 has for them
(:data:`TARGET_NAMES`; ``ptxas --help``). ``sm_90a`` emits ``.target sm_90a`` and assembles with
``-arch=sm_90a``. A leaf module with no imports: the tools' ``--help`` reads it at start-up.
"""

GPU_NAMES = (
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_107",
    "sm_110",
    "sm_120",
    "sm_121",
)
#: suffix -> the compute capabilities ptxas has that variant for
VARIANTS = {"a": (90, 100, 103, 107, 110, 120, 121), "f": (100, 103, 107, 110, 120, 121)}
#: every accepted name: each tileiras name followed by its variants
TARGET_NAMES = tuple(
    n
    for base in GPU_NAMES
    for n in (base,) + tuple(base + s for s in VARIANTS if int(base[3:]) in VARIANTS[s])
)


class Target:
    """A GPU target: ``sm`` the compute capability (90), ``suffix`` "", "a" or "f"."""

    __slots__ = ("sm", "suffix")

    def __init__(self, sm: int, suffix: str = ""):
        object.__setattr__(self, "sm", sm)
        object.__setattr__(self, "suffix", suffix)

    def __setattr__(self, name, value):
        raise AttributeError("Target is immutable")

    @property
    def name(self) -> str:
        return f"sm_{self.sm}{self.suffix}"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Target({self.name!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Target) and (self.sm, self.suffix) == (other.sm, other.suffix)

    def __hash__(self) -> int:
        return hash((self.sm, self.suffix))


def target_from_name(name) -> "Target | None":
    """The :class:`Target` a name in :data:`TARGET_NAMES` stands for; None for any other value."""
    if not isinstance(name, str) or name not in TARGET_NAMES:
        return None
    body = name[3:]
    suffix = body[-1] if body[-1].isalpha() else ""
    return Target(int(body[: len(body) - len(suffix)]), suffix)


def bad_target_message(name) -> str:
    """The one-line error for a name outside :data:`TARGET_NAMES`."""
    shown = name if isinstance(name, str) and len(name) <= 40 else repr(name)[:40]
    names = ", ".join(TARGET_NAMES)
    return f"GPU architecture '{shown}' is not supported by tilegen; supported: {names}"


#: a CTA's largest shared memory per compute capability (bytes; CUDA's
#: sharedMemPerBlockOptin): sm_80/87 163 KB, sm_86/89/120 99 KB, sm_90/100/103/110 227 KB
SHARED_OPTIN = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448}
#: static ``.shared`` ptxas allows a kernel on a target without the ``a`` suffix
STATIC_SHARED_PLAIN = 48 * 1024


def shared_optin(sm: "int | None") -> int:
    """Largest shared memory of one CTA on ``sm`` (dynamic, opted in; sm_90's when unknown)."""
    if sm is None:
        return SHARED_OPTIN[90]
    if sm in SHARED_OPTIN:
        return SHARED_OPTIN[sm]
    return SHARED_OPTIN[100] if 100 <= sm < 120 else SHARED_OPTIN[86]


#: reserved per resident CTA out of the SM's shared memory (CUDA's reservedSharedMemPerBlock)
SHARED_RESERVED_PER_CTA = 1024


def occupancy_shared(sm: "int | None", occupancy: "int | None") -> int:
    """Shared memory one CTA may take so that ``occupancy`` CTAs fit on an SM: the SM's
    (opt-in plus the reserve) over ``occupancy``, less the reserve; :func:`shared_optin` for
    no hint or 1 (tileiras's occupancy-2 GEMM takes 107,648 of sm_90's 115,712)."""
    whole = shared_optin(sm)
    if not occupancy or occupancy < 2:
        return whole
    per_sm = whole + SHARED_RESERVED_PER_CTA
    return min(whole, per_sm // occupancy - SHARED_RESERVED_PER_CTA)


#: the ptxas option tileiras 13.5 passes on every target (captured from its ptxas call): static
#: ``.shared`` may then take the CTA's whole opt-in shared memory on any target (ptxas 13.5:
#: sm_80/87 166,912 B, sm_86/89/120 101,376, sm_90/100 232,448; without it 48 KiB except on
#: ``a`` targets). runtime/ptxas.py passes it on every assembly.
EXTENDED_SMEM_FLAG = "--enable-extended-smem=true"


def static_shared_limit(sm: int, suffix: str) -> int:
    """Bytes of static ``.shared`` a kernel for ``.target sm_<sm><suffix>`` may take: on an
    arch-specific ``a`` target the CTA's whole opt-in shared memory (ptxas: 0x38c00 on
    sm_90a/100a/103a/110a, 0x18c00 on sm_120a/121a); on a target with no ``a`` variant (sm_80,
    86, 87, 89) the same through :data:`EXTENDED_SMEM_FLAG`, as tileiras builds its sm_80
    GEMMs (147,456 B); else 48 KiB (a target with an ``a`` variant switches to it instead:
    codegen/emit.py ``_fit_static_shared``)."""
    if (suffix == "a" and sm in VARIANTS["a"]) or sm not in VARIANTS["a"]:
        return shared_optin(sm)
    return STATIC_SHARED_PLAIN
