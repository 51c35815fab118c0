"""Custom verifier hooks: math ops. Empty while spec rules declare every check."""
