"""MLIR textual syntax for tilegen IR: ``parse_module`` and ``print_module``.

Submodules: ``lexer`` (tokens), ``parser`` (OpParser, the OpAsmParser counterpart), ``printer``
(OpPrinter), ``type_syntax`` / ``attr_syntax`` (types, attributes, locations), ``format``
(declarative assembly formats), ``custom_ops`` / ``dense`` / ``result_names`` (custom op syntax).
Imports are lazy so that ``import tilegen.runtime.asm`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.ir import Operation


def parse_module(
    text: str,
    filename: str = "<stdin>",
    *,
    no_implicit_module: bool = False,
    allow_unregistered: bool = False,
    verify_types: bool = True,
) -> "Operation":
    """Parse MLIR text into an op tree; raises DiagnosticError (file:line:col) on bad input.

    Without ``no_implicit_module`` the ops are wrapped in a ``builtin.module`` (unless the file
    holds exactly one ``builtin.module``); with it, the file must hold exactly one op.
    """
    from tilegen.runtime.asm.parser import OpParser

    from tilegen.runtime.limits import deep_stack

    p = OpParser(text, filename, allow_unregistered=allow_unregistered, verify_types=verify_types)
    try:  # on a deep stack (runtime/limits.py): nesting is bounded by MAX_NESTING, not Python
        return deep_stack(p.parse_top_level, no_implicit_module=no_implicit_module)
    except RecursionError:
        from tilegen.runtime.diagnostics import Diagnostic, DiagnosticError

        raise DiagnosticError(Diagnostic("error", "nesting too deep", p.loc())) from None


def print_module(
    op: "Operation",
    *,
    generic: bool = False,
    debuginfo: bool = False,
    body_only: bool = False,
    default_dialect: str = "",
    alias_mnemonics: bool = False,
) -> str:
    """Print ``op`` as ``cuda-tile-opt`` does (``-mlir-print-op-generic`` with ``generic``,
    ``--mlir-print-debuginfo`` with ``debuginfo``). ``body_only`` prints the ops of ``op``'s
    regions without ``op`` itself, and ``default_dialect="cuda_tile"`` strips the dialect prefix
    at top level too: together they reproduce ``tileirdisasm``'s layout. ``alias_mnemonics`` prints
    ops under their spec text alias (``pow`` as ``fpowf``), as ``tileirdisasm`` 13.5 does."""
    return "".join(
        print_pieces(
            op,
            generic=generic,
            debuginfo=debuginfo,
            body_only=body_only,
            default_dialect=default_dialect,
            alias_mnemonics=alias_mnemonics,
        )
    )


def print_pieces(
    op: "Operation",
    *,
    generic: bool = False,
    debuginfo: bool = False,
    body_only: bool = False,
    default_dialect: str = "",
    alias_mnemonics: bool = False,
) -> list[str]:
    """:func:`print_module`'s text as a list of pieces, for writers that stream them out (a
    large module's text is then held once, not joined into a second copy)."""
    from tilegen.runtime.asm.printer import OpPrinter
    from tilegen.runtime.limits import deep_stack

    pr = OpPrinter(generic=generic, debuginfo=debuginfo, alias_mnemonics=alias_mnemonics)
    return deep_stack(pr.print_pieces, op, body_only=body_only, default_dialect=default_dialect)


__all__ = ["parse_module", "print_module", "print_pieces"]
