#!/usr/bin/env python3
"""Writes the recorded-tree fixtures under tests/fixtures/topo/<host>/.

Each tree has the shape `gpuorch topo --record` gives a real host: the sysfs/procfs files that
discovery reads (relative symlinks kept), nvml.json (the NVML answers, for NVIDIA hosts) and
hwloc.xml (exported by `lstopo --of xml` run on a fuller temporary copy of the same tree through
HWLOC_FSROOT, which also needs per-CPU topology files that the recording itself does not keep).

Hosts: dgx-h100 (8 x H100 on NVSwitch, 2 NUMA nodes, 8 IB NICs sharing PCIe switches with the
GPUs), mi250 (4 AMD MI250 GCDs on xGMI), t4x2 (2 x T4 on two sockets, one RoCE NIC) and h200-vm
(2 x H200 joined by NVLink through NVSwitch, as a VM sees them).

Usage: scripts/topo-fixtures/make_fixtures.py [OUT_DIR]   (default tests/fixtures/topo)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def cpulist(ranges):
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges)


def cpus_of(ranges):
    out = []
    for a, b in ranges:
        out.extend(range(a, b + 1))
    return out


def cpumask(cpus, total):
    words = (total + 31) // 32
    bits = [0] * words
    for c in cpus:
        bits[c // 32] |= 1 << (c % 32)
    return ",".join(f"{w:08x}" for w in reversed(bits))


class Tree:
    def __init__(self, root, full):
        self.root = root
        self.full = full  # also write what only hwloc's XML export needs

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(path, mode) as f:
            f.write(text)

    def link(self, rel, target):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)


def config_space(vendor, device, klass, bridge=None):
    cfg = bytearray(64)
    cfg[0:2] = vendor.to_bytes(2, "little")
    cfg[2:4] = device.to_bytes(2, "little")
    cfg[8] = 0x01
    cfg[9:12] = klass.to_bytes(3, "little")
    if bridge:
        cfg[0x0E] = 0x01
        cfg[0x18], cfg[0x19], cfg[0x1A] = bridge
    return bytes(cfg)


class Host:
    def __init__(self, name, tree, sockets, cpus_total):
        self.name = name
        self.t = tree
        self.sockets = sockets  # list of (node id, cpu ranges, memory kB)
        self.cpus_total = cpus_total
        self.pci = {}  # bdf -> sysfs dir (relative to root)

    def node_of(self, numa):
        for node, ranges, _ in self.sockets:
            if node == numa:
                return ranges
        return [(0, self.cpus_total - 1)]

    def base(self, hostname, product, threads_per_core):
        t = self.t
        t.write("proc/sys/kernel/hostname", hostname + "\n")
        t.write("sys/class/dmi/id/product_name", product + "\n")
        t.write("sys/devices/system/cpu/online", f"0-{self.cpus_total - 1}\n")
        t.write("sys/devices/system/cpu/possible", f"0-{self.cpus_total - 1}\n")
        t.write("sys/devices/system/cpu/present", f"0-{self.cpus_total - 1}\n")
        nodes = [n for n, _, _ in self.sockets]
        t.write("sys/devices/system/node/online", cpulist([(min(nodes), max(nodes))]) + "\n")
        t.write("sys/devices/system/node/possible", cpulist([(min(nodes), max(nodes))]) + "\n")
        total_kb = 0
        for node, ranges, mem_kb in self.sockets:
            total_kb += mem_kb
            d = f"sys/devices/system/node/node{node}"
            t.write(f"{d}/cpulist", cpulist(ranges) + "\n")
            t.write(f"{d}/cpumap", cpumask(cpus_of(ranges), self.cpus_total) + "\n")
            t.write(f"{d}/meminfo", f"Node {node} MemTotal:       {mem_kb} kB\n"
                                   f"Node {node} MemFree:        {mem_kb // 2} kB\n")
            dist = " ".join("10" if n == node else "21" for n in nodes)
            t.write(f"{d}/distance", dist + "\n")
        t.write("proc/meminfo", f"MemTotal:       {total_kb - 4096} kB\n"
                                f"MemFree:        {total_kb // 2} kB\n")
        if not t.full:
            return
        # Per-CPU topology, only for hwloc's export (the recording keeps hwloc.xml instead).
        cores_per_socket = self.cpus_total // threads_per_core // len(self.sockets)
        for sock, (node, ranges, _) in enumerate(self.sockets):
            cpus = cpus_of(ranges)
            for cpu in cpus:
                d = f"sys/devices/system/cpu/cpu{cpu}"
                core = (cpu % (self.cpus_total // threads_per_core)) % cores_per_socket
                siblings = [c for c in cpus if c % (self.cpus_total // threads_per_core)
                            == cpu % (self.cpus_total // threads_per_core)]
                t.write(f"{d}/topology/physical_package_id", f"{sock}\n")
                t.write(f"{d}/topology/die_id", "0\n")
                t.write(f"{d}/topology/core_id", f"{core}\n")
                t.write(f"{d}/topology/thread_siblings", cpumask(siblings, self.cpus_total) + "\n")
                t.write(f"{d}/topology/core_siblings", cpumask(cpus, self.cpus_total) + "\n")
                t.write(f"{d}/online", "1\n")
                t.link(f"sys/devices/system/node/node{node}/cpu{cpu}", f"../../cpu/cpu{cpu}")

    def device(self, parent_dir, bdf, vendor, device, klass, numa, bridge=None, link=(32, 16),
               extra=None):
        d = f"{parent_dir}/{bdf}"
        self.pci[bdf] = d
        t = self.t
        t.write(f"{d}/vendor", f"0x{vendor:04x}\n")
        t.write(f"{d}/device", f"0x{device:04x}\n")
        t.write(f"{d}/class", f"0x{klass:06x}\n")
        t.write(f"{d}/subsystem_vendor", f"0x{vendor:04x}\n")
        t.write(f"{d}/subsystem_device", "0x0000\n")
        t.write(f"{d}/revision", "0x01\n")
        t.write(f"{d}/numa_node", f"{numa}\n")
        ranges = self.node_of(numa if numa >= 0 else 0)
        t.write(f"{d}/local_cpulist", cpulist(ranges) + "\n")
        t.write(f"{d}/local_cpus", cpumask(cpus_of(ranges), self.cpus_total) + "\n")
        speed = {8: "8.0 GT/s PCIe", 16: "16.0 GT/s PCIe", 32: "32.0 GT/s PCIe"}[link[0]]
        t.write(f"{d}/current_link_speed", speed + "\n")
        t.write(f"{d}/max_link_speed", speed + "\n")
        t.write(f"{d}/current_link_width", f"{link[1]}\n")
        t.write(f"{d}/max_link_width", f"{link[1]}\n")
        t.write(f"{d}/config", config_space(vendor, device, klass, bridge))
        depth = d.count("/") + 1 - 4  # sys/bus/pci/devices/X -> ../../../devices/...
        t.link(f"sys/bus/pci/devices/{bdf}", "../../../" + d[len("sys/"):])
        for rel, text in (extra or {}).items():
            t.write(f"{d}/{rel}", text)
        del depth
        return d

    def switch_group(self, domain_bus, numa, endpoints, rp_dev=1):
        """A root port, optionally a PCIe switch, and endpoints under it.

        endpoints: list of (vendor, device, class, extra-files dict); one endpoint goes straight
        under the root port, two or more get a switch with one downstream port each."""
        r = domain_bus
        host = f"sys/devices/pci0000:{r:02x}"
        rp_bdf = f"0000:{r:02x}:{rp_dev:02x}.0"
        last = r + 2 + len(endpoints) if len(endpoints) > 1 else r + 1
        rp = self.device(host, rp_bdf, 0x8086, 0x352A, 0x060400, numa, bridge=(r, r + 1, last))
        out = []
        if len(endpoints) == 1:
            v, dv, k, extra = endpoints[0]
            bdf = f"0000:{r + 1:02x}:00.0"
            out.append((bdf, self.device(rp, bdf, v, dv, k, numa, extra=extra)))
            return out
        usp_bdf = f"0000:{r + 1:02x}:00.0"
        usp = self.device(rp, usp_bdf, 0x1000, 0xC030, 0x060400, numa, bridge=(r + 1, r + 2, last))
        for i, (v, dv, k, extra) in enumerate(endpoints):
            bus = r + 3 + i
            dsp_bdf = f"0000:{r + 2:02x}:{i:02x}.0"
            dsp = self.device(usp, dsp_bdf, 0x1000, 0xC030, 0x060400, numa, bridge=(r + 2, bus, bus))
            bdf = f"0000:{bus:02x}:00.0"
            out.append((bdf, self.device(dsp, bdf, v, dv, k, numa, extra=extra)))
        return out

    def ib(self, name, pci_dir, guid, rate, link_layer, state="4: ACTIVE", phys="5: LinkUp"):
        t = self.t
        d = f"{pci_dir}/infiniband/{name}"
        t.link(f"sys/class/infiniband/{name}", "../../" + d[len("sys/"):])
        t.link(f"{d}/device", "../../../" + os.path.basename(pci_dir))
        t.write(f"{d}/node_guid", guid + "\n")
        t.write(f"{d}/fw_ver", "28.39.1002\n")
        t.write(f"{d}/hca_type", "MT4129\n")
        t.write(f"{d}/ports/1/state", state + "\n")
        t.write(f"{d}/ports/1/phys_state", phys + "\n")
        t.write(f"{d}/ports/1/rate", rate + "\n")
        t.write(f"{d}/ports/1/link_layer", link_layer + "\n")

    def nvidia_proc(self, bdf, model, uuid, minor, driver):
        t = self.t
        t.write("proc/driver/nvidia/version",
                f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Release Build\n"
                "GCC version:  gcc version 12.2.0\n")
        t.write(f"proc/driver/nvidia/gpus/{bdf}/information",
                f"Model: \t\t {model}\nIRQ:   \t\t {100 + minor}\nGPU UUID: \t {uuid}\n"
                f"Video BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bdf}\n"
                f"Device Minor: \t {minor}\nGPU Excluded:\t No\n")


def uuid_for(host, i):
    import hashlib
    h = hashlib.sha1(f"{host}-{i}".encode()).hexdigest()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def nvml_device(index, name, uuid, bdf, mem_mib, cc, minor, links, mig=None, samples=None):
    return {
        "index": index, "name": name, "uuid": uuid,
        "pci_bus_id": "0000" + bdf.upper().replace("0000:", "0000:", 1),
        "memory_total_bytes": mem_mib * 1048576,
        "compute_capability": list(cc), "minor_number": minor,
        "nvlinks": links,
        # NVML answers NOT_SUPPORTED (recorded as -1) on GPUs without MIG.
        "mig": mig or {"current": -1, "pending": -1, "instances": []},
        "samples": samples or [],
    }


def sample(util, mem_util, used_mib, temp, power_w, sm, mem_clk):
    return {"gpu_util": util, "mem_copy_util": mem_util, "memory_used_bytes": used_mib * 1048576,
            "temperature_c": temp, "power_mw": power_w * 1000, "sm_clock_mhz": sm,
            "mem_clock_mhz": mem_clk, "pcie_tx_kbps": 1200, "pcie_rx_kbps": 3400,
            "energy_mj": 123456789, "nvlink_tx_kib": 1000, "nvlink_rx_kib": 2000}


def dgx_h100(t):
    h = Host("dgx-h100", t, [(0, [(0, 55), (112, 167)], 1056345000),
                             (1, [(56, 111), (168, 223)], 1056870000)], 224)
    h.base("dgx-h100-01", "DGXH100", 2)
    roots = [0x15, 0x3F, 0x4E, 0x5D, 0x99, 0xBF, 0xCD, 0xDB]
    devices = []
    for i, r in enumerate(roots):
        numa = 0 if i < 4 else 1
        eps = h.switch_group(r, numa, [(0x15B3, 0x1021, 0x020700, None),
                                       (0x10DE, 0x2330, 0x030200, None)])
        (nic_bdf, nic_dir), (gpu_bdf, _) = eps
        h.ib(f"mlx5_{i}", nic_dir, f"a088:c203:00{i:02x}:5a1e", "400 Gb/sec (4X NDR)",
             "InfiniBand")
        devices.append(gpu_bdf)
    nvml = {"format": "gpuorch-nvml-recording/1", "driver_version": "550.54.15",
            "cuda_driver_version": 12040, "devices": []}
    for i, bdf in enumerate(devices):
        uuid = uuid_for("dgx-h100", i)
        h.nvidia_proc(bdf, "NVIDIA H100 80GB HBM3", uuid, i, "550.54.15")
        links = [{"link": n, "active": True, "remote_type": "switch", "remote_pci_bus_id": ""}
                 for n in range(18)]
        mig = {"current": 0, "pending": 0, "instances": []}
        if i == 7:
            mig = {"current": 1, "pending": 1, "instances": [
                {"gi": 1, "ci": 0, "uuid": "MIG-" + uuid_for("dgx-mig", 1)[4:],
                 "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb", "memory_total_bytes": 40192 * 1048576},
                {"gi": 5, "ci": 0, "uuid": "MIG-" + uuid_for("dgx-mig", 5)[4:],
                 "name": "NVIDIA H100 80GB HBM3 MIG 2g.20gb", "memory_total_bytes": 19968 * 1048576},
                {"gi": 13, "ci": 0, "uuid": "MIG-" + uuid_for("dgx-mig", 13)[4:],
                 "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "memory_total_bytes": 9856 * 1048576},
            ]}
            for gi in (1, 5, 13):
                t.write(f"proc/driver/nvidia/capabilities/gpu{i}/mig/gi{gi}/access",
                        f"DeviceFileMinor: {gi * 9 + 2}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
                t.write(f"proc/driver/nvidia/capabilities/gpu{i}/mig/gi{gi}/ci0/access",
                        f"DeviceFileMinor: {gi * 9 + 3}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
        nvml["devices"].append(nvml_device(
            i, "NVIDIA H100 80GB HBM3", uuid, bdf, 81559, (9, 0), i, links, mig,
            [sample(97 - i, 41, 70000 + i, 61 + i, 650, 1980, 2619),
             sample(95 - i, 40, 70100 + i, 62 + i, 655, 1980, 2619)]))
    return h, nvml


def mi250(t):
    h = Host("mi250", t, [(0, [(0, 31), (64, 95)], 528000000),
                          (1, [(32, 63), (96, 127)], 528400000)], 128)
    h.base("mi250-node-01", "AS -4124GQ-TNMI", 2)
    amd = (0x1002, 0x740C, 0x038000)
    gcds = []
    gcds += h.switch_group(0x20, 0, [amd + (None,), amd + (None,)])
    nic = h.switch_group(0x40, 0, [(0x15B3, 0x101B, 0x020700, None)])
    gcds += h.switch_group(0xC0, 1, [amd + (None,), amd + (None,)])
    h.ib("mlx5_0", nic[0][1], "0c42:a103:0012:3456", "200 Gb/sec (4X HDR)", "InfiniBand")
    kfd = "sys/class/kfd/kfd/topology"
    t.write(f"{kfd}/generation_id", "1\n")
    t.write(f"{kfd}/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
    for n, (node, ranges, _) in enumerate(h.sockets):
        d = f"{kfd}/nodes/{n}"
        t.write(f"{d}/gpu_id", "0\n")
        t.write(f"{d}/name", "\n")
        t.write(f"{d}/properties", f"cpu_cores_count {len(cpus_of(ranges))}\nsimd_count 0\n"
                                   f"mem_banks_count 1\ncaches_count 0\nio_links_count 0\n"
                                   f"p2p_links_count 0\ncpu_core_id_base {ranges[0][0]}\n"
                                   "simd_id_base 0\ngfx_target_version 0\nvendor_id 0\n"
                                   "device_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n"
                                   "hive_id 0\nnum_sdma_engines 0\n")
    hive = 0x5A3C9D1E04B2F1A7
    for i, (bdf, pci_dir) in enumerate(gcds):
        bus = int(bdf[5:7], 16)
        numa = 0 if i < 2 else 1
        card = f"{pci_dir}/drm/card{i}"
        t.link(f"sys/class/drm/card{i}", "../../" + card[len("sys/"):])
        t.link(f"{card}/device", "../../../" + bdf)
        render = f"{pci_dir}/drm/renderD{128 + i}"
        t.link(f"sys/class/drm/renderD{128 + i}", "../../" + render[len("sys/"):])
        t.link(f"{render}/device", "../../../" + bdf)
        t.write(f"{pci_dir}/mem_info_vram_total", "68702699520\n")
        t.write(f"{pci_dir}/mem_info_vram_used", f"{(12 + i) * 1073741824}\n")
        t.write(f"{pci_dir}/gpu_busy_percent", f"{80 + i}\n")
        t.write(f"{pci_dir}/mem_busy_percent", f"{30 + i}\n")
        t.write(f"{pci_dir}/product_name", "AMD Instinct MI250\n")
        t.write(f"{pci_dir}/unique_id", f"{0x3c4f0b2a11d0e800 + i:016x}\n")
        t.write(f"{pci_dir}/current_compute_partition", "SPX\n")
        t.write(f"{pci_dir}/driver/module/version", "6.3.6\n")
        t.write(f"{pci_dir}/hwmon/hwmon{i}/temp1_input", f"{45000 + 1000 * i}\n")
        t.write(f"{pci_dir}/hwmon/hwmon{i}/power1_average", f"{(300 + i) * 1000000}\n")
        t.write(f"{pci_dir}/pp_dpm_sclk", "0: 500Mhz\n1: 1700Mhz *\n")
        t.write(f"{pci_dir}/pp_dpm_mclk", "0: 400Mhz\n1: 1600Mhz *\n")
        n = 2 + i
        d = f"{kfd}/nodes/{n}"
        t.write(f"{d}/gpu_id", f"{[53343, 22041, 64287, 9122][i]}\n")
        t.write(f"{d}/name", "gfx90a\n")
        t.write(f"{d}/properties", "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 1\n"
                                   "caches_count 0\nio_links_count 4\np2p_links_count 0\n"
                                   "cpu_core_id_base 0\nsimd_id_base 2147487744\n"
                                   "max_waves_per_simd 8\nlds_size_in_kb 64\nwave_front_size 64\n"
                                   "array_count 8\nsimd_arrays_per_engine 1\n"
                                   "cu_per_simd_array 13\nsimd_per_cu 4\n"
                                   "gfx_target_version 90010\nvendor_id 4098\n"
                                   f"device_id 29708\nlocation_id {bus << 8}\ndomain 0\n"
                                   f"drm_render_minor {128 + i}\nhive_id {hive}\n"
                                   "num_sdma_engines 2\nnum_sdma_xgmi_engines 6\n"
                                   "max_engine_clk_fcompute 1700\nlocal_mem_size 0\n"
                                   f"fw_version 78\nunique_id {0x3c4f0b2a11d0e800 + i}\n")
        t.write(f"{d}/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 68702699520\n"
                                               "flags 0\nwidth 4096\nmem_clk_max 1600\n")
        t.write(f"{d}/io_links/0/properties",
                f"type 2\nversion_major 0\nversion_minor 0\nnode_from {n}\nnode_to {numa}\n"
                "weight 20\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\n"
                "max_bandwidth 64000\nrecommended_transfer_size 0\nflags 1\n")
        k = 1
        for j in range(4):
            if j == i:
                continue
            same = (i // 2) == (j // 2)
            t.write(f"{d}/io_links/{k}/properties",
                    f"type 11\nversion_major 0\nversion_minor 0\nnode_from {n}\n"
                    f"node_to {2 + j}\nweight {15 if same else 30}\nmin_latency 0\n"
                    f"max_latency 0\nmin_bandwidth 50000\n"
                    f"max_bandwidth {200000 if same else 50000}\n"
                    "recommended_transfer_size 0\nflags 1\n")
            k += 1
    return h, None


def t4x2(t):
    h = Host("t4x2", t, [(0, [(0, 15), (32, 47)], 196000000),
                         (1, [(16, 31), (48, 63)], 196500000)], 64)
    h.base("t4-node-01", "PowerEdge R740", 2)
    g0 = h.switch_group(0x3A, 0, [(0x10DE, 0x1EB8, 0x030200, None)])
    nic = h.switch_group(0x5D, 0, [(0x15B3, 0x1017, 0x020000, None)])
    g1 = h.switch_group(0xD7, 1, [(0x10DE, 0x1EB8, 0x030200, None)])
    h.ib("mlx5_0", nic[0][1], "98039b:0300:8a:21a0", "100 Gb/sec (4X EDR)", "Ethernet")
    nvml = {"format": "gpuorch-nvml-recording/1", "driver_version": "535.104.05",
            "cuda_driver_version": 12020, "devices": []}
    for i, (bdf, _) in enumerate(g0 + g1):
        uuid = uuid_for("t4x2", i)
        h.nvidia_proc(bdf, "Tesla T4", uuid, i, "535.104.05")
        nvml["devices"].append(nvml_device(i, "Tesla T4", uuid, bdf, 15360, (7, 5), i, [], None,
                                           [sample(12 + i, 3, 1200, 38, 27, 585, 5000)]))
    return h, nvml


def h200_vm(t):
    h = Host("h200-vm", t, [(0, [(0, 31)], 263000000)], 32)
    h.base("h200-vm", "Standard PC (Q35 + ICH9, 2009)", 1)
    g0 = h.switch_group(0x00, -1, [(0x10DE, 0x2335, 0x030200, None)], rp_dev=4)
    h.pci.clear()
    # The second GPU sits behind another root port of the same host bridge.
    g1 = []
    host = "sys/devices/pci0000:00"
    rp = h.device(host, "0000:00:05.0", 0x1B36, 0x000C, 0x060400, -1, bridge=(0, 2, 2))
    g1.append(("0000:02:00.0", h.device(rp, "0000:02:00.0", 0x10DE, 0x2335, 0x030200, -1)))
    nvml = {"format": "gpuorch-nvml-recording/1", "driver_version": "570.124.06",
            "cuda_driver_version": 12080, "devices": []}
    for i, (bdf, _) in enumerate(g0 + g1):
        uuid = uuid_for("h200-vm", i)
        h.nvidia_proc(bdf, "NVIDIA H200", uuid, i, "570.124.06")
        links = [{"link": n, "active": True, "remote_type": "switch", "remote_pci_bus_id": ""}
                 for n in range(18)]
        nvml["devices"].append(nvml_device(i, "NVIDIA H200", uuid, bdf, 143771, (9, 0), i, links,
                                           {"current": 0, "pending": 0, "instances": []}, [sample(0, 0, 1, 30 + i, 75, 345, 3201)]))
    return h, nvml


def scrub(xml, host):
    """Drops what lstopo learnt from the machine that ran it rather than from the tree."""
    own = {"HostName": host, "OSRelease": "6.1.0-recorded", "OSVersion": "#1 SMP recorded",
           "ProcessName": "lstopo-no-graphics"}
    lines = []
    for line in xml.splitlines(keepends=True):
        for key, value in own.items():
            if f'<info name="{key}" value="' in line:
                line = line[:line.index("value=")] + f'value="{value}"/>\n'
        lines.append(line)
    return "".join(lines)


HOSTS = {"dgx-h100": dgx_h100, "mi250": mi250, "t4x2": t4x2, "h200-vm": h200_vm}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../../tests/fixtures/topo")
    for name, make in HOSTS.items():
        dest = os.path.join(out, name)
        keep_expected = os.path.join(dest, "expected")
        saved = None
        if os.path.isdir(keep_expected):
            saved = tempfile.mkdtemp()
            shutil.copytree(keep_expected, os.path.join(saved, "expected"))
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        with tempfile.TemporaryDirectory() as full:
            make(Tree(full, True))
            xml = subprocess.run(["lstopo-no-graphics", "--of", "xml", "-"], check=True,
                                 capture_output=True, text=True,
                                 env=dict(os.environ, HWLOC_FSROOT=full,
                                          HWLOC_COMPONENTS="-x86")).stdout
            with open(os.path.join(full, "proc/sys/kernel/hostname")) as f:
                xml = scrub(xml, f.read().strip())
        _, nvml = make(Tree(dest, False))
        with open(os.path.join(dest, "hwloc.xml"), "w") as f:
            f.write(xml)
        if nvml:
            with open(os.path.join(dest, "nvml.json"), "w") as f:
                json.dump(nvml, f, indent=1)
                f.write("\n")
        if saved:
            shutil.copytree(os.path.join(saved, "expected"), keep_expected)
            shutil.rmtree(saved)
        print(f"{dest}: written")


if __name__ == "__main__":
    main()
