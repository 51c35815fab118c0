"""``--lineinfo`` positions, tilegen beside tileiras, on the cuTile corpus (docs/debugging.md).

For every corpus kernel: the ``.loc 1 LINE COL`` positions in tileiras 13.5's ``--lineinfo`` PTX
(captured from its ptxas call by the wrapper of ``bench/tileiras_pipelines.py``) and in tilegen's,
the positions both emit, and the source lines only one side names. tileiras's ``.loc 1 0 N``
(its ``ret``) is left out. ``python bench/lineinfo_vs_tileiras.py [--arch sm_90] [KERNEL ...]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tileiras_pipelines import shared_dir, wrapper  # noqa: E402

LOC = re.compile(r"^\s*\.loc\s+1\s+(\d+)\s+(\d+)\b", re.M)


def tileiras_positions(tileiras: Path, bc: Path, arch: str, tmp: Path) -> set:
    cap = tmp / bc.stem
    cap.mkdir()
    env = dict(os.environ, CAPTURE_DIR=str(cap))
    cmd = [str(tileiras), f"--gpu-name={arch}", "--lineinfo", str(bc), "-o", str(cap / "k.cubin")]
    subprocess.run(cmd, env=env, capture_output=True, timeout=300, check=True)
    ptx = (cap / "k.ptx").read_text()
    return {(int(a), int(b)) for a, b in LOC.findall(ptx)} - {(0, b) for b in range(256)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    from tilegen.runtime.driver import compile_source, options_for

    out = shared_dir() / "corpus" / "cutile" / "out"
    files = sorted(
        p
        for p in out.glob("*.tileirbc")
        if "v13_1" not in p.name and p.stem != "uint_floordiv_bug"
        and (not args.kernels or p.stem in args.kernels)
    )  # fmt: skip
    totals = [0, 0, 0]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        tileiras = wrapper(tmp)
        for bc in files:
            ref = tileiras_positions(tileiras, bc, args.arch, tmp)
            ptx = compile_source(bc, options_for(args.arch, lineinfo=True), until="ptxas").ptx
            ours = {(int(a), int(b)) for a, b in LOC.findall(ptx)}
            both = ref & ours
            for i, n in enumerate((len(ref), len(ours), len(both))):
                totals[i] += n
            only_ref = sorted({a for a, _ in ref} - {a for a, _ in ours})
            only_ours = sorted({a for a, _ in ours} - {a for a, _ in ref})
            print(
                f"{bc.stem:24s} tileiras {len(ref):3d} tilegen {len(ours):3d} common "
                f"{len(both):3d}  lines only tileiras {only_ref} only tilegen {only_ours}"
            )
    print(f"total: tileiras {totals[0]}, tilegen {totals[1]}, common {totals[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
