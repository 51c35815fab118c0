"""Every command README.md shows runs as shown.

The ``sh`` blocks are split into commands (``\\`` continuations joined) and run in README order
with bash, in a scratch directory laid out like the repository (``examples/``,
``conformance/``, ``.venv`` linked; ``../shared`` linked to the shared directory), with the
venv's ``bin`` first on ``PATH`` and a scratch ``HOME`` and compile cache: later commands read
what earlier ones wrote, as a reader following the README would. A command must exit 0, or
with the code its comment names (``# exit 2: ...``), and print no traceback. The ``python``
blocks run the same way. :data:`SKIP` lists what is not run, each with the reason; every entry
must still match a README command.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TILEGEN_SHARED") or ROOT.parent / "shared")
README = ROOT / "README.md"

#: command prefix -> why the test does not run it
SKIP = {
    "make setup": "creates the virtual environment this suite runs in",
    "make demo": "tests/test_cli_demo.py runs the same seven stages in process",
    "make test": "the test suite itself",
    "make conformance": "reruns NVIDIA's whole lit suite and rewrites its results page (minutes)",
    "python -m tilegen.conformance --no-write": "NVIDIA's whole lit suite (minutes)",
}
# (the suite's own test of that lit run is tests/test_conformance.py)


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced ``sh`` / ``python`` block."""
    return [
        (m.group(1), m.group(2))
        for m in re.finditer(r"^```(sh|python)\n(.*?)^```", text, re.M | re.S)
    ]


def _commands(body: str) -> list[str]:
    out, cur = [], ""
    for line in body.splitlines():
        cur += line
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    return out


def _steps() -> list[tuple[str, str]]:
    """("sh" | "python", command or script), in README order."""
    steps = []
    for lang, body in _blocks(README.read_text()):
        if lang == "python":
            steps.append(("python", body))
        else:
            steps += [("sh", c) for c in _commands(body)]
    return steps


STEPS = _steps()


def _skip_reason(lang: str, cmd: str):
    if lang == "sh":
        for prefix, why in SKIP.items():
            if cmd.startswith(prefix):
                return why
        if "../shared" in cmd and not SHARED.is_dir():
            return f"needs {SHARED} (the cuTile corpus), absent here"
    if lang == "python" and "cuda.tile" in cmd:
        try:
            import cuda.tile  # noqa: F401
        except ImportError:
            return "cuTile Python (the cutile extra) is not installed"
    return None


def _expected_exit(cmd: str) -> int:
    m = re.search(r"#\s*exit (\d+)", cmd)
    return int(m.group(1)) if m else 0


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Run every step once, in order; returns step index -> (rc, stdout, stderr)."""
    base = tmp_path_factory.mktemp("readme")
    work, home = base / "work", base / "home"
    work.mkdir()
    home.mkdir()
    for name in ("examples", "conformance", ".venv"):
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    if SHARED.is_dir():
        (base / "shared").symlink_to(SHARED)
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "HOME": str(home),
        "TILEGEN_CACHE_DIR": str(base / "cache"),
        "TILEGEN_CONFORMANCE_TESTS": str(SHARED / "conformance" / "cuda-tile" / "test"),
    }
    env.pop("TILEGEN_TRACEBACK", None)
    exports: list[str] = []
    out = {}
    for i, (lang, cmd) in enumerate(STEPS):
        if _skip_reason(lang, cmd) is not None:
            continue
        if lang == "sh" and cmd.startswith("export "):
            exports.append(cmd)
            out[i] = (0, "", "")
            continue
        if lang == "sh":
            argv = ["bash", "-c", "\n".join(exports + [cmd])]
        else:  # from a file: cuTile reads its kernels' source
            script = work / f"readme_block_{i}.py"
            script.write_text(cmd)
            argv = [sys.executable, str(script)]
        p = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        out[i] = (p.returncode, p.stdout, p.stderr)
    return out


def test_the_readme_has_commands():
    assert sum(lang == "sh" for lang, _ in STEPS) >= 30
    for prefix in SKIP:  # the skip list names commands the README still shows
        assert any(c.startswith(prefix) for lang, c in STEPS if lang == "sh"), prefix


@pytest.mark.parametrize("index", range(len(STEPS)), ids=[c.splitlines()[0][:60] for _, c in STEPS])
def test_readme_command(index, results):
    lang, cmd = STEPS[index]
    why = _skip_reason(lang, cmd)
    if why is not None:
        pytest.skip(why)
    rc, stdout, stderr = results[index]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert rc == _expected_exit(cmd), f"{cmd}\nexit {rc}\n{stderr[-2000:]}"
