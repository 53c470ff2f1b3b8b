#!/usr/bin/env python3
"""Compares `gpuorch topo` with `nvidia-smi topo -m` on the same host.

Both print a tab-separated matrix: a header row of device names followed by "CPU Affinity",
"NUMA Affinity" (and "GPU NUMA ID"), then one row per device. Compared: every GPU-to-GPU cell, and
each GPU's CPU and NUMA affinity. GPU-to-NIC cells are shown when both list NICs, for information.

Usage: compare_topo.py GPUORCH_TOPO.txt NVIDIA_SMI_TOPO.txt     exit 0 when everything compared matches
"""
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEVICE = re.compile(r"^(GPU|NIC)\d+$")


def parse(path):
    with open(path, errors="replace") as f:
        lines = [ANSI.sub("", l.rstrip("\n")) for l in f]
    header = None
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        cells = [c for c in cells if c]
        if not cells:
            if header and rows:
                break  # the legend follows the matrix after a blank line
            continue
        if header is None and "CPU Affinity" in cells:
            header = cells
            continue
        if header and DEVICE.match(cells[0]):
            rows[cells[0]] = cells[1:]
    if header is None:
        sys.exit(f"{path}: no matrix header (a line with 'CPU Affinity')")
    devices = [h for h in header if DEVICE.match(h)]
    extra = header[len(devices):]
    table = {}
    for name, cells in rows.items():
        table[name] = dict(zip(devices + extra, cells))
    return devices, table


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours_devices, ours = parse(sys.argv[1])
    smi_devices, smi = parse(sys.argv[2])
    gpus = [d for d in smi_devices if d.startswith("GPU")]
    mismatches = 0
    checked = 0
    print(f"{'pair/column':<26}{'gpuorch':>20}{'nvidia-smi':>20}  result")
    if [d for d in ours_devices if d.startswith("GPU")] != gpus:
        print(f"GPU lists differ: gpuorch {ours_devices} vs nvidia-smi {smi_devices}")
        mismatches += 1
    for a in gpus:
        for b in gpus:
            if a >= b:
                continue
            x, y = ours.get(a, {}).get(b, "?"), smi.get(a, {}).get(b, "?")
            ok = x == y
            checked += 1
            mismatches += 0 if ok else 1
            print(f"{a + '-' + b:<26}{x:>20}{y:>20}  {'ok' if ok else 'MISMATCH'}")
        for col in ("CPU Affinity", "NUMA Affinity"):
            x, y = ours.get(a, {}).get(col, "?"), smi.get(a, {}).get(col, "?")
            ok = x == y
            checked += 1
            mismatches += 0 if ok else 1
            print(f"{a + ' ' + col:<26}{x:>20}{y:>20}  {'ok' if ok else 'MISMATCH'}")
    nics = [d for d in smi_devices if d.startswith("NIC") and d in ours_devices]
    for a in gpus:
        for n in nics:
            x, y = ours.get(a, {}).get(n, "?"), smi.get(a, {}).get(n, "?")
            print(f"{a + '-' + n + ' (info)':<26}{x:>20}{y:>20}  {'same' if x == y else 'differs'}")
    print(f"\n{checked} compared, {mismatches} mismatch(es): "
          f"{'MATCH' if mismatches == 0 and checked > 0 else 'MISMATCH'}")
    return 0 if mismatches == 0 and checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
