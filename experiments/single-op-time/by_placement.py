"""single_op_bench.py's results split by the host's CPU placement: per tf_hvd contender and
size, the median [min-max] of added / mpi4py over the rounds whose two runs (the tf_hvd
contender's and mpi4py's) both began and ended near (a cache line's round trip under 200
ns), and over those that both began and ended far; rounds with a change in between are left
out of both.

    python experiments/single-op-time/by_placement.py python/benchmarks/results/single_op-np2.json
"""
import json
import statistics
import sys

sys.path.insert(0, "python/benchmarks")
import single_op_bench  # noqa: E402


def place(run):
    trips = [((run.get("placement") or {}).get(w) or {}).get("round_trip_ns")
             for w in ("before", "after")]
    if all(t is not None and t < 200 for t in trips):
        return "near"
    if all(t is not None and t >= 200 for t in trips):
        return "far"
    return None


def fmt(values):
    if not values:
        return "-"
    return "%.2f [%.2f-%.2f] (n=%d)" % (statistics.median(values), min(values), max(values),
                                        len(values))


data = json.load(open(sys.argv[1]))
names = sorted(set(r["contender"] for r in data["summary"]))
sizes = sorted(set(r["bytes"] for r in data["summary"]))
print("%-12s %9s  %-30s %-30s" % ("contender", "bytes", "near: added / mpi4py", "far"))
for name in names:
    for size in sizes:
        split = {"near": [], "far": []}
        for rnd in data["rounds"]:
            runs = rnd["runs"]
            where = {place(runs[name]), place(runs["mpi4py"])}
            if len(where) != 1 or None in where:
                continue
            ratio = single_op_bench.round_figures(rnd["records"], name, size)["added_over_mpi4py"]
            if ratio is not None:
                split[where.pop()].append(ratio)
        print("%-12s %9d  %-30s %-30s" % (name, size, fmt(split["near"]), fmt(split["far"])))
