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
