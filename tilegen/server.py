"""A warm compile server for ``tilegen-tileiras`` and ``tilegen compile``, started on demand.

A command-line compile spends most of its time importing the compiler and warming it up (module
loading, the op registries, the lazily compiled record methods), not compiling. So the first
``tilegen-tileiras`` / ``tilegen compile`` call runs in its own process as before and then starts
a server in the background; later calls connect to it over a per-user Unix socket, pass their
``stdin``/``stdout``/``stderr`` file descriptors, working directory, environment and arguments,
and the server *forks* a child from its warm state that runs the very same ``main(argv)`` with
those descriptors (so output, exit codes and written files are those of a fresh process, global
state is never shared between compiles, and concurrent calls run in parallel). Nothing has to be
set up by the user.

* The socket lives in ``$TILEGEN_SERVER_DIR``, else ``$XDG_RUNTIME_DIR/tilegen``, else
  ``<temp dir>/tilegen-<uid>`` (``$TMPDIR`` or ``/tmp``; created 0700; a directory another
  user owns or others can write to is never used). Its name is keyed by the interpreter and tilegen's source folder.
* The server exits after :data:`IDLE_SECONDS` without a request, and as soon as a request finds
  one of its loaded tilegen modules changed on disk (that request then runs locally, and a new
  server starts).
* ``TILEGEN_SERVER=0`` turns it off (the test suite sets it: every test process is cold);
  ``TILEGEN_SERVER_IDLE=SECONDS`` shortens the idle time.
  ``python -m tilegen.server --stop`` stops the server of this installation.

The client side (:func:`run_remote`) imports only ``os``, ``sys``, ``socket`` and ``json``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Optional

#: seconds a server waits for the next request before it exits
IDLE_SECONDS = 900
#: entry points the server runs: name -> (module, function taking argv)
ENTRIES = {
    "tileiras": ("tilegen.tools.tileiras", "main"),
    "cli": ("tilegen.cli", "main"),
}
_MAX_HEADER = 1 << 20


def enabled() -> bool:
    return os.environ.get("TILEGEN_SERVER", "1") not in ("0", "")


def _temp_dir() -> str:
    """The system's temporary folder (``$TMPDIR`` first, as :mod:`tempfile` decides)."""
    import tempfile  # only when neither TILEGEN_SERVER_DIR nor XDG_RUNTIME_DIR is set

    return tempfile.gettempdir()


def _private_dir() -> Optional[str]:
    """The socket folder, created 0700 if missing; None if it is not ours alone."""
    base = os.environ.get("TILEGEN_SERVER_DIR")
    if not base:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        base = (
            os.path.join(runtime, "tilegen")
            if runtime
            else os.path.join(_temp_dir(), f"tilegen-{os.getuid()}")
        )
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        st = os.stat(base)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def socket_path() -> Optional[str]:
    """This installation's socket (interpreter + tilegen's folder in the name)."""
    import zlib

    folder = _private_dir()
    if folder is None:
        return None
    pkg = os.path.dirname(os.path.abspath(__file__))
    key = zlib.crc32(f"{sys.executable}\0{pkg}\0{sys.version}".encode())
    return os.path.join(folder, f"srv-{key:08x}.sock")


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _send_msg(conn: socket.socket, obj, fds=()) -> None:
    data = json.dumps(obj).encode()
    payload = len(data).to_bytes(4, "little") + data
    if fds:
        socket.send_fds(conn, [payload], list(fds))
    else:
        conn.sendall(payload)


def _recv_msg(conn: socket.socket, with_fds: int = 0):
    if with_fds:
        head, fds, _, _ = socket.recv_fds(conn, 4, with_fds)
        if len(head) < 4:
            head += _recv_exact(conn, 4 - len(head))
    else:
        head, fds = _recv_exact(conn, 4), []
    n = int.from_bytes(head, "little")
    if n > _MAX_HEADER:
        raise ConnectionError("message too large")
    return json.loads(_recv_exact(conn, n)), fds


# ----------------------------------------------------------------------------- client


def run_remote(entry: str, argv: list[str]) -> Optional[int]:
    """Run ``entry`` (a key of :data:`ENTRIES`) with ``argv`` in the warm server; its exit code,
    or None when there is no usable server (the caller then runs locally and calls
    :func:`start`)."""
    if not enabled():
        return None
    path = socket_path()
    if path is None or not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"entry": entry, "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}
        sys.stdout.flush()
        sys.stderr.flush()
        _send_msg(conn, request, fds=(0, 1, 2))
        reply, _ = _recv_msg(conn)
    except (OSError, ValueError, ConnectionError):
        conn.close()
        return None
    if reply.get("status") != "accepted":
        conn.close()  # stale server (it exits): run here
        return None
    try:  # from here on the compile runs in the server: never run it a second time
        reply, _ = _recv_msg(conn)
        return int(reply["rc"])
    except KeyboardInterrupt:  # the served compile runs to its end; this process stops now
        return 130
    except (OSError, ValueError, KeyError, ConnectionError):
        sys.stderr.write("tilegen: the compile server ended without an exit code\n")
        return 70
    finally:
        conn.close()


def start() -> None:
    """Start this installation's server in the background (it exits at once if one runs)."""
    if not enabled() or socket_path() is None:
        return
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, "-m", "tilegen.server"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        pass


def stop() -> bool:
    """Ask this installation's server to exit; whether one answered."""
    path = socket_path()
    if path is None or not os.path.exists(path):
        return False
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        _send_msg(conn, {"stop": True})
        _recv_msg(conn)
        return True
    except (OSError, ValueError, ConnectionError):
        return False
    finally:
        conn.close()


# ----------------------------------------------------------------------------- server


#: a source changed this little before the server started loading may have been read in its
#: older form (file systems with coarse mtimes): such a server is stale from the start
MTIME_SLACK_NS = 2_000_000_000


def _loaded_sources(since_ns: int = 0) -> dict[str, int]:
    """mtime of every loaded tilegen module's source (a change makes the server stale). A source
    changed after ``since_ns`` (the server's start, minus :data:`MTIME_SLACK_NS`) counts as
    changed already: the server may have imported it before the change and then read the new
    mtime, which would hide the change."""
    out = {}
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and name.startswith("tilegen"):
            try:
                mtime = os.stat(f).st_mtime_ns
            except OSError:
                mtime = -1
            out[f] = -1 if since_ns and mtime >= since_ns else mtime
    return out


def _stale(sources: dict[str, int]) -> bool:
    for f, mtime in sources.items():
        try:
            if os.stat(f).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _warm_up() -> None:
    """Import every stage and compile a small kernel once (the first-call costs: records'
    methods, regexes, handler tables), output discarded."""
    import importlib

    # the entry points, what they import on their first compile (the API, the bytecode reader),
    # and numpy (the layout exchange's plans use it: ~100-200 ms of a cold compile that needs it)
    for module in [m for m, _ in ENTRIES.values()] + [
        "tilegen.api",
        "tilegen.commands.compile",
        "tilegen.runtime.bytecode.reader",
        "tilegen.runtime.bytecode.writer",
        "numpy",
        "numpy.ma",
    ]:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    from tilegen.runtime import driver

    text = (
        "cuda_tile.module @warm {\n"
        "  entry @k(%p: !cuda_tile.tile<ptr<f32>>) {\n"
        "    %t = make_tensor_view %p, shape = [128], strides = [1]"
        " : tensor_view<128xf32, strides=[1]>\n"
        "    %v = make_partition_view %t : partition_view<tile=(128), tensor_view<128xf32,"
        " strides=[1]>>\n"
        "    %b = constant <i32: 0> : tile<i32>\n"
        "    %x, %tk = load_view_tko weak %v[%b] : partition_view<tile=(128), tensor_view<128xf32,"
        " strides=[1]>>, tile<i32> -> tile<128xf32>, token\n"
        "    %y = addf %x, %x rounding<nearest_even> : tile<128xf32>\n"
        "    %tk2 = store_view_tko weak %y, %v[%b] : tile<128xf32>, partition_view<tile=(128),"
        " tensor_view<128xf32, strides=[1]>>, tile<i32> -> token\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    try:
        from tilegen.runtime.options import CompileOptions

        c = driver.compile_source(text, CompileOptions(target="sm_90"), name="warm.mlir")
        from tilegen.runtime.bytecode.writer import write_bytecode

        data = write_bytecode(driver.load(text, name="warm.mlir"))
        from tilegen import api

        api.compile(data, "sm_90", cache=False, name="warm.tileirbc")
        del c
    except Exception:  # noqa: BLE001 - warm-up only; a real request reports its own errors
        pass


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the client's process and run its command."""
    import gc
    import importlib
    import io

    gc.disable()  # a short-lived child: collecting would touch (and copy) the inherited heap
    rc = 70
    try:
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        enc = sys.getfilesystemencoding()
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=enc)
        for name, fd in (("stdout", 1), ("stderr", 2)):
            tty = os.isatty(fd)
            stream = io.TextIOWrapper(
                io.FileIO(fd, "w", closefd=False),
                encoding=enc,
                errors="backslashreplace" if fd == 2 else "strict",
                line_buffering=tty or fd == 2,
                write_through=fd == 2,
            )
            setattr(sys, name, stream)
        module, func = ENTRIES[request["entry"]]
        prog = {"tileiras": "tilegen-tileiras", "cli": "tilegen"}[request["entry"]]
        sys.argv = [prog] + list(request["argv"])
        try:
            rc = getattr(importlib.import_module(module), func)(list(request["argv"]))
            rc = 0 if rc is None else int(rc)
        except SystemExit as e:  # argparse exits
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, OSError):
            pass
    except BaseException as e:  # noqa: BLE001 - report, never hang the client
        try:
            os.write(2, f"tilegen: compile server error: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
    try:
        _send_msg(conn, {"rc": rc})
    except OSError:
        pass
    os._exit(0)


def serve(path: str, idle: Optional[float] = None) -> int:
    """Bind ``path`` (one server per path: a lock file decides) and serve until idle."""
    import fcntl
    import signal

    lock = open(path + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server owns this path
    if idle is None:
        try:
            idle = float(os.environ.get("TILEGEN_SERVER_IDLE") or IDLE_SECONDS)
        except ValueError:
            idle = IDLE_SECONDS
    import time

    started = time.time_ns() - MTIME_SLACK_NS
    _warm_up()
    sources = _loaded_sources(started)
    import gc

    gc.collect()
    gc.freeze()  # the warm heap is never scanned again: a child does not copy it page by page
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    listener.settimeout(idle)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill PID: clean up the socket
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                return 0
            conn.settimeout(30)
            fds: list[int] = []
            try:
                request, fds = _recv_msg(conn, with_fds=3)
                if request.get("stop"):
                    _send_msg(conn, {"status": "stopping"})
                    return 0
                if _stale(sources) or request.get("entry") not in ENTRIES or len(fds) != 3:
                    _send_msg(conn, {"status": "stale"})
                    if _stale(sources):
                        return 0
                    continue
                _send_msg(conn, {"status": "accepted"})
                conn.settimeout(None)
                if os.fork() == 0:
                    listener.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    _child(conn, request, fds)
            except (OSError, ValueError, ConnectionError):
                pass
            finally:
                for fd in fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                conn.close()
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        lock.close()


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--stop"]:
        return 0 if stop() else 1
    path = socket_path()
    if path is None:
        return 1
    return serve(path)


if __name__ == "__main__":
    sys.exit(main())
