"""Custom verifier hooks: arith ops. Empty while spec rules declare every check."""
