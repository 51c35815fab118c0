"""Virtual registers: one counter per PTX register class; ptxas does the real allocation.

Every register the emitter names has one class (``b32``, ``b64``, ...), recorded here, so an
instruction can be typed from its operands: :meth:`RegAlloc.class_of` is how index arithmetic
picks its width (runtime/codegen/core.py, "index values")."""

from __future__ import annotations

from typing import Optional

PREFIX = {"pred": "p", "b32": "r", "b64": "rd", "f32": "f", "f64": "fd", "b16": "h", "b8": "c"}


class RegAlloc:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._class: dict[str, str] = {}

    def new(self, cls: str) -> str:
        n = self.counts.get(cls, 0)
        self.counts[cls] = n + 1
        name = f"%{PREFIX[cls]}{n}"
        self._class[name] = cls
        return name

    def fixed(self, name: str, cls: str) -> str:
        """Record a register declared by hand (the thread id, the shared base) as ``cls``."""
        self._class[name] = cls
        return name

    def class_of(self, x) -> Optional[str]:
        """The class of register ``x``; None for an immediate (an int, ``0f...``)."""
        return self._class.get(x) if isinstance(x, str) else None

    def declarations(self) -> list[str]:
        out = []
        for cls, n in self.counts.items():
            ptype = "pred" if cls == "pred" else cls
            out.append(f"\t.reg .{ptype} \t%{PREFIX[cls]}<{n}>;")
        return out
