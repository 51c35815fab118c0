# Site configuration: where the (unmodified, read-only) shared tests are and where outputs go.
# Run `lit conformance/` or `lit conformance/Dialect/CudaTile/arith.mlir` from the repo root;
# lit maps a path under this directory onto the same path under the shared test root.
import os

_here = os.path.dirname(os.path.abspath(__file__))
config.tilegen_repo = os.path.dirname(_here)
_shared = os.environ.get("TILEGEN_SHARED") or os.path.join(config.tilegen_repo, "..", "shared")
config.test_source_root = os.environ.get("TILEGEN_CONFORMANCE_TESTS") or os.path.normpath(
    os.path.join(_shared, "conformance", "cuda-tile", "test")
)
config.test_exec_root = os.environ.get("TILEGEN_LIT_EXEC_ROOT") or os.path.join(
    config.tilegen_repo, "build", "conformance"
)

lit_config.load_config(config, os.path.join(_here, "lit.cfg.py"))
