"""Custom verifier hooks: values ops. Empty while spec rules declare every check."""
