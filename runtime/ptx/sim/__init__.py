"""CPU SIMT simulator for one CTA at a time; instruction semantics from spec/ptx."""

from tilegen.runtime.ptx.sim.cta import PtxSimError, run_cta

__all__ = ["PtxSimError", "run_cta"]
