"""MLIR textual pass pipelines: ``builtin.module(cuda_tile.module(cuda_tile.entry(loop-split)))``.

An element with parentheses is an op anchor: its inner pipeline runs on every op of that name
directly nested in the current op (the outermost anchor must name the root op). Other elements
are passes (``name{key=value ...}``) or named pipelines from :mod:`pipelines`.
"""

from __future__ import annotations

from typing import Union

from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.ir import Operation
from tilegen.runtime.passes.pipelines import PIPELINES
from tilegen.runtime.passes.registry import PassFailure, load_passes
from tilegen.runtime.records import dataclass, field


class PipelineError(ValueError):
    """Malformed pipeline text or an unknown pass/option."""


@dataclass
class PassRef:
    name: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class Nest:
    anchor: str
    body: list[Union["Nest", PassRef]]


Element = Union[Nest, PassRef]


class _Parser:
    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def name(self) -> str:
        self.ws()
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] in "_-.$"
        ):
            self.pos += 1
        if start == self.pos:
            raise PipelineError(f"expected a pass or op name at offset {start} in '{self.text}'")
        return self.text[start : self.pos]

    def options(self) -> dict[str, str]:
        self.pos += 1  # '{'
        depth, start = 1, self.pos
        while self.pos < len(self.text) and depth:
            c = self.text[self.pos]
            depth += c == "{"
            depth -= c == "}"
            self.pos += 1
        if depth:
            raise PipelineError(f"unbalanced '{{' in '{self.text}'")
        return parse_options(self.text[start : self.pos - 1])

    def pipeline(self, closing: str) -> list[Element]:
        out: list[Element] = []
        if self.peek() in (closing, ""):
            return out
        while True:
            name = self.name()
            opts = self.options() if self.peek() == "{" else {}
            if self.peek() == "(":
                self.pos += 1
                out.append(Nest(name, self.pipeline(")")))
                if self.peek() != ")":
                    raise PipelineError(f"expected ')' at offset {self.pos} in '{self.text}'")
                self.pos += 1
            else:
                out.append(PassRef(name, opts))
            if self.peek() != ",":
                return out
            self.pos += 1


def parse_options(text: str) -> dict[str, str]:
    """``a=1 b="x y" c={...}`` -> dict (quotes stripped)."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            key, value, i = text[i:].split()[0], "true", n
            out[key] = value
            continue
        key = text[i:eq].strip()
        j = eq + 1
        if j < n and text[j] in "\"'":
            end = text.find(text[j], j + 1)
            end = n if end < 0 else end
            value, i = text[j + 1 : end], end + 1
        else:
            k = j
            while k < n and not text[k].isspace():
                k += 1
            value, i = text[j:k], k
        out[key] = value
    return out


def parse_pipeline(text: str) -> list[Element]:
    p = _Parser(text)
    out = p.pipeline("")
    if p.peek():
        raise PipelineError(f"unexpected '{p.peek()}' at offset {p.pos} in pipeline '{text}'")
    return out


def validate(elements: list[Element], _depth: int = 0) -> None:
    """Raise :class:`PipelineError` for unknown passes or options (before anything runs)."""
    passes = load_passes()
    for el in elements:
        if isinstance(el, Nest):
            validate(el.body, _depth)
        elif el.name in PIPELINES:
            if _depth > 8:
                raise PipelineError(f"pipeline '{el.name}' expands recursively")
            validate(parse_pipeline(PIPELINES[el.name]), _depth + 1)
        elif el.name not in passes:
            raise PipelineError(f"'{el.name}' does not refer to a registered pass or pass pipeline")
        else:
            try:
                passes[el.name].parse_options(el.options)
            except ValueError as e:
                raise PipelineError(str(e)) from None


def run_pipeline(root: Operation, elements: list[Element]) -> None:
    """Run ``elements`` on ``root``; a top-level anchor must name ``root``'s op."""
    validate(elements)
    passes = load_passes()
    for el in elements:
        if isinstance(el, Nest):
            if el.anchor != root.name:
                raise PipelineError(f"can't run '{el.anchor}' pass manager on '{root.name}' op")
            _run_nested(root, el.body, passes)
        else:
            _run_on(root, [el], passes)


def _run_nested(op: Operation, body: list[Element], passes) -> None:
    for el in body:
        if isinstance(el, Nest):
            for region in op.regions:
                for block in region.blocks:
                    for child in list(block.ops):
                        if child.name == el.anchor:
                            _run_nested(child, el.body, passes)
        else:
            _run_on(op, [el], passes)


def _run_on(op: Operation, refs: list[PassRef], passes) -> None:
    for ref in refs:
        if ref.name in PIPELINES:
            _run_nested(op, parse_pipeline(PIPELINES[ref.name]), passes)
            continue
        info = passes[ref.name]
        try:
            info.fn(op, info.parse_options(ref.options))
        except (PassFailure, PipelineError):
            raise
        except Exception as e:  # a pass bug must still end in a located diagnostic
            diag = Diagnostic(
                "error",
                f"pass '{ref.name}' failed: internal error: {type(e).__name__}: {e}",
                op.loc,
            )
            raise PassFailure([diag]) from e
