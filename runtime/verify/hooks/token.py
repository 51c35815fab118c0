"""Custom verifier hooks: token ops."""

from __future__ import annotations

from tilegen.runtime.ir import Operation
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook


@hook("join_tokens")
def _join_tokens(op: Operation, ctx: VerifyContext) -> None:
    if len(ctx.operands("tokens")) < 2:
        ctx.error("expect two or more tokens")
