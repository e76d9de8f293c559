"""What a figure must be read against: versions, commit, CPU, memory speed, usable cores and the
placement of the CPUs (cpu_probe.c), recorded with every run.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import hashlib
import json
import os
import platform
import socket
import statistics
import subprocess
import time

from lib.formats import MiB, GB, fmt
from lib.paths import BENCH_DIR, REPO_ROOT, ensure_dir
from lib.tables import log


def package_versions(names=("tensorflow", "keras", "numpy", "mpi4py", "mpich", "tf_hvd",
                            "matplotlib")):
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover
        return {}
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except Exception:
            found[name] = None
    return found


def git_revision(path=REPO_ROOT):
    """'<commit>' or '<commit>+dirty' of the tf_hvd tree, None outside git."""
    try:
        rev = subprocess.run(["git", "-C", path, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", path, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1024.0 * 1024.0), 1)
    except OSError:
        pass
    return None


def machine_info():
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"hostname": socket.gethostname(), "cpu_model": _cpu_model(),
            "cpus": os.cpu_count(), "memory_gib": _mem_total_gib(),
            "kernel": platform.release(), "libc": " ".join(platform.libc_ver()),
            "python": platform.python_version(), "loadavg": load}


def memcpy_gbps(nbytes=256 * MiB, repeats=9):
    """Median bandwidth (GB/s, bytes copied / time) of numpy.copyto of nbytes into
    a kept buffer: how fast this machine moves memory right now."""
    import numpy as np
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touches the pages once, outside the timing
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return nbytes / statistics.median(times) / GB


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


CPU_PROBE_SOURCE = os.path.join(BENCH_DIR, "cpu_probe.c")
PROBE_UTIL_HEADER = os.path.join(os.path.dirname(CPU_PROBE_SOURCE), "probe_util.h")


def cpu_placement():
    """Where the host put the first two usable CPUs (cpu_probe.c): a cache line's round
    trip between them, the copy rate of 1 MiB one wrote for the other, and the rates of
    overwriting 1 MiB the other just read and 1 MiB it never touched. A run whose
    figures differ several-fold between jobs reads these first (docs/performance.md,
    "The host's placement of the two vCPUs"). None with fewer than two CPUs; a dict with
    "error" if the probe cannot be built or run.

        >>> cpu_placement()
        {'cpus': [0, 1], 'round_trip_ns': 84.1, 'peer_copy_gbps': 60.2,
         'overwrite_read_gbps': 55.5, 'overwrite_own_gbps': 62.0}
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    sha = hashlib.sha1()
    for path in (CPU_PROBE_SOURCE, PROBE_UTIL_HEADER):
        with open(path, "rb") as f:
            sha.update(f.read())
    digest = sha.hexdigest()[:12]
    cache = ensure_dir(os.path.join(os.path.expanduser("~"), ".cache", "tf_hvd_bench"))
    binary = os.path.join(cache, "cpu_probe-" + digest)
    try:
        if not os.path.exists(binary):
            building = "%s.%d" % (binary, os.getpid())
            subprocess.run(["cc", "-O2", "-pthread", CPU_PROBE_SOURCE, "-o", building],
                           check=True, capture_output=True, timeout=60)
            os.replace(building, binary)
        out = subprocess.run([binary, str(cpus[0]), str(cpus[1])], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        result = json.loads(out)
        result.pop("check", None)
        return result
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return {"error": str(e)}


def machine_record(header, memcpy_start, memcpy_end):
    """What a figure must be read against: the machine's memory speed measured in
    this run (256 MiB memcpy at the start and at the end), cores, load, CPU,
    date and commit."""
    m = header.get("machine", {})
    return {"memcpy_256MiB_gbps": {"start": memcpy_start, "end": memcpy_end},
            "cores": m.get("cpus"), "usable_cores": usable_cores(),
            "loadavg_start": m.get("loadavg"), "loadavg_end": m.get("loadavg_end"),
            "cpu_model": m.get("cpu_model"), "date": header.get("created"),
            "finished": header.get("finished"), "commit": header.get("tf_hvd_git")}


def log_machine_record(machine):
    """One line with what machine_record() holds."""
    copy = machine["memcpy_256MiB_gbps"]
    load = [machine["loadavg_start"], machine["loadavg_end"]]
    log("machine: %s, %s cores (%s usable); memcpy 256 MiB %s GB/s at the start, %s at the "
        "end; load average (1/5/15 min) %s at the start, %s at the end; %s; commit %s"
        % (machine["cpu_model"], machine["cores"], machine["usable_cores"],
           fmt(copy["start"]), fmt(copy["end"]),
           "/".join("%.1f" % x for x in load[0]) if load[0] else "-",
           "/".join("%.1f" % x for x in load[1]) if load[1] else "-",
           machine["date"], machine["commit"]))
