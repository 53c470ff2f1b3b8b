#!/usr/bin/env python3
"""Prints the composition tables embedded in src/gpuorch/sim/openb_like.cpp.

The embedded default of `gpuorch sim fill` is synthetic but follows openb's published composition:
node shapes with their counts (from openb_node_list_gpu_node.csv) and pod shapes with their share
of pods (from openb_pod_list_default.csv; memory is each shape's median). Run it to regenerate:
    scripts/derive-openb-mix.py ../shared/openb
"""
import csv
import statistics
import sys
from collections import Counter, defaultdict

root = sys.argv[1] if len(sys.argv) > 1 else "../shared/openb"
nodes = Counter()
with open(f"{root}/openb_node_list_gpu_node.csv") as f:
    for r in csv.DictReader(f):
        nodes[(r["model"], int(r["gpu"]), int(r["cpu_milli"]), int(r["memory_mib"]))] += 1
print("// node shapes: model, gpus, cpu_milli, memory_mib, count")
for (model, gpus, cpu, mem), n in sorted(nodes.items()):
    print(f'    {{"{model}", {gpus}, {cpu}, {mem}, {n}}},')

memory = defaultdict(list)
with open(f"{root}/openb_pod_list_default.csv") as f:
    for r in csv.DictReader(f):
        key = (int(r["cpu_milli"]), int(r["num_gpu"]), int(r["gpu_milli"]))
        memory[key].append(int(r["memory_mib"]))
print("// pod shapes: cpu_milli, gpu_count, gpu_milli, memory_mib (median), pods")
for key, mems in sorted(memory.items(), key=lambda kv: (-len(kv[1]), kv[0])):
    cpu, gpus, milli = key
    print(f"    {{{cpu}, {gpus}, {milli}, {int(statistics.median(mems))}, {len(mems)}}},")
