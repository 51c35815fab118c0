"""tests/paths.py and conftest.py: where shared inputs are found, and which skips are refused."""

from __future__ import annotations

import pytest

import conftest
import paths
from tilegen.runtime import paths as runtime_paths


@pytest.mark.parametrize(
    "reason",
    [
        "cuTile corpus not present",
        "shared corpus not on this machine",
        "../shared/reference not present",
        "cuda-tile conformance tests not on this machine",
        "shared conformance suite not present",
        "seeds not available",
        "/somewhere/shared not available",
    ],
)
def test_skips_for_a_missing_shared_input_are_recognised(reason):
    assert conftest._SHARED_REASON.search(reason)


@pytest.mark.parametrize(
    "reason",
    [
        "no GPU: no CUDA driver: libcuda.so.1: cannot open shared object file: No such file",
        "torch is not installed",
        "tcgen05 (sm_100 tensor-memory MMA) is not simulated",
        "needs shared memory of 228 KiB",
    ],
)
def test_other_skips_are_left_alone(reason):
    assert not conftest._SHARED_REASON.search(reason)


def test_tilegen_shared_overrides_the_sibling_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(runtime_paths.ENV, str(tmp_path))
    assert runtime_paths.shared_dir() == tmp_path.resolve()
    assert runtime_paths.corpus_out() == tmp_path.resolve() / "corpus" / "cutile" / "out"
    monkeypatch.setenv(runtime_paths.ENV, str(tmp_path / "absent"))
    assert runtime_paths.shared_dir() is None
    assert not runtime_paths.corpus_dir().exists()  # a path that answers as a missing input


def test_shared_files_refuses_an_empty_match_when_shared_is_present(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "SHARED", tmp_path)
    (tmp_path / "a.mlir").write_text("")
    assert paths.shared_files(tmp_path, "*.mlir") == [tmp_path / "a.mlir"]
    with pytest.raises(FileNotFoundError, match="matches nothing"):
        paths.shared_files(tmp_path, "*.tileirbc")
    monkeypatch.setattr(paths, "SHARED", None)
    assert paths.shared_files(tmp_path, "*.tileirbc") == []
