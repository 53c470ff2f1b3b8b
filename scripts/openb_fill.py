"""What scripts/compare-efd, efd-crossval, compare-consolidation and sweep-popularity share:
FGD's published means, `gpuorch sim fill` runs averaged over seeds, and issue 16's criterion.
Standard library only."""
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile

EXTRA_TRACES = ["cpu0", "cpu037", "cpu072", "cpu235", "cpu300", "gpushare20", "gpuspec05"]


def published_fgd(openb):
    """{trace: (FGD's published mean allocation at x = 100, at x = 130)}"""
    out = {}
    with open(f"{openb}/expected_alloc.csv") as f:
        for r in csv.DictReader(f):
            if r["policy"] == "06-FGD":
                out[r["workload"].replace("openb_pod_list_", "")] = (
                    float(r["alloc100_mean"]), float(r["alloc130_mean"]))
    return out


def fill_means(gpuorch, openb, trace, policies, seeds, extra=(), fields=(), who="openb_fill"):
    """`gpuorch sim fill --json` on one trace; {policy: {"a100", "a130", *fields: mean over
    seeds}}. A failed run prints its command and stderr and exits 2."""
    cmd = [gpuorch, "sim", "fill", "--nodes", f"{openb}/openb_node_list_gpu_node.csv",
           "--pods", f"{openb}/openb_pod_list_{trace}.csv", "--policy", ",".join(policies),
           "--seeds", seeds, "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(f"{who}: {shlex.join(cmd)} failed:\n{out.stderr}")
        sys.exit(2)
    acc = {}
    for r in json.loads(out.stdout)["runs"]:
        a = acc.setdefault(r["policy"], {"a100": [], "a130": [], **{k: [] for k in fields}})
        # A run whose arrivals jump over a point (a trace of few, large pods) has no value there;
        # the mean is over the runs that have it.
        for x in (100, 130):
            if r["alloc"][x] is not None:
                a[f"a{x}"].append(r["alloc"][x])
        for k in fields:
            a[k].append(r[k])
    for p, a in acc.items():
        for k, v in a.items():
            if not v:
                sys.stderr.write(f"{who}: {trace}: no run of {p} has a value for {k} (too few "
                                 "pods to reach that point)\n")
                sys.exit(2)
    return {p: {k: sum(v) / len(v) for k, v in a.items()} for p, a in acc.items()}


def margin_asked(ceiling, fgd):
    """The margin over FGD (ours) issue 16 asks at one point: +1.0 where the no-refusal ceiling
    leaves more than 1.5 points of room above FGD, else +0.5."""
    return 1.0 if ceiling - fgd > 1.5 else 0.5


def no_refusal_ceilings(text):
    """{trace: [ceiling at x = 100, at 130]} from `scripts/fill-ceiling --json` output. Raises
    ValueError, KeyError or TypeError when the text is not that."""
    return {r["trace"]: list(r["no_refusal"]) for r in json.loads(text)["traces"]}


def run_script(cmd, who):
    """Runs a helper script; on failure prints its command and stderr and exits 2. Its stdout."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(f"{who}: {shlex.join(cmd)} failed:\n{out.stderr}")
        sys.exit(2)
    return out.stdout


def write_atomically(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)) or ".")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
