"""Shared helpers of the benchmarks: sizes, timing statistics, bandwidth, run
information (versions, machine, knobs), JSON files, text tables and plots.

Nothing here imports TensorFlow or MPI: the same helpers serve the driver, the
TensorFlow workers and the mpi4py/numpy workers.
"""

import datetime
import hashlib
import json
import math
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time

KiB = 1024
MiB = 1024 * 1024
GB = 1e9  # bandwidths are reported in GB/s (10^9 bytes per second)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(BENCH_DIR))
DEFAULT_RESULTS_DIR = os.path.join(BENCH_DIR, "results")

# Environment variables that change how a contender runs; recorded with every run.
KNOB_PREFIXES = ("HOROVOD_", "MALLOC_", "TF_", "OMP_", "KMP_", "MPIR_CVAR_", "MPICH_",
                 "FI_", "UCX_", "GLOO_", "TF_HVD_")
KNOB_EXCLUDE = ("TF_CONFIG",)  # recorded separately (it holds ports, not knobs)

# glibc keeps freed blocks below these sizes in the heap instead of returning them
# to the OS (munmap / trim) after every call, so large temporary buffers are reused.
MALLOC_REUSE_ENV = {"MALLOC_MMAP_THRESHOLD_": str(2 << 30),
                    "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}


# ---------------------------------------------------------------------------
# Sizes and numbers


def human_bytes(n):
    """4096 -> '4 KiB', 268435456 -> '256 MiB'."""
    n = int(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return "%d %s" % (n // scale, unit)
    if n >= MiB:
        return "%.1f MiB" % (n / MiB)
    if n >= KiB:
        return "%.1f KiB" % (n / KiB)
    return "%d B" % n


def parse_size(text):
    """'4KiB', '4K', '64k', '1MiB', '16M', '1G' or plain bytes -> bytes."""
    t = text.strip().lower().replace(" ", "")
    for suffix, scale in (("gib", 1 << 30), ("mib", MiB), ("kib", KiB),
                          ("g", 1 << 30), ("m", MiB), ("k", KiB), ("b", 1)):
        if t.endswith(suffix):
            return int(float(t[:-len(suffix)]) * scale)
    return int(t)


def parse_list(text, convert=str):
    return [convert(x) for x in text.split(",") if x.strip()]


def summarize(samples):
    """Statistics of a list of durations in seconds (n, median, min, max, mean)."""
    if not samples:
        return {"n": 0, "median": None, "min": None, "max": None, "mean": None}
    return {"n": len(samples), "median": statistics.median(samples), "min": min(samples),
            "max": max(samples), "mean": sum(samples) / len(samples)}


def scaled(stats, factor):
    """The same statistics multiplied by factor (e.g. seconds -> microseconds)."""
    return {k: (v * factor if (v is not None and k != "n") else v) for k, v in stats.items()}


def allreduce_bandwidth(nbytes, seconds, nranks):
    """(algorithm bandwidth, bus bandwidth) in GB/s for an allreduce of nbytes.

    Algorithm bandwidth is bytes / time. Bus bandwidth scales it by 2(n-1)/n, the
    share of the data every rank must send and receive in an optimal allreduce, so
    that it is comparable with the bandwidth of the hardware (and across n).
    """
    if not seconds:
        return None, None
    alg = nbytes / seconds / GB
    bus = alg * (2.0 * (nranks - 1) / nranks if nranks > 1 else 1.0)
    return alg, bus


def fmt(value, digits=3):
    """Compact number formatting for the text tables; None -> '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 10 ** digits:
        return "%.0f" % value
    decimals = max(0, digits - 1 - int(math.floor(math.log10(magnitude))))
    return "%.*f" % (decimals, value)


# ---------------------------------------------------------------------------
# Process resources around a timed loop


class ResourceMeter(object):
    """CPU time and minor page faults of this process between start() and stop().

    Minor faults per call show memory being mapped fresh on every call (buffers
    returned to the OS and allocated again); CPU time per call above the wall time
    shows threads spinning.
    """

    def start(self):
        self._r0 = resource.getrusage(resource.RUSAGE_SELF)
        self._t0 = time.perf_counter()
        return self

    def stop(self, calls):
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter() - self._t0
        calls = max(1, calls)
        cpu = (r1.ru_utime - self._r0.ru_utime) + (r1.ru_stime - self._r0.ru_stime)
        return {"minflt_per_call": (r1.ru_minflt - self._r0.ru_minflt) / float(calls),
                "cpu_ms_per_call": cpu * 1e3 / calls,
                "cpu_per_wall": cpu / wall if wall > 0 else None}


def time_calls(call, iterations, warmup=0):
    """Runs call() warmup + iterations times; returns (durations, resources, last).

    durations are the wall times (seconds) of the timed calls, measured one by one;
    last is what the final call returned.
    """
    last = None
    for _ in range(warmup):
        last = call()
    durations = []
    meter = ResourceMeter().start()
    for _ in range(iterations):
        t0 = time.perf_counter()
        last = call()
        durations.append(time.perf_counter() - t0)
    return durations, meter.stop(iterations), last


# ---------------------------------------------------------------------------
# What a run ran with


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


CPU_PROBE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_probe.c")
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


SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "KEY")


def knobs(env=None):
    """The environment variables that tune a run (Horovod knobs, malloc, TF, MPI).

    Values of secrets (e.g. the launcher's HOROVOD_GLOO_RENDEZVOUS_SECRET) are
    replaced by "<redacted>": result files get shared.
    """
    env = os.environ if env is None else env
    found = {}
    for k, v in sorted(env.items()):
        if k.startswith(KNOB_PREFIXES) and k not in KNOB_EXCLUDE:
            found[k] = "<redacted>" if any(w in k.upper() for w in SECRET_WORDS) else v
    return found


def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def run_header(benchmark, args):
    """The common head of every result file."""
    return {"benchmark": benchmark, "created": now_iso(),
            "command": " ".join([os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:]),
            "quick": bool(getattr(args, "quick", False)), "np": getattr(args, "np", None),
            "machine": machine_info(), "versions": package_versions(),
            "tf_hvd_git": git_revision()}


def finish_header(header):
    """Adds when the run ended and the load then (other work on the machine skews
    the numbers: compare loadavg at the start and at the end)."""
    header["finished"] = now_iso()
    try:
        header["machine"]["loadavg_end"] = os.getloadavg()
    except OSError:
        header["machine"]["loadavg_end"] = None
    return header


# ---------------------------------------------------------------------------
# Files


def ensure_dir(path):
    os.makedirs(path, exist_ok=True)
    return path


def _json_default(obj):
    # numpy scalars and anything else numeric that json does not know
    for cast in (int, float):
        try:
            return cast(obj)
        except (TypeError, ValueError):
            continue
    return str(obj)


def write_json(path, obj):
    """Writes obj atomically (a reader never sees half a file)."""
    ensure_dir(os.path.dirname(os.path.abspath(path)))
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# Text output


def print_table(title, headers, rows, out=None):
    """Prints an aligned text table (numbers right-aligned)."""
    out = out or sys.stdout
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))

    def line(row):
        parts = []
        for i, c in enumerate(row):
            numeric = c[:1].isdigit() or c[:1] in "-+." and c[1:2].isdigit()
            parts.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out.write("\n%s\n" % title)
    out.write(line(headers) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write(line(row) + "\n")
    out.flush()


def log(message):
    sys.stdout.write("%s\n" % message)
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Plots


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# One colour and marker per contender, the same in every plot.
STYLE = {
    "tf_hvd_gloo": ("#1f77b4", "o"),
    "tf_hvd_mpi": ("#2ca02c", "s"),
    "mwms_ring": ("#d62728", "^"),
    "mpi4py": ("#9467bd", "v"),
    "mpi4py_malloc": ("#8c564b", "D"),
    "numpy_local": ("#7f7f7f", "x"),
    "single_process": ("#ff7f0e", "*"),
    "no_allreduce": ("#bcbd22", "P"),
}


def style(contender):
    return STYLE.get(contender, ("#17becf", "."))


def caption(header):
    """One line naming the machine and the versions, for the foot of a figure."""
    m = header.get("machine", {})
    v = header.get("versions", {})
    load = [m.get("loadavg"), m.get("loadavg_end")]
    load = " -> ".join("%.1f" % l[0] for l in load if l)
    copy = (header.get("machine_record") or {}).get("memcpy_256MiB_gbps") or {}
    copy = " | memcpy 256 MiB %s -> %s GB/s" % (fmt(copy.get("start")), fmt(copy.get("end"))) \
        if copy else ""
    return ("%s, %s CPUs, np=%s%s | TF %s, Keras %s, MPICH %s, mpi4py %s | tf_hvd %s | %s"
            " | load %s%s"
            % (m.get("cpu_model") or "?", m.get("cpus"), header.get("np"),
               " (quick)" if header.get("quick") else "", v.get("tensorflow"),
               v.get("keras"), v.get("mpich"), v.get("mpi4py"),
               header.get("tf_hvd_git") or v.get("tf_hvd"), header.get("created", ""), load,
               copy))
