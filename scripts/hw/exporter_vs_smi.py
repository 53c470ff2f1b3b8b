#!/usr/bin/env python3
"""Compares a gpuorch exporter scrape with nvidia-smi's readings, and checks NVIDIA's Grafana
dashboard's queries against the scrape (scripts/hw/exporter-vs-smi.sh runs it).

Usage: exporter_vs_smi.py IDLE_SCRAPE LOAD_SCRAPE SMI_CSV SMI_ROWS_CSV COMPARE_TSV DASHBOARD_TSV
Exit 0 when every comparison is within tolerance and every dashboard query finds its metric.
"""
import re
import sys

# The PromQL of every panel and variable of grafana/dcgm-exporter-dashboard.json in
# NVIDIA/dcgm-exporter (the "NVIDIA DCGM Exporter Dashboard", grafana.com 12239): title, query.
DASHBOARD = [
    ("GPU Temperature", 'DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}'),
    ("GPU Avg. Temp", 'avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})'),
    ("GPU Power Usage", 'DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}'),
    ("GPU Power Total", 'sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})'),
    ("GPU SM Clocks", 'DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000'),
    ("GPU Utilization", 'DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}'),
    ("GPU Framebuffer Mem Used", 'DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}'),
    ("Tensor Core Utilization", 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~"$instance", gpu=~"$gpu"}'),
    ("variable instance", "label_values(DCGM_FI_DEV_GPU_TEMP, instance)"),
    ("variable gpu", "label_values(DCGM_FI_DEV_GPU_TEMP, gpu)"),
]

SERIES = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$')


def scrape(path):
    """{metric: [(labels dict, value)]}"""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = SERIES.match(line.strip())
        if not m:
            continue
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def value(s, name, gpu):
    """The whole-GPU series (no MIG labels) of `gpu`."""
    for labels, v in s.get(name, []):
        if labels.get("gpu") == str(gpu) and "GPU_I_ID" not in labels:
            return v
    return None


def num(x):
    try:
        return float(x)
    except ValueError:
        return None


def main(argv):
    if len(argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    idle, load = scrape(argv[1]), scrape(argv[2])
    rows = []
    ok = True
    smi = [[c.strip() for c in line.split(",")] for line in open(argv[3]) if line.count(",") >= 14]
    for r in smi:
        gpu = int(r[0])
        # metric, ours, nvidia-smi, allowed difference (absolute), what the tolerance is
        checks = [
            ("DCGM_FI_DEV_GPU_TEMP", value(load, "DCGM_FI_DEV_GPU_TEMP", gpu), num(r[3]), 3, "±3 C"),
            ("DCGM_FI_DEV_MEMORY_TEMP", value(load, "DCGM_FI_DEV_MEMORY_TEMP", gpu), num(r[4]), 3, "±3 C"),
            ("DCGM_FI_DEV_POWER_USAGE", value(load, "DCGM_FI_DEV_POWER_USAGE", gpu), num(r[5]), None, "±20% (1 s apart, under load)"),
            ("DCGM_FI_DEV_SM_CLOCK", value(load, "DCGM_FI_DEV_SM_CLOCK", gpu), num(r[6]), None, "±10%"),
            ("DCGM_FI_DEV_MEM_CLOCK", value(load, "DCGM_FI_DEV_MEM_CLOCK", gpu), num(r[7]), None, "±10%"),
            ("DCGM_FI_DEV_GPU_UTIL", value(load, "DCGM_FI_DEV_GPU_UTIL", gpu), num(r[8]), 15, "±15 points"),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", value(load, "DCGM_FI_DEV_MEM_COPY_UTIL", gpu), num(r[9]), 20, "±20 points"),
            ("DCGM_FI_DEV_ENC_UTIL", value(load, "DCGM_FI_DEV_ENC_UTIL", gpu), num(r[10]), 1, "±1 point"),
            ("DCGM_FI_DEV_DEC_UTIL", value(load, "DCGM_FI_DEV_DEC_UTIL", gpu), num(r[11]), 1, "±1 point"),
            ("DCGM_FI_DEV_FB_USED", value(load, "DCGM_FI_DEV_FB_USED", gpu), num(r[12]), 256, "±256 MiB"),
            ("DCGM_FI_DEV_FB_FREE", value(load, "DCGM_FI_DEV_FB_FREE", gpu), num(r[13]), 256, "±256 MiB"),
            ("DCGM_FI_DEV_FB_RESERVED", value(load, "DCGM_FI_DEV_FB_RESERVED", gpu), num(r[14]), 2, "±2 MiB"),
        ]
        for name, ours, theirs, tol, what in checks:
            if ours is None or theirs is None:
                within = "n/a" if theirs is None else "no"
            else:
                allowed = tol if tol is not None else abs(theirs) * (0.2 if "20%" in what else 0.1)
                within = "yes" if abs(ours - theirs) <= allowed else "no"
            ok = ok and within != "no"
            rows.append((name, gpu, ours, theirs, what, within))
        drv = [lab.get("DCGM_FI_DRIVER_VERSION") for lab, _ in load.get("DCGM_FI_DEV_GPU_TEMP", [])
               if lab.get("gpu") == str(gpu)]
        same = "yes" if drv and drv[0] == r[2] else "no"
        ok = ok and same == "yes"
        rows.append(("DCGM_FI_DRIVER_VERSION (label)", gpu, drv[0] if drv else None, r[2], "equal", same))
        uuid = [lab.get("UUID") for lab, _ in load.get("DCGM_FI_DEV_GPU_TEMP", []) if lab.get("gpu") == str(gpu)]
        same = "yes" if uuid and uuid[0] == r[1] else "no"
        ok = ok and same == "yes"
        rows.append(("UUID (label)", gpu, uuid[0] if uuid else None, r[1], "equal", same))
        # Activity nvidia-smi --query-gpu does not give: loaded must exceed idle.
        for name in ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"):
            i, l = value(idle, name, gpu), value(load, name, gpu)
            within = "yes" if i is not None and l is not None and l > 0.05 and l > i else "no"
            ok = ok and within == "yes"
            rows.append((name, gpu, l, i, "under load > 0.05 and > idle (nvidia-smi column: idle scrape)", within))
    for line in open(argv[4]):
        c = [x.strip() for x in line.split(",")]
        if len(c) != 4 or not c[0].startswith("GPU-"):
            continue
        gpu = next((lab.get("gpu") for lab, _ in load.get("DCGM_FI_DEV_GPU_TEMP", []) if lab.get("UUID") == c[0]), None)
        if gpu is None:
            continue
        for name, theirs in (("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", c[1]),
                             ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", c[2]),
                             ("DCGM_FI_DEV_ROW_REMAP_FAILURE", c[3])):
            ours, t = value(load, name, int(gpu)), num(theirs)
            within = "yes" if ours is not None and t is not None and ours == t else ("n/a" if t is None else "no")
            ok = ok and within != "no"
            rows.append((name, int(gpu), ours, t, "equal", within))
    with open(argv[5], "w") as f:
        f.write("metric\tgpu\tours\tnvidia-smi\ttolerance\twithin\n")
        for r in rows:
            f.write("\t".join("-" if x is None else str(x) for x in r) + "\n")
    with open(argv[6], "w") as f:
        f.write("panel\tquery\tmetric\tseries\tfound\n")
        for title, q in DASHBOARD:
            metric = re.search(r"(DCGM_[A-Z0-9_]+)", q).group(1)
            series = [lab for lab, _ in load.get(metric, []) if "gpu" in lab]
            found = "yes" if series else "no"
            ok = ok and found == "yes"
            f.write(f"{title}\t{q}\t{metric}\t{len(series)}\t{found}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
