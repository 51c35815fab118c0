"""Virtual registers: one counter per PTX register class; ptxas does the real allocation."""

from __future__ import annotations

PREFIX = {"pred": "p", "b32": "r", "b64": "rd", "f32": "f", "f64": "fd", "b16": "h"}


class RegAlloc:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def new(self, cls: str) -> str:
        n = self.counts.get(cls, 0)
        self.counts[cls] = n + 1
        return f"%{PREFIX[cls]}{n}"

    def declarations(self) -> list[str]:
        out = []
        for cls, n in self.counts.items():
            ptype = "pred" if cls == "pred" else cls
            out.append(f"\t.reg .{ptype} \t%{PREFIX[cls]}<{n}>;")
        return out
