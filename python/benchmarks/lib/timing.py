"""Timing statistics: medians and spreads of samples, bus bandwidth, timing calls, CPU and memory use.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import resource
import statistics
import time

from lib.formats import GB


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
