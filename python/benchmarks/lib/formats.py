"""Sizes and numbers: KiB/MiB/GB, human-readable sizes, parsing sizes and lists, rounding for tables.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import math


KiB = 1024


MiB = 1024 * 1024


GB = 1e9  # bandwidths are reported in GB/s (10^9 bytes per second)


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
