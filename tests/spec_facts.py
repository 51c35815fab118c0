"""Counts and names read from spec/ itself, so tests pin the spec's facts, never today's numbers."""

from __future__ import annotations

from functools import lru_cache

import yaml

from paths import REPO


@lru_cache(maxsize=None)
def spec_op_names(dialect: str, include_test_only: bool = False) -> frozenset[str]:
    """``dialect.name`` of every op spec/ops/<dialect>/*.yaml declares (test-only files and ops
    left out unless asked for)."""
    out = set()
    for path in sorted((REPO / "spec" / "ops" / dialect).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for op in doc["ops"]:
            if include_test_only or not (doc.get("test_only") or op.get("test_only")):
                out.add(f"{doc['dialect']}.{op['name']}")
    return frozenset(out)
