"""Full ptxas sweep of spec/ptx: ``python bench/ptx_spec_probe.py [--no-modifiers]``.

For every row's forms (each type; each modifier value as a sub-form) finds the lowest target and
ISA version ptxas accepts, compares the row's base forms with the stated `ptx_isa`/`sm`, and prints
confirmed / consistent (below the probe floor) / wrong rows, sub-forms needing more than their row,
and forms that cannot be probed.
"""

from __future__ import annotations

import sys
import time

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.runtime.ptx.probe import Ptxas, isa_key, row_check, row_minimum, sweep


def main() -> int:
    px = Ptxas()
    t0 = time.time()
    rows = list(INSTRUCTIONS.values())
    forms = sweep(px, rows, modifiers="--no-modifiers" not in sys.argv)
    checks = px.map(lambda r: row_check(px, r), rows)
    counts = {
        "sm confirmed": 0,
        "sm below probe floor": 0,
        "isa confirmed": 0,
        "isa not probeable": 0,
        "WRONG": 0,
        "unprobed": 0,
    }
    for row, chk in zip(rows, checks):
        found = row_minimum(forms[row["name"]])
        if not chk.probed or found is None:
            counts["unprobed"] += 1
            print(f"unprobed   {row['name']}")
            continue
        sm_v = "confirmed" if chk.sm_below and not chk.sm_below[1] else "below probe floor"
        isa_v = "confirmed" if chk.isa_below and not chk.isa_below[1] else "not probeable"
        if chk.ok:
            counts["sm " + sm_v] += 1
            counts["isa " + isa_v] += 1
        else:
            counts["WRONG"] += 1
        verdict = "ok" if chk.ok else "WRONG"
        print(
            f"{verdict:5} {row['name']:15} stated {row['ptx_isa']}/sm_{row['sm']}: sm {sm_v},"
            f" isa {isa_v} (on sm_{chk.isa_target}); sweep found {found.isa}"
            f"{' (target floor)' if found.isa_at_floor else ''}/sm_{found.sm}"
        )
        for prob in chk.problems():
            print(f"      {prob}")
        rejected = []
        for f in forms[row["name"]]:
            if f.isa is None:
                rejected.append(f.label)
            elif not f.base and (
                isa_key(f.isa) > max(isa_key(row["ptx_isa"]), isa_key(found.isa))
                or int(str(f.sm).rstrip("a")) > max(row["sm"], int(str(found.sm).rstrip("a")))
                or (str(f.sm).endswith("a") and not str(found.sm).endswith("a"))
            ):
                print(f"      sub-form {f.label} needs {f.isa}/sm_{f.sm}")
        if rejected:
            print(
                f"      {len(rejected)} modifier/type combinations never accepted: "
                f"{', '.join(rejected[:6])}{' ...' if len(rejected) > 6 else ''}"
            )
    print(
        counts,
        f"{px.calls} ptxas calls, {time.time() - t0:.1f}s, jobs={px.jobs}, "
        f"ptxas max ISA {px.max_isa}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
