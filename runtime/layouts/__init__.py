"""Layouts of the nv_tileas stage (docs/layouts.md): attributes, their syntax and assignment."""

from tilegen.runtime.layouts.attrs import (  # noqa: F401
    WARP_SIZE,
    BlockedLayout,
    DistributedLayout,
    Layout,
    LayoutError,
    SharedLayout,
    SliceLayout,
    default_blocked,
)
