#!/usr/bin/env python3
"""One line per profiled launch of an ncu --csv metrics dump (fp8 probes, rounds 18-20): its NVTX
range, grid, and each metric's value (the name shortened to the part after its unit prefix).

    python3 benchmarks/gpu/probe_table.py PROBE.csv
"""
import csv
import sys

RANGE = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def main(path):
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu's own notes and the program's output are not CSV
    rows, order = {}, []
    for r in csv.DictReader(lines):
        k = r["ID"]
        if k not in rows:
            order.append(k)
            rng = r[RANGE].split(":")
            rows[k] = [rng[1] if len(rng) > 1 else "?", r["Grid Size"]]
        rows[k].append(r["Metric Name"].split("__")[1][:28] + "=" + r["Metric Value"])
    for k in order:
        print(" ".join(rows[k]))


if __name__ == "__main__":
    main(sys.argv[1])
