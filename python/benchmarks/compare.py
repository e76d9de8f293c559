"""Compare mode: every benchmark, every contender, one summary with the ratios
tf_hvd / alternative against the targets.

    python python/benchmarks/compare.py [--quick] [--rounds 5] [--np 2] [--results-dir DIR]
    python python/benchmarks/compare.py --contention [--quick]
    python python/benchmarks/compare.py --agreement QUICK/compare.json FULL/compare.json

Each round starts every contender once (its own set of processes), one after
the other, and each runs all the parts it takes part in: allreduce, fusion and
training (see those files). The rounds are interleaved (lib/rounds.py): every figure
is the median over the rounds with its spread (min-max), every ratio is taken
per round from the two contenders' runs of that round, and a target is "met"
only when the whole spread of its ratio clears the goal ("not met" when none of
it does, "unclear" otherwise). The machine is recorded with the figures: a 256
MiB memcpy measured at the start and the end of the run, cores, load average,
CPU model, date and commit. Writes, under the results directory,
compare-allreduce/-fusion/-training.{json,png} (the median round of every
figure, with its spread) and the summary compare.json + compare.png; prints
every table and the summary. --contention: see contention.py.

The targets (ratios at np=2 on a 2-core machine), their goals and where each goal came
from are a table, lib/targets.py; this file looks their values up in the part records.
Allreduce figures are chain mode (allreduce_bench.py: dependent allreduces inside one
tf.function, time per allreduce = call time / chain length), so TensorFlow's per-call
dispatch is not what is compared; training is judged against the compute bound measured
in the contender's own processes.

The summary also prints the chain allreduce per size (tf_hvd Gloo and MPI, the best
mpi4py way, memcpy, and the ratios, each median [min-max] over the rounds); the JSON
holds it as "chain_allreduce". --rounds: at least 5 (3 with --quick). --quick keeps
every warm-up and times fewer calls; --agreement checks a quick run against a full
one (each ratio: the median of either run inside the other's spread; chain targets
also over the rounds run on the same placement of the CPUs) and writes
<tag>-agreement.json.
"""

import argparse
import re
import sys

import allreduce_bench
import contention
import fusion_bench
import training_bench
from lib import formats, jsonio, launch, machine, paths, rounds, tables, targets

PARTS = {"allreduce": allreduce_bench, "fusion": fusion_bench, "training": training_bench}
MPI4PY = ("mpi4py", "mpi4py_malloc")
MPI4PY_MODES = ("numpy", "numpy_inplace")
ROUNDS, QUICK_ROUNDS = 5, 3  # interleaved rounds (--rounds): the default and the least


# ---------------------------------------------------------------------------
# Looking values up in the records


def _allreduce(records, contender, nbytes, mode="function"):
    for rec in records:
        if (rec["contender"], rec["bytes"], rec["mode"]) == (contender, nbytes, mode):
            return rec if rec["correct"] else None
    return None


def _latency(records, contender, nbytes, mode="function"):
    rec = _allreduce(records, contender, nbytes, mode)
    return rec["latency_us"]["median"] if rec else None


def _busbw(records, contender, nbytes, mode="function"):
    rec = _allreduce(records, contender, nbytes, mode)
    return rec["busbw_gbps"] if rec else None


def _best_mpi4py(records, nbytes, key):
    """(label, value) of the strongest mpi4py variant for one size (either malloc
    setting, send/receive buffers or in place); key: latency|busbw."""
    found = []
    for name in MPI4PY:
        for mode in MPI4PY_MODES:
            value = (_latency if key == "latency" else _busbw)(records, name, nbytes, mode)
            if value is not None:
                found.append((value, name if mode == "numpy" else "%s[%s]" % (name, mode)))
    if not found:
        return None, None
    value, name = (min if key == "latency" else max)(found)
    return name, value


def _fusion_rate(records, contender):
    best = fusion_bench.best_by_contender(records).get(contender)
    if not best or not best["correct"]:
        return None, None
    return best["steps_per_s"], best["variant"]


def _training(records, contender, model, mode):
    rec = training_bench.find(records, contender, model, mode)
    if not rec or not rec["finite_loss"]:
        return None
    return rec["samples_per_s"]


def _own_bound(records, contender, model, mode):
    """The bound a tf_hvd contender measured in its own processes (no allreduce)."""
    rec = training_bench.find(records, contender, model, mode)
    bound = (rec or {}).get("same_processes_bound") or {}
    return bound.get("samples_per_s") if bound.get("finite_loss") else None


# ---------------------------------------------------------------------------
# Targets (their names, goals and origins: lib/targets.py)


def size_label(nbytes):
    """268435456 -> '256MiB' (the size as it appears in target names)."""
    return formats.human_bytes(nbytes).replace(" ", "")


# the sizes of the allreduce-vs-mpi4py targets (every size 64 KiB..256 MiB)
CHAIN_TARGET_SIZES = [s for s in allreduce_bench.SIZES if s >= 64 * formats.KiB]
BOUND_GOAL = targets.GOALS["bound"].goal              # training: tf_hvd / compute bound
MPI4PY_GOAL = targets.GOALS["chain_vs_mpi4py"].goal   # chain bus bandwidth / best mpi4py
MEMCPY_GOAL = targets.GOALS["memcpy"].goal            # 256 MiB chain bus bandwidth / memcpy


def evaluate_targets(parts):
    """The list of target checks (one per tf_hvd transport) from the part records
    of one round (aggregate() combines the rounds), in lib/targets.py's order."""
    ar, fu, tr = parts.get("allreduce", []), parts.get("fusion", []), parts.get("training", [])
    small, large = 4 * formats.KiB, 256 * formats.MiB
    check = targets.check
    found = []

    def each_transport(key, value_of, alternative, alt_value, detail=None, **names):
        for hvd in launch.TF_HVD:
            mine = value_of(hvd)
            found.append(check(key, hvd, alternative, mine, alt_value,
                               detail=detail(hvd, mine) if callable(detail) else detail,
                               transport=hvd.split("_")[-1], **names))

    # Inside a tf.function (chain mode: per allreduce, without TensorFlow's ~0.1-0.2 ms
    # per-call overhead, which no collective can avoid).
    mpi_name, mpi_lat = _best_mpi4py(ar, small, "latency")
    for hvd in launch.TF_HVD:
        transport, lat = hvd.split("_")[-1], _latency(ar, hvd, small, "chain")
        found.append(check("latency_vs_mwms", hvd, "mwms_ring", lat,
                           _latency(ar, "mwms_ring", small, "chain"), transport=transport,
                           chain=allreduce_bench.CHAIN_LENGTHS[small],
                           mwms_chain=allreduce_bench.MWMS_CHAIN_MAX))
        found.append(check("latency_vs_mpi4py", hvd, mpi_name, lat, mpi_lat,
                           transport=transport))
        found.append(check("unnamed_eager", hvd, hvd, _latency(ar, hvd, small, "eager_unnamed"),
                           _latency(ar, hvd, small, "eager"), transport=transport,
                           detail="alternative: the same contender, named"))
    for nbytes in CHAIN_TARGET_SIZES:
        mpi_name, mpi_bw = _best_mpi4py(ar, nbytes, "busbw")
        each_transport("chain_vs_mpi4py", lambda h: _busbw(ar, h, nbytes, "chain"), mpi_name,
                       mpi_bw, size=size_label(nbytes), human_size=formats.human_bytes(nbytes))
    each_transport("memcpy", lambda h: _busbw(ar, h, large, "chain"), "numpy_local copy",
                   _busbw(ar, "numpy_local", large, "copy"))
    # Training at the compute bound, measured by each tf_hvd contender in its own
    # processes (the separate no_allreduce job's ratio is among the other ratios).
    for model in training_bench.MODELS:
        for mode in training_bench.MODES:
            separate = _training(tr, "no_allreduce", model, mode)
            for hvd in launch.TF_HVD:
                mine = _training(tr, hvd, model, mode)
                found.append(check(
                    "bound", hvd, "same processes, no allreduce", mine,
                    _own_bound(tr, hvd, model, mode), transport=hvd.split("_")[-1],
                    mode=mode, model=model, model_upper=model.upper(),
                    what="Keras model.fit" if mode == "fit" else
                    "DistributedGradientTape tf.function loop",
                    detail="against the separate no_allreduce job: %s"
                    % formats.fmt(mine / separate if mine and separate else None)))
    mwms_rate, mwms_variant = _fusion_rate(fu, "mwms_ring")
    each_transport("fusion_vs_mwms", lambda h: _fusion_rate(fu, h)[0], "mwms_ring", mwms_rate,
                   detail=lambda h, _: "tf_hvd variant %s, MWMS variant %s"
                   % (_fusion_rate(fu, h)[1], mwms_variant))
    for model in ("mlp", "cnn"):
        mwms = _training(tr, "mwms_ring", model, "fit")
        bound = _training(tr, "no_allreduce", model, "fit")
        each_transport("fit_%s_vs_mwms" % model, lambda h: _training(tr, h, model, "fit"),
                       "mwms_ring", mwms,
                       detail="compute bound (N processes, no allreduce)/MWMS: %s"
                       % formats.fmt(bound / mwms if bound and mwms else None))
    mpi_rate, mpi_variant = _best_fusion_mpi4py(fu)
    each_transport("fusion_vs_mpi4py", lambda h: _fusion_rate(fu, h)[0], mpi_variant, mpi_rate,
                   detail=lambda h, _: "tf_hvd variant %s, mpi4py %s"
                   % (_fusion_rate(fu, h)[1], mpi_variant))
    single = _training(tr, "single_process", "mlp", "tape")
    bound = _training(tr, "no_allreduce", "mlp", "tape")
    each_transport("tape_vs_single", lambda h: _training(tr, h, "mlp", "tape"),
                   "single_process", single,
                   detail="compute bound (N processes, no allreduce)/one process: %s"
                   % formats.fmt(bound / single if bound and single else None))
    return found


def _best_fusion_mpi4py(records):
    """(steps/s, 'contender variant') of the fastest correct mpi4py way."""
    best = None
    for name in MPI4PY:
        rate, variant = _fusion_rate(records, name)
        if rate is not None and (best is None or rate > best[0]):
            best = (rate, "%s %s" % (name, variant))
    return best or (None, None)


def _ratio_row(name, mine, alternative, theirs):
    return {"name": name, "tf_hvd_value": mine, "alternative": alternative,
            "alternative_value": theirs, "ratio": mine / theirs if mine and theirs else None}


def extra_ratios(parts):
    """Informative ratios without a target."""
    ar, tr = parts.get("allreduce", []), parts.get("training", [])
    out = []
    large = 256 * formats.MiB
    mpi_name, mpi_bw = _best_mpi4py(ar, large, "busbw")
    for hvd in launch.TF_HVD:
        transport = hvd.split("_")[-1]
        for mode in ("function", "eager"):  # one tf.function / eager call per allreduce
            out.append(_ratio_row(
                "latency_4KiB_per_%s_call_vs_mwms[%s]" % (mode, transport),
                _latency(ar, hvd, 4 * formats.KiB, mode), "mwms_ring",
                _latency(ar, "mwms_ring", 4 * formats.KiB, mode)))
        # the per-call view of the 256 MiB bandwidth (TensorFlow's dispatch included)
        out.append(_ratio_row("busbw_256MiB_per_function_call_vs_mpi4py[%s]" % transport,
                              _busbw(ar, hvd, large), mpi_name, mpi_bw))
        for model in training_bench.MODELS:
            for mode in training_bench.MODES:
                for alt in ("mwms_ring", "single_process", "no_allreduce"):
                    if (mode, alt) == ("fit", "mwms_ring") or (
                            (model, mode, alt) == ("mlp", "tape", "single_process")):
                        continue  # a target already
                    out.append(_ratio_row(
                        "%s_%s_vs_%s[%s]" % (mode, model, alt, transport),
                        _training(tr, hvd, model, mode), alt, _training(tr, alt, model, mode)))
    return out


# ---------------------------------------------------------------------------
# The chain allreduce per size: one compact table


def _chain_round(ar, nbytes):
    """The figures of one size in one round: tf_hvd's chain latency and bus
    bandwidth per transport, the best mpi4py way, memcpy and the ratios."""
    mpi_name, mpi_bw = _best_mpi4py(ar, nbytes, "busbw")
    copy = _busbw(ar, "numpy_local", nbytes, "copy")
    row = {"mpi4py_best_gbps": mpi_bw, "mpi4py_best": mpi_name, "memcpy_gbps": copy}
    for hvd in launch.TF_HVD:
        t = hvd.split("_")[-1]
        bw = _busbw(ar, hvd, nbytes, "chain")
        row["%s_latency_us" % t] = _latency(ar, hvd, nbytes, "chain")
        row["%s_busbw_gbps" % t] = bw
        row["%s_vs_mpi4py" % t] = bw / mpi_bw if bw and mpi_bw else None
        row["%s_vs_memcpy" % t] = bw / copy if bw and copy else None
    return row


CHAIN_FIELDS = ("gloo_latency_us", "gloo_busbw_gbps", "mpi_latency_us", "mpi_busbw_gbps",
                "mpi4py_best_gbps", "memcpy_gbps", "gloo_vs_mpi4py", "mpi_vs_mpi4py",
                "gloo_vs_memcpy", "mpi_vs_memcpy")


def chain_table(parts_per_round):
    """Per size with a tf_hvd chain record: every CHAIN_FIELDS figure as a spread
    over the rounds (each ratio from the figures of one round), the chain length
    and the mpi4py way(s) that were best."""
    sizes = sorted(set(r["bytes"] for p in parts_per_round for r in p.get("allreduce", [])
                       if r["mode"] == "chain" and r["contender"] in launch.TF_HVD))
    table = []
    for nbytes in sizes:
        per_round = [_chain_round(p.get("allreduce", []), nbytes) for p in parts_per_round]
        lengths = [r.get("chain_length") for p in parts_per_round for r in p["allreduce"]
                   if r["bytes"] == nbytes and r["mode"] == "chain"
                   and r["contender"] in launch.TF_HVD]
        row = {"bytes": nbytes, "size": formats.human_bytes(nbytes),
               "chain_length": _labels(lengths),
               "mpi4py_best": _labels([r["mpi4py_best"] for r in per_round])}
        for field in CHAIN_FIELDS:
            row[field] = rounds.spread([r[field] for r in per_round])
        table.append(row)
    return table


def print_chain_table(table):
    def med(s):
        return formats.fmt(s["median"])
    rows = [[r["size"], r["chain_length"], med(r["gloo_latency_us"]), med(r["gloo_busbw_gbps"]),
             med(r["mpi_latency_us"]), med(r["mpi_busbw_gbps"]), med(r["mpi4py_best_gbps"]),
             med(r["memcpy_gbps"])] + [rounds.fmt_spread(r[f]) for f in CHAIN_FIELDS[6:]]
            for r in table]
    tables.print_table(
        "Allreduce inside tf.function (chain: per allreduce = call / ops), bus bandwidth in "
        "GB/s, medians over the rounds; ratios median [min-max] of the per-round ratios "
        "(goal: >= %s x mpi4py from 64 KiB, >= %s x memcpy at 256 MiB)"
        % (formats.fmt(MPI4PY_GOAL), formats.fmt(MEMCPY_GOAL)),
        ["size", "ops", "gloo us", "gloo GB/s", "mpi us", "mpi GB/s", "mpi4py best GB/s",
         "memcpy GB/s", "gloo/mpi4py", "mpi/mpi4py", "gloo/memcpy", "mpi/memcpy"], rows)


# ---------------------------------------------------------------------------
# The host's placement of the two CPUs (machine.cpu_placement, before and after
# each contender): this VM's host moves its two vCPUs between one chiplet and two
# for minutes at a time, and every shared-memory allreduce slows several-fold on
# two. A ratio of two contenders means something only where both ran on the same.

FAR_FACTOR = 2.0  # a round trip this many times the run's fastest: the CPUs are apart


def placement_labels(per_round):
    """[{contender: "near" | "far" | "changed" | None}] per round, from the round
    trips measured before and after each run against the fastest of the whole run."""
    trips = [p["round_trip_ns"] for runs in per_round for run in runs.values()
             for p in (run.get("placement") or {}).values() if p and "round_trip_ns" in p]
    if not trips:
        return [dict((c, None) for c in runs) for runs in per_round]
    far = FAR_FACTOR * min(trips)
    labels = []
    for runs in per_round:
        row = {}
        for name, run in runs.items():
            seen = [p.get("round_trip_ns") for p in (run.get("placement") or {}).values() if p]
            seen = [t for t in seen if t is not None]
            if len(seen) < 2:
                row[name] = None
            elif all(t < far for t in seen):
                row[name] = "near"
            elif all(t >= far for t in seen):
                row[name] = "far"
            else:
                row[name] = "changed"
        labels.append(row)
    return labels


PLACED_TARGETS = ("allreduce_chain_", "busbw_256MiB_vs_memcpy")


def same_placement(targets, per_round_targets, labels):
    """Adds to each chain target (aggregated from per_round_targets) the labels of its
    two contenders per round and the ratio spread and verdict over the rounds where
    both ran on the same placement ("near" or "far", the same for both)."""
    for i, t in enumerate(targets):
        if not t["name"].startswith(PLACED_TARGETS) or "target" not in t:
            continue
        pairs, kept = [], []
        for index, row in enumerate(labels):
            # "mpi4py[numpy_inplace]", "numpy_local copy": the contender's name first
            alt = re.split(r"[\s\[]", str(per_round_targets[index][i]["alternative"]))[0]
            pair = (row.get(t["tf_hvd"]), row.get(alt))
            pairs.append(list(pair))
            ratio = t["ratio_spread"]["values"][index]
            if pair[0] in ("near", "far") and pair[0] == pair[1] and ratio is not None:
                kept.append((pair[0], ratio))
        t["placement_per_round"] = pairs
        t["same_placement_ratio_spread"] = rounds.spread([r for _, r in kept])
        t["same_placement_rounds"] = [p for p, _ in kept]
        t["same_placement_verdict"] = (rounds.verdict([r for _, r in kept], t["comparison"],
                                                      t["target"]) if kept else "no such round")
    return targets


def print_placement(targets):
    rows = [[t["name"], rounds.fmt_spread(t["ratio_spread"]),
             " ".join("%s/%s" % tuple((x or "-")[0] for x in p) for p in t["placement_per_round"]),
             rounds.fmt_spread(t["same_placement_ratio_spread"]),
             ",".join(t["same_placement_rounds"]) or "-", t["same_placement_verdict"]]
            for t in targets if "placement_per_round" in t]
    if rows:
        tables.print_table(
            "Chain targets by the host's placement of the two CPUs (n: near, f: far, c: "
            "changed during the run; tf_hvd/alternative per round): the ratio over the rounds "
            "where both contenders ran on the same placement",
            ["target", "all rounds", "placement per round", "same placement", "rounds",
             "verdict"], rows)


# ---------------------------------------------------------------------------
# Combining the rounds


def _labels(values):
    """One label, or 'a / b' when the rounds picked different ones."""
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen[0] if len(seen) == 1 else " / ".join(str(v) for v in seen)


def aggregate(per_round):
    """[targets or ratios of round 1, of round 2, ...] -> one list: values and
    ratios as medians over the rounds, with their spreads ('*_spread') and, where
    there is a goal, the verdict over the spread of the per-round ratios."""
    combined = []
    for index, first in enumerate(per_round[0]):
        rows = [r[index] for r in per_round]
        if any(row["name"] != first["name"] for row in rows):
            raise RuntimeError("the rounds' checks differ at %s" % first["name"])
        agg = dict(first)
        for field in ("tf_hvd_value", "alternative_value", "ratio"):
            agg[field + "_spread"] = rounds.spread([row[field] for row in rows])
            agg[field] = agg[field + "_spread"]["median"]
        agg["alternative"] = _labels([row["alternative"] for row in rows])
        if "target" in first:
            agg["verdict"] = rounds.verdict(agg["ratio_spread"]["values"], first["comparison"],
                                            first["target"])
            agg["met"] = {"met": True, "not met": False}.get(agg["verdict"])
            ratios = [row["ratio"] for row in rows]
            if first.get("detail") and agg["ratio"] is not None:
                # the detail of the round whose ratio is nearest the median
                nearest = min((abs(r - agg["ratio"]), i) for i, r in enumerate(ratios)
                              if r is not None)[1]
                agg["detail"] = rows[nearest]["detail"]
        combined.append(agg)
    return combined


# how one figure of each part is named across rounds, and the value its median is of
MERGE = {
    "allreduce": (lambda r: (r["contender"], r["bytes"], r["mode"]),
                  lambda r: r["latency_us"]["median"] if r["correct"] else None, True),
    "fusion": (lambda r: (r["contender"], r["variant"]),
               lambda r: r["steps_per_s"] if r["correct"] else None, False),
    "training": (lambda r: (r["contender"], r["model"], r["mode"]),
                 lambda r: r["samples_per_s"] if r["finite_loss"] else None, False),
}


# ---------------------------------------------------------------------------
# Quick against full: do a --quick run and a full run agree?


def spreads_agree(a, b):
    """Whether two runs' spreads of one ratio agree: the median of either lies inside
    the other's [min-max] (None without data). Not only the full median inside the
    quick spread: with 3 quick rounds that fails one time in four for two runs of the
    very same distribution (the full median lies below all 3 or above all 3 with
    probability 2/8)."""
    inside = (rounds.within(a and a.get("median"), b), rounds.within(b and b.get("median"), a))
    return None if None in inside else any(inside)


def agreement(quick, full):
    """Per target and other ratio in both compare.json summaries: the quick and the
    full ratio spreads and whether they agree (spreads_agree). Chain targets also
    compare their spreads over the rounds where both contenders ran on the same
    placement of the host's CPUs, placement by placement ("near" rounds with "near"
    rounds), where both runs have such rounds."""
    full_rows = dict((r["name"], r) for r in full.get("targets", []) + full.get(
        "other_ratios", []))
    rows = []
    for q in quick.get("targets", []) + quick.get("other_ratios", []):
        f = full_rows.get(q["name"])
        if f is None:
            continue
        row = {"name": q["name"], "quick": q["ratio_spread"], "full": f["ratio_spread"],
               "agrees": spreads_agree(q["ratio_spread"], f["ratio_spread"]),
               "quick_verdict": q.get("verdict"), "full_verdict": f.get("verdict")}
        row.update(_placement_agreement(q, f))
        rows.append(row)
    return rows


def _placement_agreement(q, f):
    """The same-placement comparison of one chain target (empty for other ratios):
    the first placement ("near", then "far") on which both runs have rounds; whether
    the spreads agree (only where both have 3 such rounds or more: a spread of one
    round has no width), the quick median's relative difference, and both runs'
    same-placement verdicts."""
    if "placement_per_round" not in q or "placement_per_round" not in f:
        return {}
    for place in ("near", "far"):
        spreads = []
        for t in (q, f):
            values = [v for v, p in zip(t["ratio_spread"]["values"], t["placement_per_round"])
                      if v is not None and p[0] == p[1] == place]
            spreads.append(rounds.spread(values) if values else None)
        if spreads[0] and spreads[1]:
            wide = all(sp["n"] >= 3 for sp in spreads)
            return {"placement": place, "quick_same_placement": spreads[0],
                    "full_same_placement": spreads[1],
                    "agrees_same_placement": spreads_agree(*spreads) if wide else None,
                    "same_placement_difference":
                        spreads[0]["median"] / spreads[1]["median"] - 1.0,
                    "same_placement_verdicts": [q.get("same_placement_verdict"),
                                                f.get("same_placement_verdict")]}
    return {}


def agreement_record(quick, full, rows, paths):
    """What --agreement writes: the two runs (file, commit, rounds, machine) and the rows."""
    def run(data, path):
        return {"file": path, "command": data.get("command"), "commit": data.get("tf_hvd_git"),
                "rounds": data.get("rounds"), "created": data.get("created"),
                "machine_record": data.get("machine_record")}
    measured = [r for r in rows if r["agrees"] is not None]
    placed = [r for r in measured if "placement" in r]
    return {"benchmark": "compare-agreement", "quick": run(quick, paths[0]),
            "full": run(full, paths[1]), "rule": "the median of either run lies inside the "
            "other's spread [min-max]", "ratios": len(measured),
            "agree": sum(1 for r in measured if r["agrees"]),
            "same_placement_targets": len(placed),
            "same_placement_same_verdict": sum(
                1 for r in placed if len(set(r["same_placement_verdicts"])) == 1),
            "rows": rows}


def print_agreement(rows):
    measured = [r for r in rows if r["agrees"] is not None]
    tables.print_table(
        "Quick against full: ratio median [min-max] of each run's rounds; agrees: the "
        "median of either run lies inside the other's spread",
        ["ratio", "quick", "full", "agrees", "verdict quick", "verdict full"],
        [[r["name"], rounds.fmt_spread(r["quick"]), rounds.fmt_spread(r["full"]),
          formats.fmt(r["agrees"]), r["quick_verdict"] or "-", r["full_verdict"] or "-"]
         for r in measured])
    placed = [r for r in measured if "placement" in r]
    if placed:
        tables.print_table(
            "Chain targets over the rounds where tf_hvd and its alternative ran on the same "
            "placement of the CPUs, in both runs (agrees: only with 3 such rounds in each)",
            ["target", "placement", "quick", "full", "quick/full - 1", "agrees",
             "verdicts quick, full"],
            [[r["name"], r["placement"], rounds.fmt_spread(r["quick_same_placement"]),
              rounds.fmt_spread(r["full_same_placement"]),
              "%+.1f%%" % (100 * r["same_placement_difference"]),
              formats.fmt(r["agrees_same_placement"]),
              ", ".join(str(v) for v in r["same_placement_verdicts"])] for r in placed])
    tables.log("%d of %d ratios agree%s" % (
        sum(1 for r in measured if r["agrees"]), len(measured),
        "; chain targets on the same placement: medians within %+.1f%% to %+.1f%%, the same "
        "verdict in %d of %d" % (
            100 * min(r["same_placement_difference"] for r in placed),
            100 * max(r["same_placement_difference"] for r in placed),
            sum(1 for r in placed if len(set(r["same_placement_verdicts"])) == 1),
            len(placed)) if placed else ""))


# ---------------------------------------------------------------------------
# Output


def _measured(t):
    """Whether either side of a check has a figure (a part that was not run,
    --parts, leaves both empty: such checks are named once, not tabled)."""
    return t["tf_hvd_value"] is not None or t["alternative_value"] is not None


def print_summary(targets, extras, n_rounds):
    rows = []
    for t in filter(_measured, targets):
        rows.append([t["name"], rounds.fmt_spread(t["tf_hvd_value_spread"]),
                     rounds.fmt_spread(t["alternative_value_spread"]), t["unit"],
                     rounds.fmt_spread(t["ratio_spread"]),
                     "%s %s" % (t["comparison"], formats.fmt(t["target"])),
                     (t["verdict"] or "no data") + (" (stretch)" if t["stretch"] else "")])
    tables.print_table(
        "Summary: ratios tf_hvd / alternative against the targets, median [min-max] of %d "
        "interleaved rounds (met: the whole spread clears the goal)" % n_rounds,
        ["target", "tf_hvd", "alternative", "unit", "ratio", "goal", "verdict"], rows)
    unmeasured = [t["name"] for t in targets if not _measured(t)]
    if unmeasured:
        tables.log("no data (part not run or no correct result): %s" % ", ".join(unmeasured))
    for t in filter(_measured, targets):
        if t.get("detail"):
            tables.log("%s: %s" % (t["name"], t["detail"]))
    rows = [[e["name"], rounds.fmt_spread(e["tf_hvd_value_spread"]),
             rounds.fmt_spread(e["alternative_value_spread"]),
             rounds.fmt_spread(e["ratio_spread"])] for e in filter(_measured, extras)]
    tables.print_table("Other ratios (no target), median [min-max] over the rounds",
                       ["ratio", "tf_hvd", "alternative", "ratio"], rows)


def plot_targets(ax, targets):
    """Each target as 'how far past the goal' (>1 = met), log scale."""
    names, values, colors, texts, whiskers = [], [], [], [], []

    def score(t, ratio):
        return (t["target"] / ratio) if t["comparison"] == "<=" else (ratio / t["target"])
    for t in filter(_measured, targets):
        names.append(t["name"])
        if t["ratio"] is None:
            values.append(0)
            colors.append("#cccccc")
            texts.append("no data")
            whiskers.append(None)
            continue
        values.append(score(t, t["ratio"]))
        ends = sorted([score(t, t["ratio_spread"]["min"]), score(t, t["ratio_spread"]["max"])])
        whiskers.append(ends)  # the spread of the per-round ratios, on the same scale
        colors.append({"met": "#2ca02c", "unclear": "#bcbd22"}.get(
            t["verdict"], "#ff7f0e" if t["stretch"] else "#d62728"))
        texts.append("ratio %s (goal %s %s): %s" % (
            rounds.fmt_spread(t["ratio_spread"]), t["comparison"], formats.fmt(t["target"]),
            t["verdict"]))
    ys = range(len(names))
    positive = [v for v in values if v > 0]
    low = min(positive + [0.5]) / 2.0
    ax.barh(list(ys), [v if v > 0 else low for v in values], color=colors)
    for y, v, ends, text in zip(ys, values, whiskers, texts):
        if ends:
            ax.plot(ends, [y, y], color="black", lw=1.5)
        ax.text(max([v, low] + (ends or [])), y, " " + text, va="center", fontsize=7)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_yticks(list(ys))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    spread_ends = [e for ends in whiskers if ends for e in ends if e > 0]
    low = min([low] + [e / 2.0 for e in spread_ends])
    ax.set_xlim(low, max(positive + spread_ends + [2.0]) * 8)
    ax.set_xlabel("goal / ratio (lower-is-better) or ratio / goal (higher-is-better); "
                  ">= 1 (right of the line) = met", fontsize=8)
    ax.set_title("Targets: tf_hvd / alternative, median [min-max] of the rounds (green met, "
                 "olive unclear, red not met, orange stretch not met; black line: spread)")


def plot(parts, targets, contenders, header, path):
    plt = tables.pyplot()
    fig = plt.figure(figsize=(20, 16))
    grid = fig.add_gridspec(2, 3, height_ratios=(1, 1.5))  # ~40 targets below
    ax_lat, ax_bw = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_fu, ax_tr = fig.add_subplot(grid[0, 2]), fig.add_subplot(grid[1, 0])
    ax_t = fig.add_subplot(grid[1, 1:])
    if parts.get("allreduce"):
        # chain mode: per allreduce inside one tf.function (what the targets compare)
        allreduce_bench.plot_axes(ax_lat, ax_bw, parts["allreduce"], contenders,
                                  modes=("chain", "numpy", "numpy_inplace", "copy"))
        ax_lat.set_title("Allreduce latency inside tf.function, chain (lower is better)")
        ax_bw.set_title("Allreduce bus bandwidth inside tf.function, chain (higher is better)")
    if parts.get("fusion"):
        fusion_bench.plot_axes(ax_fu, parts["fusion"], contenders)
    if parts.get("training"):
        training_bench.plot_axes(ax_tr, parts["training"], contenders)
    plot_targets(ax_t, targets)
    fig.suptitle("tf_hvd vs MultiWorkerMirroredStrategy, raw MPI and memcpy, np=%s, median of "
                 "%s rounds%s" % (header.get("np"), header.get("rounds"),
                                  " (quick run)" if header.get("quick") else ""))
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    launch.add_common_arguments(parser, launch.ORDER)
    parser.add_argument("--parts", default="allreduce,fusion,training",
                        help="which benchmarks to include (default all)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds (default and least: %d, %d with --quick)"
                        % (ROUNDS, QUICK_ROUNDS))
    parser.add_argument("--contention", action="store_true",
                        help="instead: tf_hvd's MLP fit / compute bound with and without one "
                             "extra busy process, interleaved (contention.py)")
    parser.add_argument("--agreement", nargs=2, metavar=("QUICK_JSON", "FULL_JSON"),
                        help="instead: whether each ratio of a --quick run's compare.json "
                             "agrees with a full run's (the median of either inside the "
                             "other's spread); runs nothing")
    args = parser.parse_args(argv)
    if args.agreement:
        quick, full = (jsonio.read_json(path) for path in args.agreement)
        rows = agreement(quick, full)
        print_agreement(rows)
        path = "%s/%s-agreement.json" % (paths.ensure_dir(args.results_dir),
                                         args.tag or "compare")
        jsonio.write_json(path, agreement_record(quick, full, rows, args.agreement))
        tables.log("wrote %s" % path)
        return 0 if all(r["agrees"] is not False for r in rows) else 1
    least = QUICK_ROUNDS if args.quick else ROUNDS
    n_rounds = args.rounds or least
    if n_rounds < least:
        parser.error("--rounds must be at least %d%s: fewer rounds give no spread to judge "
                     "a target by" % (least, " with --quick" if args.quick else ""))
    if args.contention:
        return contention.main(args, n_rounds)
    names = formats.parse_list(args.parts)
    parts = dict((p, PARTS[p]) for p in names)
    configs = {}
    if "allreduce" in parts:
        configs["allreduce"] = allreduce_bench.make_config(
            allreduce_bench.SIZES, allreduce_bench.TF_MODES, args.quick)
    if "fusion" in parts:
        configs["fusion"] = fusion_bench.make_config(args.quick)
    if "training" in parts:
        configs["training"] = training_bench.make_config(args.quick)
        configs["training"]["reference_workers"] = args.np
    tag = args.tag or "compare"
    header = jsonio.run_header("compare", args)
    header["config"] = configs
    header["rounds"] = n_rounds
    memcpy_start = machine.memcpy_gbps()
    contenders, per_round = rounds.run_rounds(tag, parts, args, configs, launch.ORDER, n_rounds)
    memcpy_end = machine.memcpy_gbps()
    jsonio.finish_header(header)
    header["machine_record"] = machine.machine_record(header, memcpy_start, memcpy_end)
    results_dir = paths.ensure_dir(args.results_dir)
    last_runs = per_round[-1]
    parts_per_round = [dict((p, launch.part_records(runs, p)) for p in parts)
                       for runs in per_round]
    records = {}
    for name, module in parts.items():
        sub = dict(header)
        sub["benchmark"] = name
        sub["config"] = configs[name]
        key, value, lower = MERGE[name]
        merged = rounds.merge_records([r[name] for r in parts_per_round], key, value, lower)
        used = dict((c, contenders[c]) for c in contenders if contenders[c].kind in module.KINDS)
        records[name] = module.report(sub, used, dict((c, last_runs[c]) for c in used
                                                      if c in last_runs),
                                      results_dir, tag="%s-%s" % (tag, name), records=merged)
    labels = placement_labels(per_round)
    round_targets = [evaluate_targets(p) for p in parts_per_round]
    targets = same_placement(aggregate(round_targets), round_targets, labels)
    extras = aggregate([extra_ratios(p) for p in parts_per_round])
    chain = chain_table(parts_per_round) if "allreduce" in parts else []
    if chain:
        print_chain_table(chain)
    print_summary(targets, extras, n_rounds)
    print_placement(targets)
    machine.log_machine_record(header["machine_record"])
    summary = dict(header)
    summary["contenders"] = launch.contenders_section(contenders, last_runs)
    summary["round_runs"] = [dict((c, {"status": run["status"], "seconds": run["seconds"],
                                       "loadavg_1min": run["loadavg_1min"],
                                       "placement": run.get("placement"),
                                       "placement_label": labels[i].get(c)})
                                  for c, run in runs.items()) for i, runs in enumerate(per_round)]
    summary["targets"] = targets
    summary["all_targets_met"] = all(t["verdict"] == "met" for t in targets
                                     if not t["stretch"])
    summary["other_ratios"] = extras
    summary["chain_allreduce"] = chain
    summary["part_files"] = dict((p, "%s-%s.json" % (tag, p)) for p in parts)
    summary["results"] = records
    json_path = "%s/%s.json" % (results_dir, tag)
    png_path = "%s/%s.png" % (results_dir, tag)
    jsonio.write_json(json_path, summary)
    plot(records, targets, contenders, header, png_path)
    tables.log("wrote %s and %s" % (json_path, png_path))
    return 0 if all(r["status"] == "ok" for runs in per_round for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
