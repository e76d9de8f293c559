"""What the liveness monitor costs the allreduce chain: before/after, in interleaved rounds.

    python python/benchmarks/liveness_cost.py --before /path/to/old/_hvd.so [--rounds 5]

Each rank's core proves it is alive to every peer once a second with one UDP datagram from
a thread of its own (cc/common/core/liveness_monitor.h), and every wait on a peer checks
one flag between naps. Neither may cost the collectives anything measurable. Each round
runs allreduce_bench.py's chain mode (dependent Gloo allreduces inside one tf.function,
time per allreduce = call time / chain length; wheel_vs_source.py's runner) with the
library built before the monitor (``--before``), with this tree's library (``after``:
the monitor on, HOROVOD_PEER_TIMEOUT_SECONDS unset), and with this tree's library and
the monitor off (HOROVOD_PEER_TIMEOUT_SECONDS=0), in an order that rotates each round.
The ratio before time / after time is taken per round and size and reported as median
[min-max], with the verdict for >= 0.97 (rounds.verdict). Writes
<results>/liveness_cost.json.
"""

import argparse
import os
import sys
import tempfile

from lib import formats, jsonio, paths, rounds, tables, targets
from wheel_vs_source import REPO, _chain_seconds

GOAL = targets.WHEEL_GOAL  # the same "costs nothing measurable" bound
RUNS = ("before", "after", "after_off")


def _run(which, libraries, args, tmp, r):
    env = dict(os.environ)
    os.environ.pop("HOROVOD_PEER_TIMEOUT_SECONDS", None)
    if which == "after_off":
        os.environ["HOROVOD_PEER_TIMEOUT_SECONDS"] = "0"
    try:
        return _chain_seconds(libraries[which], args.sizes, args.np, tmp, "%s-%d" % (which, r))
    finally:
        os.environ.clear()
        os.environ.update(env)


def _us(s):
    return "%.1f [%.1f-%.1f]" % tuple(x * 1e6 for x in (s["median"], s["min"], s["max"]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="_hvd.so built before the monitor")
    parser.add_argument("--after", default=os.path.join(REPO, "tf_hvd", "_hvd.so"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--sizes", default="4K,64K,1M,16M")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    results_dir = paths.ensure_dir(args.results_dir)
    libraries = {"before": args.before, "after": args.after, "after_off": args.after}
    per_round = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = RUNS[r % 3:] + RUNS[:r % 3]
            got = {which: _run(which, libraries, args, tmp, r) for which in order}
            per_round.append(got)
            tables.log("round %d: %s" % (r + 1, {w: {s: "%.1f us" % (t * 1e6) for s, t in
                                                     v.items()} for w, v in got.items()}))
    rows = []
    print("size     before us          after us           after, monitor off us   "
          "before/after          verdict (>= %.2f)" % GOAL)
    for size in sorted(per_round[0]["before"]):
        cols = {w: rounds.spread([g[w].get(size) for g in per_round]) for w in RUNS}
        ratios = [g["before"][size] / g["after"][size] for g in per_round]
        ratio = rounds.spread(ratios)
        verdict = rounds.verdict(ratios, ">=", GOAL)
        rows.append(dict({"bytes": size, "ratio": ratio, "verdict": verdict},
                         **{w + "_s": cols[w] for w in RUNS}))
        print("%-8s %-18s %-18s %-23s %-21s %s" % (
            formats.human_bytes(size).replace(" ", ""), _us(cols["before"]), _us(cols["after"]),
            _us(cols["after_off"]),
            "%.3f [%.3f-%.3f]" % (ratio["median"], ratio["min"], ratio["max"]), verdict))
    jsonio.write_json(os.path.join(results_dir, "liveness_cost.json"),
                      {"np": args.np, "rounds": args.rounds, "goal": GOAL, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
