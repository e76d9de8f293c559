"""compare.py --contention: tf_hvd's training under one extra busy process.

    python python/benchmarks/compare.py --contention [--quick] [--rounds N]

Trains the MLP with Keras model.fit (training_bench.py's set-up) for the tf_hvd
contenders, each with its compute bound measured in its own processes (the same
steps without any allreduce, right before or after: same_processes_bound), once on
the machine as it is ("quiet") and once while one extra process runs a CPU-bound
Python loop ("busy"; started before the contender and killed after it, its CPU time
recorded as proof that it ran). Each round runs both conditions, in the order
quiet-busy, busy-quiet, ... so drift weighs on both.

Per round and condition: fit / bound (tf_hvd's samples/s over its own bound's, both
under the same condition); per round: (busy fit / bound) / (quiet fit / bound),
against the goal >= 0.8 (lib/targets.py's CONTENTION_GOAL), verdict as in lib/rounds.py. The bound's
ranks are counted over the time both were in their timed windows (training_bench.py):
the busy loop takes its share of that time from the bound as it does from tf_hvd.
The separate no_allreduce job (two processes that never meet) runs too, for its own
busy/quiet figure, and as a second ratio (fit_vs_separate_bound_*).
Writes <results>/compare-contention.json (--tag changes the prefix).
"""

import copy

from lib import formats, jsonio, launch, machine, paths, rounds, tables, targets
import training_bench

CONTENDERS = ("tf_hvd_gloo", "tf_hvd_mpi", "no_allreduce")
CONDITIONS = ("quiet", "busy")
MODEL, MODE = "mlp", "fit"
GOAL = targets.CONTENTION_GOAL  # busy fit/bound over quiet fit/bound
# Timed MLP steps: windows of 1-2 s quiet (2-5 s busy) in --quick, twice that in a
# full run. The busy loop and the ranks share a core in slices of milliseconds, and
# the kernel moves tasks between the cores over tens of them: half-second windows
# (training_bench.py's quick MLP) caught a different share in every run.
STEPS = {True: 600, False: 1200}


def _conditions(index):
    return CONDITIONS if index % 2 == 0 else tuple(reversed(CONDITIONS))


def _record(runs, contender):
    rec = training_bench.find(launch.part_records(runs, training_bench.PART), contender,
                              MODEL, MODE)
    return rec if rec and rec["finite_loss"] else None


def _throughput(runs, contender):
    rec = _record(runs, contender)
    return rec["samples_per_s"] if rec else None


def _own_bound(runs, contender):
    bound = (_record(runs, contender) or {}).get("same_processes_bound") or {}
    return bound.get("samples_per_s") if bound.get("finite_loss") else None


def _ratio(a, b):
    return a / b if (a is not None and b) else None


def evaluate(per_round):
    """per_round: [{condition: runs by name}] -> the rows of the summary."""
    rows = []
    bound = {c: [_throughput(r[c], "no_allreduce") for r in per_round] for c in CONDITIONS}
    for hvd in launch.TF_HVD:
        fit = {c: [_throughput(r[c], hvd) for r in per_round] for c in CONDITIONS}
        own = {c: [_own_bound(r[c], hvd) for r in per_round] for c in CONDITIONS}
        of_bound = {c: [_ratio(f, b) for f, b in zip(fit[c], own[c])] for c in CONDITIONS}
        of_separate = {c: [_ratio(f, b) for f, b in zip(fit[c], bound[c])]
                       for c in CONDITIONS}
        kept = [_ratio(b, q) for b, q in zip(of_bound["busy"], of_bound["quiet"])]
        transport = hvd.split("_")[-1]
        row = {"name": "contention_mlp_fit_vs_bound[%s]" % transport, "tf_hvd": hvd,
               "description": "MLP Keras fit / compute bound with one busy process, over "
                              "the same without it (per round)",
               "comparison": ">=", "target": GOAL,
               "ratio_spread": rounds.spread(kept),
               "verdict": rounds.verdict(kept, ">=", GOAL)}
        for c in CONDITIONS:
            row["samples_per_s_%s" % c] = rounds.spread(fit[c])
            row["fit_vs_bound_%s" % c] = rounds.spread(of_bound[c])
            row["own_bound_samples_per_s_%s" % c] = rounds.spread(own[c])
            row["fit_vs_separate_bound_%s" % c] = rounds.spread(of_separate[c])
        own_kept = [_ratio(b, q) for b, q in zip(own["busy"], own["quiet"])]
        row["own_bound_busy_vs_quiet"] = rounds.spread(own_kept)
        row["ratio"] = row["ratio_spread"]["median"]
        rows.append(row)
    bound_kept = [_ratio(b, q) for b, q in zip(bound["busy"], bound["quiet"])]
    extras = {"bound_samples_per_s_quiet": rounds.spread(bound["quiet"]),
              "bound_samples_per_s_busy": rounds.spread(bound["busy"]),
              "bound_busy_vs_quiet": rounds.spread(bound_kept)}
    return rows, extras


def print_summary(rows, extras, n_rounds):
    table = []
    for r in rows:
        table.append([r["name"], rounds.fmt_spread(r["fit_vs_bound_quiet"]),
                      rounds.fmt_spread(r["fit_vs_bound_busy"]),
                      rounds.fmt_spread(r["ratio_spread"]), ">= %s" % formats.fmt(GOAL),
                      r["verdict"] or "no data"])
    tables.print_table(
        "Contention: tf_hvd MLP fit / its own compute bound, without and with one busy process, "
        "median [min-max] of %d interleaved rounds" % n_rounds,
        ["target", "fit/bound quiet", "fit/bound busy", "busy/quiet", "goal", "verdict"], table)
    for r in rows:
        tables.log("%s samples/s: quiet %s, busy %s; its own bound: quiet %s, busy %s "
                   "(busy/quiet %s)" % (
                       r["tf_hvd"], rounds.fmt_spread(r["samples_per_s_quiet"]),
                       rounds.fmt_spread(r["samples_per_s_busy"]),
                       rounds.fmt_spread(r["own_bound_samples_per_s_quiet"]),
                       rounds.fmt_spread(r["own_bound_samples_per_s_busy"]),
                       rounds.fmt_spread(r["own_bound_busy_vs_quiet"])))
    tables.log("separate bound job (no_allreduce) samples/s: quiet %s, busy %s; busy/quiet %s"
               % (rounds.fmt_spread(extras["bound_samples_per_s_quiet"]),
                  rounds.fmt_spread(extras["bound_samples_per_s_busy"]),
                  rounds.fmt_spread(extras["bound_busy_vs_quiet"])))


def main(args, n_rounds):
    args = copy.copy(args)
    args.contenders = ",".join(CONTENDERS)
    cfg = training_bench.make_config(args.quick, models=(MODEL,), modes=(MODE,),
                                     steps=STEPS[bool(args.quick)])
    cfg["reference_workers"] = args.np
    parts = {training_bench.PART: training_bench}
    tag = (args.tag or "compare") + "-contention"
    header = jsonio.run_header("compare-contention", args)
    header["config"] = {training_bench.PART: cfg}
    header["rounds"] = n_rounds
    memcpy_start = machine.memcpy_gbps()
    per_round = []
    contenders = {}
    for index in range(n_rounds):
        by_condition = {}
        for condition in _conditions(index):
            tables.log("[contention] round %d of %d, %s" % (index + 1, n_rounds, condition))
            contenders, runs = launch.run_all(
                "contention", parts, args, {training_bench.PART: cfg}, CONTENDERS,
                order=lambda names, i=index: rounds.round_order(names, i),
                tag="%s-r%d-%s" % (tag, index + 1, condition),
                around=(lambda name: rounds.BusyProcess()) if condition == "busy" else None)
            by_condition[condition] = runs
        per_round.append(by_condition)
    memcpy_end = machine.memcpy_gbps()
    jsonio.finish_header(header)
    header["machine_record"] = machine.machine_record(header, memcpy_start, memcpy_end)
    rows, extras = evaluate(per_round)
    print_summary(rows, extras, n_rounds)
    machine.log_machine_record(header["machine_record"])
    data = dict(header)
    data["contenders"] = dict((name, c.describe()) for name, c in contenders.items())
    data["targets"] = rows
    data["bound"] = extras
    data["round_runs"] = [
        dict((cond, dict((c, {"status": run["status"], "seconds": run["seconds"],
                              "loadavg_1min": run["loadavg_1min"],
                              "around": run.get("around")})
                         for c, run in runs.items())) for cond, runs in r.items())
        for r in per_round]
    results_dir = paths.ensure_dir(args.results_dir)
    path = "%s/%s.json" % (results_dir, tag)
    jsonio.write_json(path, data)
    tables.log("wrote %s" % path)
    ok = all(run["status"] == "ok" for r in per_round for runs in r.values()
             for run in runs.values())
    return 0 if ok else 1
