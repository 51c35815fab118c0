"""Registry of named custom verifier hooks (``verify: [{custom: NAME}]`` in the spec).

A hook module registers functions with :func:`hook`::

    from tilegen.runtime.verify.hooks import hook

    @hook("load_view_tko")
    def _(op: Operation, ctx: VerifyContext) -> None:
        if ...:
            ctx.error("...")

Hooks run in the op's ``verify()`` phase (after type constraints, ODS predicate traits and native
traits) in spec order; a hook that emits an error stops the op's later checks. Region-level
checks (MLIR's ``verifyRegions``) register with ``@hook(NAME, regions=True)`` and run after
every nested op verified.
"""

from __future__ import annotations

from typing import Callable

#: name -> (function, runs after regions)
HOOKS: dict[str, tuple[Callable, bool]] = {}


def hook(name: str, regions: bool = False) -> Callable[[Callable], Callable]:
    """Register ``fn(op, ctx)`` as the custom verifier ``name``."""

    def register(fn: Callable) -> Callable:
        if name in HOOKS:
            raise ValueError(f"verifier hook {name!r} registered twice")
        HOOKS[name] = (fn, regions)
        return fn

    return register


def get_hook(name: str) -> tuple[Callable, bool] | None:
    return HOOKS.get(name)


# Every hook module; importing one registers its hooks. Keep one import line per module.
# (arith/math/conversion/core-value checks are all declarative spec rules: no hook module.)
from tilegen.runtime.verify.hooks import shape  # noqa: E402,F401
from tilegen.runtime.verify.hooks import atomics  # noqa: E402,F401
from tilegen.runtime.verify.hooks import control_flow  # noqa: E402,F401
from tilegen.runtime.verify.hooks import debug  # noqa: E402,F401
from tilegen.runtime.verify.hooks import debuginfo  # noqa: E402,F401
from tilegen.runtime.verify.hooks import hints  # noqa: E402,F401
from tilegen.runtime.verify.hooks import memory  # noqa: E402,F401
from tilegen.runtime.verify.hooks import mma  # noqa: E402,F401
from tilegen.runtime.verify.hooks import reduction  # noqa: E402,F401
from tilegen.runtime.verify.hooks import structure  # noqa: E402,F401
from tilegen.runtime.verify.hooks import token  # noqa: E402,F401
from tilegen.runtime.verify.hooks import views  # noqa: E402,F401
from tilegen.runtime.verify.hooks import nv_tileaa  # noqa: E402,F401
from tilegen.runtime.verify.hooks import nv_tileas  # noqa: E402,F401
from tilegen.runtime.verify.hooks import convert_layout  # noqa: E402,F401
