"""The warm compile server (tilegen/server.py): a request served by it behaves like a fresh
process (same bytes written, same exit code and messages, the client's working directory)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilegen import server

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "vec_add.mlir"


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A server on a private socket folder; stopped (and its process ended) afterwards."""
    folder = tmp_path_factory.mktemp("srv")
    os.chmod(folder, 0o700)
    saved = {k: os.environ.get(k) for k in ("TILEGEN_SERVER", "TILEGEN_SERVER_DIR")}
    os.environ.update(TILEGEN_SERVER="1", TILEGEN_SERVER_DIR=str(folder))
    proc = subprocess.Popen([sys.executable, "-m", "tilegen.server"], env=dict(os.environ))
    path = server.socket_path()
    deadline = time.monotonic() + 120
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert os.path.exists(path), f"server did not start (exit {proc.poll()})"
        yield path
    finally:
        server.stop()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cold(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TILEGEN_SERVER="0")
    code = "import sys; from tilegen.tools.tileiras import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code] + args, cwd=cwd, env=env, capture_output=True, text=True
    )


def test_served_compile_writes_the_same_cubin_relative_to_client_cwd(warm, tmp_path, monkeypatch):
    ref = cold(["--gpu-name=sm_90", str(KERNEL), "-o", "cold.cubin"], tmp_path)
    assert ref.returncode == 0, ref.stderr
    monkeypatch.chdir(tmp_path)
    rc = server.run_remote("tileiras", ["--gpu-name=sm_90", str(KERNEL), "-o", "warm.cubin"])
    assert rc == 0  # None would mean it ran nowhere
    assert (tmp_path / "warm.cubin").read_bytes() == (tmp_path / "cold.cubin").read_bytes()


def test_served_error_has_the_cold_exit_code_and_message(warm, tmp_path, capfd):
    args = ["--gpu-name=sm_99", str(KERNEL), "-o", str(tmp_path / "x.cubin")]
    ref = cold(args, tmp_path)
    capfd.readouterr()
    rc = server.run_remote("tileiras", args)
    out, err = capfd.readouterr()
    assert (rc, err) == (ref.returncode, ref.stderr)
    assert rc == 1 and "sm_99" in err


def test_served_tilegen_compile(warm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = server.run_remote("cli", ["compile", str(KERNEL), "--gpu-name=sm_90", "-o", "k.ptx"])
    assert rc == 0
    assert ".target sm_90" in (tmp_path / "k.ptx").read_text()


def test_a_changed_source_makes_the_server_stale(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    seen = {str(f): os.stat(f).st_mtime_ns}
    assert not server._stale(seen)
    os.utime(f, ns=(0, os.stat(f).st_mtime_ns + 1_000_000))
    assert server._stale(seen)


def test_a_source_changed_while_the_server_loaded_it_is_stale(monkeypatch):
    """A module changed between the server's import of it and its reading of the mtimes: the
    server must not take the new mtime for the code it loaded (it once served old options with
    new modules imported in the child: "'CompileOptions' object has no attribute ...")."""
    import time

    import tilegen.server as srv

    before = srv._loaded_sources()
    f = srv.__file__
    assert before[f] > 0
    # the server started loading just before this file's (pretended) change
    seen = srv._loaded_sources(since_ns=before[f] - 1)
    assert seen[f] == -1 and srv._stale(seen)
    # a server that started after every change sees its sources as they are
    fresh = srv._loaded_sources(since_ns=time.time_ns() + 10**9)
    assert not srv._stale(fresh)


def test_off_switch_and_missing_server(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGEN_SERVER", "0")
    assert server.run_remote("tileiras", ["--version"]) is None
    monkeypatch.setenv("TILEGEN_SERVER", "1")
    monkeypatch.setenv("TILEGEN_SERVER_DIR", str(tmp_path / "none"))
    assert server.run_remote("tileiras", ["--version"]) is None  # no socket: run locally


def test_a_folder_others_can_write_is_never_used(tmp_path, monkeypatch):
    shared = tmp_path / "open"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("TILEGEN_SERVER_DIR", str(shared))
    assert server.socket_path() is None


def test_sigterm_removes_the_socket(tmp_path, monkeypatch):
    import signal

    folder = tmp_path / "srv"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("TILEGEN_SERVER", "1")
    monkeypatch.setenv("TILEGEN_SERVER_DIR", str(folder))
    proc = subprocess.Popen([sys.executable, "-m", "tilegen.server"], env=dict(os.environ))
    path = server.socket_path()
    deadline = time.monotonic() + 120
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.exists(path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path)
    assert server.run_remote("tileiras", ["--version"]) is None
