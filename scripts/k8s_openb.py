"""What scripts/k8s-replay, scripts/k8s-compare and scripts/k8s-throughput share: the HTTPS client
for the test API server, the openb node and pod mapping onto Kubernetes objects (docs/scheduler.md),
the watch that records each pod's first scheduling decision, the control plane of
scripts/k8s-testenv, and the schedulers under test (upstream kube-scheduler, `gpuorch scheduler`).

Not a program: the scripts import it from their own folder.
"""
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTENV = os.path.join(ROOT, "scripts/k8s-testenv")
SHARED_OPENB = os.path.normpath(os.path.join(ROOT, "..", "shared", "openb"))
NS = "replay"


class Api:
    """A bearer-token HTTPS client with TLS verified against the test CA."""

    def __init__(self, server, ca, token):
        host = server.split("://", 1)[1]
        self.host, self.port = host.rsplit(":", 1)
        self.ctx = ssl.create_default_context(cafile=ca)
        self.token = token
        self.local = threading.local()

    def conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx, timeout=60)
            self.local.conn = c
        return c

    def call(self, method, path, body=None, ctype="application/json"):
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        for attempt in range(3):
            try:
                c = self.conn()
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                text = r.read()
                return r.status, (json.loads(text) if text else {})
            except (http.client.HTTPException, OSError):
                self.local.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.2)

    def must(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        status, obj = self.call(method, path, body, ctype)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: {status} {obj.get('message', obj)}")
        return obj

    def text(self, path):
        """GET PATH as text (e.g. /metrics); raises on a status other than 200."""
        c = self.watch_connection(timeout=30)
        try:
            c.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            r = c.getresponse()
            body = r.read().decode()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: {r.status}")
            return body
        finally:
            c.close()

    def watch_connection(self, timeout=120):
        """A fresh connection for one long watch (never the thread's request connection)."""
        return http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx,
                                           timeout=timeout)


def run_gpuorch(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


# ------------------------------------------------------------------------------ openb -> objects

def node_object(row):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": row["sn"], "labels": {"nvidia.com/gpu.product": row["model"],
                                                    "kubernetes.io/hostname": row["sn"]}},
    }


def node_status(row, pods="1001"):
    res = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi",
           "nvidia.com/gpu": str(row["gpu"]), "pods": str(pods)}
    return {"status": {"capacity": res, "allocatable": res}}


def create_node(api, row, pods="1001"):
    api.must("POST", "/api/v1/nodes", node_object(row), ok=(201, 409))
    api.must("PATCH", f"/api/v1/nodes/{row['sn']}/status", node_status(row, pods),
             "application/merge-patch+json")


def fraction(milli):
    s = f"{int(milli) / 1000:.3f}".rstrip("0").rstrip(".")
    return s


def whole_gpu(a):
    """A pod that requests whole GPUs (what kube-scheduler's NodeResourcesFit can count)."""
    return int(a["num_gpu"]) >= 1 and int(a["gpu_milli"]) == 1000


def pod_object(name, a, scheduler_name, ns=NS):
    res = {"cpu": f"{a['cpu_milli']}m", "memory": f"{a['memory_mib']}Mi"}
    annotations = {}
    gpus, milli = int(a["num_gpu"]), int(a["gpu_milli"])
    if gpus > 0 and milli >= 1000:
        res["nvidia.com/gpu"] = str(gpus)
    elif gpus > 0:
        annotations["gpu-fraction"] = fraction(milli)
    spec = {
        "schedulerName": scheduler_name,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": res, "limits": res}}],
        "terminationGracePeriodSeconds": 0,
    }
    models = [m for m in a["gpu_spec"].split("|") if m] if gpus > 0 else []
    if models:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": models}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations}, "spec": spec}


def create_namespace(api, ns=NS):
    api.must("POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, ok=(201, 409))


def pod_gpus(pod):
    """Whole GPUs a pod object requests (nvidia.com/gpu of its containers)."""
    total = 0
    for c in pod["spec"].get("containers", []):
        total += int(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
    return total


def list_pods(api, ns=NS):
    """Every pod of the namespace, paginated."""
    out, cont = [], ""
    while True:
        path = f"/api/v1/namespaces/{ns}/pods?limit=2000"
        if cont:
            path += f"&continue={cont}"
        page = api.must("GET", path)
        out += page.get("items", [])
        cont = page.get("metadata", {}).get("continue", "")
        if not cont:
            return out


# ------------------------------------------------------------------------------ decisions

class Decisions(threading.Thread):
    """Watches the namespace's pods; records each pod's first decision (bound or unschedulable),
    and separately the first time it is seen bound (a pod reported unschedulable can bind later)."""

    def __init__(self, api, ns=NS):
        super().__init__(daemon=True)
        self.api = api
        self.ns = ns
        self.cv = threading.Condition()
        self.decided = {}
        self.times = {}
        self.bound_times = {}
        self.rv = "0"
        self.stop = False
        self.current = None

    def run(self):
        while not self.stop:
            try:
                self.watch_once()
            except (http.client.HTTPException, OSError, ValueError, AttributeError):
                time.sleep(0.2)

    def close(self):
        """Stops watching and closes the watch connection (an open watch holds up the API
        server's shutdown)."""
        self.stop = True
        c = self.current
        if c is not None and c.sock is not None:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.join(timeout=5)

    def watch_once(self):
        c = self.api.watch_connection()
        self.current = c
        c.request("GET", f"/api/v1/namespaces/{self.ns}/pods?watch=1&resourceVersion={self.rv}"
                  "&allowWatchBookmarks=true&timeoutSeconds=100",
                  headers={"Authorization": f"Bearer {self.api.token}"})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            self.rv = "0"
            time.sleep(0.5)
            return
        for line in r:
            ev = json.loads(line)
            if ev.get("type") == "ERROR":
                self.rv = "0"
                return
            obj = ev["object"]
            self.rv = obj["metadata"].get("resourceVersion", self.rv)
            if ev["type"] == "BOOKMARK":
                continue
            name = obj["metadata"]["name"]
            node = obj["spec"].get("nodeName", "")
            ann = obj["metadata"].get("annotations") or {}
            result = None
            if node:
                result = (node, ann.get("gpuorch.io/gpus", ""), "")
            else:
                for cond in (obj.get("status") or {}).get("conditions") or []:
                    if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                        result = ("", "", cond.get("message", ""))
            if result is not None:
                with self.cv:
                    now = time.monotonic()
                    if node and name not in self.bound_times:
                        self.bound_times[name] = now
                    if name not in self.decided:
                        self.decided[name] = result
                        self.times[name] = now
                        self.cv.notify_all()

    def wait(self, name, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while name not in self.decided:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)
            return self.decided[name]


def pct(sorted_values, q):
    """The q-quantile as k8s-replay has always taken it (no interpolation); None when empty."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def ms(seconds):
    return None if seconds is None else round(1000 * seconds, 1)


# ------------------------------------------------------------------------------ control plane

def start_testenv(prefix="gpuorch-replay-"):
    d = tempfile.mkdtemp(prefix=prefix)
    env = dict(os.environ, GPUORCH_K8S_WATCH_PID=str(os.getpid()))
    subprocess.run([TESTENV, "build"], check=True, env=env)
    subprocess.run([TESTENV, "start", d], check=True, env=env)
    return d


def stop_testenv(d, remove=False):
    subprocess.run([TESTENV, "stop", d])
    if remove:
        shutil.rmtree(d, ignore_errors=True)


def read_env(d):
    out = {}
    with open(os.path.join(d, "env")) as f:
        for line in f:
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k] = v.strip("'\"")
    return out


def testenv_versions():
    """(Kubernetes, etcd) versions of the cached control plane, from its binaries."""
    bin_dir = subprocess.run([TESTENV, "bin-dir"], capture_output=True, text=True,
                             check=True).stdout.strip()
    k8s = subprocess.run([os.path.join(bin_dir, "kube-apiserver"), "--version"],
                         capture_output=True, text=True).stdout.split()[-1]
    etcd = subprocess.run([os.path.join(bin_dir, "etcd"), "--version"],
                          capture_output=True, text=True).stdout.splitlines()[0].split()[-1]
    return k8s, "v" + etcd


def die_with_parent():
    """preexec_fn: the child gets SIGTERM when this script dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def exit_on_sigterm():
    """SIGTERM unwinds like Ctrl-C does, so every `finally` stops what the script started."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


# ------------------------------------------------------------------------------ schedulers

# kube-scheduler's own client defaults (KubeSchedulerConfiguration clientConnection, v1.37:
# pkg/scheduler/apis/config/v1/defaults.go): qps 50, burst 100.
KUBE_SCHEDULER_DEFAULT_QPS, KUBE_SCHEDULER_DEFAULT_BURST = 50, 100


def parse_schedulers(text, usage_error):
    """'kube-scheduler,kube-scheduler-fast,gpuorch-fgd,gpuorch-efd@16' -> [(label, kind, policy,
    binders)]; gpuorch-POLICY@N runs gpuorch scheduler with --binders N."""
    out = []
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        if item == "kube-scheduler":
            out.append((item, "kube", None, None))
        elif item == "kube-scheduler-fast":
            out.append((item, "kube-fast", None, None))
        elif re.fullmatch(r"gpuorch-[a-z0-9-]+(:[^@,]*)?(@[0-9]+)?", item):
            policy, _, binders = item[len("gpuorch-"):].partition("@")
            if binders and not 1 <= int(binders) <= 64:
                usage_error(f"--schedulers: {item}: binders must be in [1, 64]")
            out.append((item, "gpuorch", policy, int(binders) if binders else None))
        else:
            usage_error(f"--schedulers: unknown scheduler '{item}' (kube-scheduler, "
                        "kube-scheduler-fast, gpuorch-POLICY[@BINDERS])")
    if not out:
        usage_error("--schedulers: none given")
    return out


class Scheduler:
    """One scheduler under test on the control plane in D: started, waited ready, stopped."""

    def __init__(self, kind, d, policy=None, gpuorch=None, seed=42, workload=None, qps=None,
                 burst=None, extra=()):
        self.kind, self.d, self.policy = kind, d, policy
        self.gpuorch, self.seed, self.workload = gpuorch, seed, workload
        self.qps, self.burst, self.extra = qps, burst, list(extra)
        self.proc = None
        self.log_path = None

    @property
    def scheduler_name(self):
        return "gpuorch" if self.kind == "gpuorch" else "default-scheduler"

    def describe(self):
        if self.kind == "gpuorch":
            flags = " ".join(self.extra)
            return f"gpuorch scheduler --policy {self.policy}" + (f" {flags}" if flags else "")
        if self.kind == "kube-fast":
            return f"kube-scheduler, clientConnection qps {self.qps} burst {self.burst}"
        return (f"kube-scheduler, defaults (qps {KUBE_SCHEDULER_DEFAULT_QPS} "
                f"burst {KUBE_SCHEDULER_DEFAULT_BURST})")

    def start(self, timeout=90):
        env = dict(os.environ, GPUORCH_K8S_WATCH_PID=str(os.getpid()))
        if self.kind == "kube":
            # The default profile and the default client, exactly as k8s-testenv starts it.
            subprocess.run([TESTENV, "scheduler", self.d], check=True, env=env)
            self.log_path = os.path.join(self.d, "logs", "kube-scheduler.log")
            return
        if self.kind == "kube-fast":
            # Same configuration as k8s-testenv writes, plus the client's rate limit raised (with
            # --config given, the deprecated --kube-api-qps/--kube-api-burst flags are ignored).
            config = os.path.join(self.d, "kube-scheduler-fast.yaml")
            with open(config, "w") as f:
                f.write("apiVersion: kubescheduler.config.k8s.io/v1\n"
                        "kind: KubeSchedulerConfiguration\n"
                        "clientConnection:\n"
                        f"  kubeconfig: {self.d}/kube-scheduler.kubeconfig\n"
                        f"  qps: {self.qps}\n"
                        f"  burst: {self.burst}\n"
                        "leaderElection:\n"
                        "  leaderElect: false\n")
            subprocess.run([TESTENV, "scheduler", self.d, f"--config={config}"], check=True,
                           env=env)
            self.log_path = os.path.join(self.d, "logs", "kube-scheduler.log")
            return
        self.log_path = os.path.join(self.d, "logs", f"gpuorch-scheduler-{self.policy}.log")
        log = open(self.log_path, "w")
        cmd = [self.gpuorch, "scheduler", "--kubeconfig", os.path.join(self.d, "kubeconfig"),
               "--policy", self.policy, "--seed", str(self.seed), "--listen", "127.0.0.1:0"]
        if self.workload:
            cmd += ["--workload", self.workload]
        self.proc = subprocess.Popen(cmd + self.extra, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        log.close()
        # Ready: its /readyz says the informers have synced (as k8s-testenv waits for
        # kube-scheduler's /readyz).
        deadline = time.monotonic() + timeout
        port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gpuorch scheduler exited {self.proc.returncode} "
                                   f"(log {self.log_path})")
            if port is None:
                with open(self.log_path) as f:
                    m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", f.read())
                port = m and int(m.group(1))
            if port is not None:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    c.request("GET", "/readyz")
                    if c.getresponse().status == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"gpuorch scheduler not ready within {timeout} s (log {self.log_path})")

    def metrics_port(self):
        with open(self.log_path) as f:
            m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", f.read())
        return int(m.group(1)) if m else None

    def cpu_seconds(self):
        """User+system CPU seconds of the scheduler process so far (None when unknown)."""
        pid = None
        if self.proc is not None:
            pid = self.proc.pid
        else:
            pidfile = os.path.join(self.d, "pids", "kube-scheduler.pid")
            if os.path.exists(pidfile):
                pid = int(open(pidfile).read().strip())
                # k8s-testenv's pid is the session leader that exec'd kube-scheduler.
        return process_cpu_seconds(pid) if pid else None

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def loadavg():
    """The 1/5/15-minute load averages now ("4.53 5.66 6.66"): what else ran on the machine."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return None


def process_cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def apiserver_cpu_seconds(d):
    """CPU seconds of kube-apiserver and etcd in D so far: {'kube-apiserver': s, 'etcd': s}."""
    out = {}
    for name in ("kube-apiserver", "etcd"):
        pidfile = os.path.join(d, "pids", f"{name}.pid")
        if os.path.exists(pidfile):
            out[name] = process_cpu_seconds(int(open(pidfile).read().strip()))
    return out


def apiserver_writes(api):
    """The API server's own count and mean latency of the writes it served since it started, by
    verb and resource (apiserver_request_duration_seconds): {"POST pods/binding": {"count": n,
    "mean_ms": x}, ...}; {} when /metrics cannot be read."""
    try:
        text = api.text("/metrics")
    except (RuntimeError, OSError, http.client.HTTPException):
        return {}
    sums, counts = {}, {}
    pat = re.compile(r"^apiserver_request_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$")
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("verb") not in ("POST", "PATCH", "PUT", "DELETE"):
            continue
        res = labels.get("resource", "")
        if labels.get("group"):
            res = f"{res}.{labels['group']}"
        if labels.get("subresource"):
            res += "/" + labels["subresource"]
        key = f"{labels['verb']} {res}"
        (sums if m.group(1) == "sum" else counts)[key] = (
            (sums if m.group(1) == "sum" else counts).get(key, 0) + float(m.group(3)))
    return {k: {"count": int(counts[k]), "mean_ms": round(1000 * sums.get(k, 0) / counts[k], 2)}
            for k in sorted(counts) if counts[k] > 0
            and k.split()[1].split("/")[0] in ("pods", "events", "events.events.k8s.io", "nodes")}


def apiserver_queue_wait(api):
    """Time requests waited in the API server's priority-and-fairness queues, by priority level
    (apiserver_flowcontrol_request_wait_duration_seconds): {"exempt": {"count": n, "mean_ms": x},
    "workload-high": ...}; the load generator and gpuorch (system:masters) are exempt,
    kube-scheduler (system:kube-scheduler) is not."""
    try:
        text = api.text("/metrics")
    except (RuntimeError, OSError, http.client.HTTPException):
        return {}
    sums, counts = {}, {}
    pat = re.compile(r"^apiserver_flowcontrol_request_wait_duration_seconds_(sum|count)"
                     r"\{([^}]*)\} (\S+)$")
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        level = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))).get("priority_level", "")
        table = sums if m.group(1) == "sum" else counts
        table[level] = table.get(level, 0) + float(m.group(3))
    return {k: {"count": int(counts[k]), "mean_ms": round(1000 * sums.get(k, 0) / counts[k], 2)}
            for k in sorted(counts) if counts[k] > 0}
