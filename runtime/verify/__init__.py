"""The verifier: type constraints, declarative spec rules, traits and named custom hooks.

Contract (other engines and hook authors rely on it):

* :func:`verify_module` ``(op, diag, options=None) -> bool`` verifies ``op`` and everything nested
  in MLIR's order. Per op: operand/result/region counts, attribute presence and constraints,
  operand then result type constraints, region constraints, ODS predicate rules (``same_type`` ...),
  native traits, the op's ``verify()`` rules and ``{custom: NAME}`` hooks in spec order; then its
  regions (blocks, terminators, nested ops); then region hooks (``@hook(NAME, regions=True)``).
  The first error of an op ends that op's checks; like MLIR, the first failing op ends the walk
  (ops that are isolated from above, e.g. ``entry``, are verified independently, as MLIR's
  parallel verifier does); SSA dominance is checked last (``operand #0 does not dominate this
  use``).
* :class:`VerifyOptions` ``(unsupported_hints=False, err_hints=False)``.
* Hooks: ``from tilegen.runtime.verify.hooks import hook``; ``@hook("name") def _(op, ctx)``.
* :func:`tilegen.runtime.verify.types.verify_type` ``(t) -> Optional[str]``: the message for an
  invalid dialect type, for the parser to report at the type's location.
* Declarative rule kinds: :mod:`tilegen.runtime.verify.rules`; type/attribute constraints:
  spec/types/constraints.yaml via :mod:`tilegen.runtime.verify.constraints`; NVIDIA's own
  verifier as an oracle for unquoted texts: :mod:`tilegen.runtime.verify.oracle`.
"""

from tilegen.runtime.verify.context import VerifyContext, VerifyOptions
from tilegen.runtime.verify.engine import verify_module, verify_op

__all__ = ["VerifyContext", "VerifyOptions", "verify_module", "verify_op"]
