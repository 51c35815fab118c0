"""``fuse-fma`` lives in :mod:`canonicalize` (same driver, the ``fuse_fma`` pattern set)."""

from tilegen.runtime.passes import canonicalize  # noqa: F401
