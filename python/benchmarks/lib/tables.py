"""Text output and plot style: aligned tables, log lines, matplotlib on Agg, one colour and
marker per contender, the figure caption.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import sys

from lib.formats import fmt


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
