"""The best GPU allocation any placement policy reaches under the FGD study's protocol, by exhaustive
search on small clusters: scripts/fill-ceiling --self-test holds its no-refusal ceiling against it.

The protocol (../shared/reference/fgd-protocol.md §3): pods arrive one at a time; a pod is placed
whenever some node fits it (CPU, memory, GPU model, GPU milli; a k-GPU pod takes k entirely free
GPUs of one node) and is dropped for good otherwise; nothing departs. A policy chooses only where a
pod goes, so the search branches over every node and GPU a fitting pod could take.

A node: (model, gpus, cpu, mem). A pod: (num_gpu, gpu_milli, cpu, mem, models), models a frozenset
of the GPU models it allows (empty: any).
"""
import functools

GPU_MILLI = 1000

# The smallest instance the old ceiling got wrong (issue 16): two one-GPU nodes, a T4 and a G2; a
# whole-GPU pod for T4, an 810-milli pod for T4, a whole-GPU pod for any model. Every policy
# allocates 2000 milli; the ceiling that forced every earlier single-GPU pod in said 1810.
COUNTEREXAMPLE = ([("T4", 1, 8000, 8192), ("G2", 1, 8000, 8192)],
                  [(1, 1000, 1000, 1024, frozenset({"T4"})), (1, 810, 1000, 1024, frozenset({"T4"})),
                   (1, 1000, 1000, 1024, frozenset())])

MODELS = ("T4", "G2", "V100")
SHARES = (810, 650, 470, 320, 230, 160, 500)


def random_instance(rng, max_pods):
    """A small cluster and arrival sequence where CPU, memory, models, multi-GPU and shares bind."""
    nodes = [(rng.choice(MODELS), rng.choice((1, 1, 2, 4)), rng.choice((4000, 8000, 16000)),
              rng.choice((8192, 16384, 32768))) for _ in range(rng.randint(2, 4))]
    seq = []
    for _ in range(rng.randint(3, max_pods)):
        kind = rng.random()
        if kind < 0.1:
            num_gpu, milli = 0, 0
        elif kind < 0.55:
            num_gpu, milli = 1, rng.choice(SHARES)
        elif kind < 0.85:
            num_gpu, milli = 1, GPU_MILLI
        else:
            num_gpu, milli = rng.choice((2, 4)), GPU_MILLI
        spec = rng.random()
        models = (frozenset() if spec < 0.6 else frozenset({rng.choice(MODELS)}) if spec < 0.85
                  else frozenset(rng.sample(MODELS, 2)))
        seq.append((num_gpu, milli, rng.choice((1000, 2000, 4000, 8000)),
                    rng.choice((1024, 4096, 8192, 16384)), models if num_gpu else frozenset()))
    return nodes, seq


def placements(nodes, state, pod):
    """Every distinct state after placing `pod` (empty: it fits nowhere). state: per node
    (cpu left, mem left, sorted milli left per GPU)."""
    num_gpu, milli, cpu, mem, models = pod
    out = set()
    for i, (model, _, _, _) in enumerate(nodes):
        cpu_left, mem_left, gpu_left = state[i]
        if cpu_left < cpu or mem_left < mem or (num_gpu and models and model not in models):
            continue
        choices = []
        if num_gpu == 0:
            choices.append(gpu_left)
        elif milli == GPU_MILLI:
            free = [g for g, left in enumerate(gpu_left) if left == GPU_MILLI]
            if len(free) >= num_gpu:
                taken = set(free[:num_gpu])  # free GPUs are alike: which ones does not matter
                choices.append(tuple(0 if g in taken else left for g, left in enumerate(gpu_left)))
        else:
            for left in set(gpu_left):  # GPUs with the same milli left are alike
                if left >= milli:
                    g = gpu_left.index(left)
                    choices.append(gpu_left[:g] + (left - milli,) + gpu_left[g + 1:])
        for gpus in choices:
            node = (cpu_left - cpu, mem_left - mem, tuple(sorted(gpus)))
            out.add(state[:i] + (node,) + state[i + 1:])
    return out


def best_allocation(nodes, seq):
    """The most GPU milli allocated after the last arrival, over every placement the protocol
    allows."""
    @functools.lru_cache(maxsize=None)
    def best(k, state):
        if k == len(seq):
            return 0
        pod = seq[k]
        nexts = placements(nodes, state, pod)
        if not nexts:
            return best(k + 1, state)  # dropped for good
        return pod[0] * pod[1] + max(best(k + 1, s) for s in nexts)

    start = tuple((cpu, mem, (GPU_MILLI,) * gpus) for _, gpus, cpu, mem in nodes)
    return best(0, start)
