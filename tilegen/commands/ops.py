"""``tilegen ops [--json] [--dialect D] [--all]``: list the ops defined in the spec."""

from __future__ import annotations

import json


def add_arguments(p) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON array of {dialect, mnemonic, opcode, since}",
    )
    p.add_argument("--dialect", help="only this dialect")
    p.add_argument("--all", action="store_true", help="include test-only ops")


def run(args) -> int:
    from tilegen.runtime.opdef import all_ops

    ops = [o for o in all_ops() if (args.all or not o.test_only)]
    if args.dialect:
        ops = [o for o in ops if o.dialect == args.dialect]
    rows = [
        {"dialect": o.dialect, "mnemonic": o.mnemonic, "opcode": o.opcode, "since": o.since}
        for o in ops
    ]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            code = f"0x{r['opcode']:02X}" if r["opcode"] is not None else "-"
            print(f"{r['dialect']}.{r['mnemonic']:<32} {code:>7}  {r['since']}")
    return 0
