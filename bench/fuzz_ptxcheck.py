"""Differential fuzzing of the simulator's load-time operand checks (runtime/ptx/check.py)
against ptxas: take real PTX (tileiras's captures, tests/ptx_corpus.py), mutate one operand of
one instruction (a register of another class or width, an immediate, a vector of another
arity), and compare the two verdicts.

    python bench/fuzz_ptxcheck.py [--n 300] [--seed 1] [--files PATTERN]

Reports how often they agree, every disagreement (checker accepts what ptxas refuses: "lax";
checker refuses what ptxas accepts: "false alarm") and the time per verdict. Exit status 1 on
any false alarm (the simulator must never refuse what ptxas accepts)."""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from tilegen.runtime.ptx.assemble import verdict  # noqa: E402
from tilegen.runtime.ptx.check import PtxCheckError, check_module  # noqa: E402
from tilegen.runtime.ptx.parser import PtxSyntaxError, parse_ptx  # noqa: E402

_REG = re.compile(r"%(p|rd|r|h|f|fd)(\d+)\b")
_INSTR = re.compile(r"^(\s*(?:@!?%\w+\s+)?)([a-z][\w.:]*)(\s+)(.*);\s*$")
REPLACEMENTS = ["%p1", "%h1", "%r1", "%rd1", "1", "1.0", "0f3F800000", "{%r1, %r2}", "_"]


def mutate(text: str, rng: random.Random) -> tuple[str, str] | None:
    lines = text.splitlines()
    cands = [
        i
        for i, ln in enumerate(lines)
        if (m := _INSTR.match(ln)) and _REG.search(m.group(4)) and "{" not in ln[:8]
    ]
    if not cands:
        return None
    i = rng.choice(cands)
    m = _INSTR.match(lines[i])
    ops = m.group(4)
    regs = list(_REG.finditer(ops))
    r = rng.choice(regs)
    new = rng.choice(REPLACEMENTS)
    if new == r.group(0):
        return None
    lines[i] = m.group(1) + m.group(2) + m.group(3) + ops[: r.start()] + new + ops[r.end() :] + ";"
    return "\n".join(lines) + "\n", lines[i].strip()


def checker_ok(ptx: str) -> tuple[bool, str]:
    try:
        check_module(parse_ptx(ptx), "f.ptx")
        return True, ""
    except (PtxCheckError, PtxSyntaxError) as e:
        return False, str(e)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", default="*.ptx")
    args = ap.parse_args()
    import ptx_corpus

    out = ptx_corpus.capture_all()
    if out is None:
        print("needs the cuTile corpus, the tileiras wheel and cc")
        return 2
    files = sorted(out.glob(args.files))
    files = sorted(files, key=lambda f: f.stat().st_size)[: max(8, len(files) // 2)]
    rng = random.Random(args.seed)
    cases = []
    while len(cases) < args.n:
        f = rng.choice(files)
        mutated = mutate(f.read_text(), rng)
        if mutated is not None:
            cases.append((f"{f.name}: {mutated[1]}", mutated[0]))
    t0 = time.perf_counter()
    chk = [checker_ok(p) for _, p in cases]
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        ptx = list(ex.map(lambda c: verdict(c[1], ("--enable-extended-smem=true",)), cases))
    t_ptxas = time.perf_counter() - t0
    agree = lax = alarm = 0
    for (name, p), (ok, why), v in zip(cases, chk, ptx):
        if ok == (v is None):
            agree += 1
        elif ok:
            lax += 1
            print(f"lax: {name[:140]}\n     ptxas: {' '.join((v or '').split())[:200]}")
        else:
            alarm += 1
            print(f"FALSE ALARM: {name[:140]}\n     {why[:200]}")
    n = len(cases)
    print(
        f"{n} mutations: {agree} agree ({100 * agree / n:.1f}%), {lax} lax, {alarm} false alarms;"
        f" checker {1000 * t_check / n:.2f} ms/verdict, ptxas {1000 * t_ptxas / n:.0f} ms/verdict"
    )
    return 1 if alarm else 0


if __name__ == "__main__":
    sys.exit(main())
