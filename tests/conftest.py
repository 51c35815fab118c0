"""Suite-wide plumbing: shared inputs (tests/paths.py) and the rule that they never skip silently.

* ``@needs_shared(path, ...)`` (marker ``shared_input``): skip with a reason when there is no
  shared directory; fail when there is one but ``path`` is missing.
* Safety net: with the shared directory present, any skip whose reason speaks of a shared input
  (corpus, conformance suite, seeds, reference) is reported as a failure.
* ``TILEGEN_REQUIRE_SHARED=1`` (set by ``.ci/run``) makes a missing shared directory an error.
* ``--full-sweeps``: random sweeps run at their full size (the ``sweep`` fixture scales sample
  counts down by :data:`SWEEP_DIVISOR` otherwise); the few exhaustive sets too heavy for every
  run (all 65536 f16/bf16 patterns) are a fixed sample covering every category unless
  ``--full-sweeps`` (fixture ``full_sweeps``); edge-case sets never shrink.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paths import ABSENT, SHARED  # noqa: E402

# every test process (and every command it starts) compiles cold: no warm compile server
# (tilegen/server.py); tests/test_server.py turns it on for itself
os.environ["TILEGEN_SERVER"] = "0"

#: random-sample sweeps run at 1/SWEEP_DIVISOR of their size unless ``--full-sweeps`` is given
SWEEP_DIVISOR = 8

#: skip reasons that mean "a shared input is missing"
_SHARED_REASON = re.compile(
    r"\.\./shared|TILEGEN_SHARED|/shared\b|\bshared (corpus|conformance|suite|tests?|inputs?)"
    r"|corpus|conformance|\bseeds\b",
    re.I,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full-sweeps",
        action="store_true",
        help="run random-sample sweeps at their full size (default: 1/%d)" % SWEEP_DIVISOR,
    )


@pytest.fixture(scope="session")
def full_sweeps(pytestconfig: pytest.Config) -> bool:
    """Whether ``--full-sweeps`` was given (exhaustive sets that are sampled by default)."""
    return bool(pytestconfig.getoption("--full-sweeps"))


@pytest.fixture(scope="session")
def sweep(pytestconfig: pytest.Config):
    """``sweep(n)``: how many random samples a sweep of nominal size ``n`` draws in this run."""
    full = pytestconfig.getoption("--full-sweeps")
    return lambda n: n if full else max(1, n // SWEEP_DIVISOR)


#: modules that take longest (``--durations``, summed per file, Nov 2026), run first: with
#: ``-n auto --dist loadscope`` a module stays on one worker, so starting the long ones early
#: keeps one worker from finishing a long module alone at the end. Order only; a name missing
#: here costs balance, never coverage.
LONGEST_FIRST = (
    "test_gpu_check.py",
    "test_ptxsim_corpus.py",
    "test_cutile_e2e.py",
    "test_cta_size.py",
    "test_conformance.py",
    "test_codegen_pipeline.py",
    "test_codegen_reduce.py",
    "test_conversion_roundtrip.py",
    "test_codegen_families.py",
    "test_codegen_sass.py",
    "test_codegen_wgmma.py",
    "test_asm_hostile.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: in-file order kept


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "shared_input(*paths): the test reads these paths under ../shared"
    )
    if SHARED is None and os.environ.get("TILEGEN_REQUIRE_SHARED") == "1":
        raise pytest.UsageError(f"TILEGEN_REQUIRE_SHARED=1 but {ABSENT}")


def pytest_report_header(config: pytest.Config) -> str:
    if SHARED is None:
        return f"shared inputs: none ({ABSENT}); tests that need them skip"
    return f"shared inputs: {SHARED} (a missing input fails)"


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("shared_input"):
        if SHARED is None:
            pytest.skip(f"needs ../shared ({ABSENT})")
        missing = [p for p in mark.args if not Path(p).exists()]
        if missing:
            pytest.fail(f"../shared is present ({SHARED}) but lacks {', '.join(missing)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if SHARED is None or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
    if _SHARED_REASON.search(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped for a missing shared input although {SHARED} is present: {reason}"
        )
