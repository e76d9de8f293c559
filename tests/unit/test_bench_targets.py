"""compare.py's targets of issue 22 from synthetic per-round records: the chain
allreduce against the best mpi4py way at every size, against memcpy at 256 MiB,
training against the compute bound, the per-size chain table, and the plan of
allreduce_bench.py's chain mode (every size; the same warm-up with --quick)."""

import json
import os
import platform
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "python", "benchmarks")
sys.path.insert(0, BENCH)

import allreduce_bench  # noqa: E402
from lib import formats, jsonio, machine  # noqa: E402
import compare  # noqa: E402

KiB, MiB = formats.KiB, formats.MiB


def allreduce_rec(contender, nbytes, mode, busbw, correct=True):
    """A record as allreduce_bench writes it, np=2 (bus bandwidth = bytes / time)."""
    seconds = nbytes / (busbw * formats.GB)
    return {"contender": contender, "bytes": nbytes, "mode": mode, "correct": correct,
            "latency_us": {"median": seconds * 1e6}, "busbw_gbps": busbw}


def training_rec(contender, model, mode, samples_per_s):
    return {"contender": contender, "model": model, "mode": mode,
            "samples_per_s": samples_per_s, "finite_loss": True}


def one_round(chain, mpi4py, copy=20.0, training=None):
    """chain: {(transport, bytes): busbw}; mpi4py: {bytes: (numpy, inplace) busbw of
    mpi4py, the malloc variant 1 GB/s lower}; training: {(contender, model, mode): s/s}."""
    ar = []
    for (transport, nbytes), bw in chain.items():
        ar.append(allreduce_rec("tf_hvd_" + transport, nbytes, "chain", bw))
    for nbytes, (plain, inplace) in mpi4py.items():
        ar += [allreduce_rec("mpi4py", nbytes, "numpy", plain),
               allreduce_rec("mpi4py", nbytes, "numpy_inplace", inplace),
               allreduce_rec("mpi4py_malloc", nbytes, "numpy", plain - 1.0),
               allreduce_rec("mpi4py_malloc", nbytes, "numpy_inplace", inplace - 1.0)]
        ar.append(allreduce_rec("numpy_local", nbytes, "copy", copy))
    tr = [training_rec(c, m, md, v) for (c, m, md), v in (training or {}).items()]
    return {"allreduce": ar, "training": tr}


def by_name(targets):
    return dict((t["name"], t) for t in targets)


def test_chain_targets_cover_every_size_from_64KiB_on_both_transports():
    names = [t["name"] for t in compare.evaluate_targets({})]
    sizes = ["64KiB", "256KiB", "1MiB", "4MiB", "16MiB", "64MiB", "256MiB"]
    assert [s for s in sizes if "allreduce_chain_%s_vs_mpi4py[gloo]" % s in names] == sizes
    assert [s for s in sizes if "allreduce_chain_%s_vs_mpi4py[mpi]" % s in names] == sizes
    assert "allreduce_chain_4KiB_vs_mpi4py[gloo]" not in names
    # superseded by the chain targets: the per-call (function mode) 256 MiB ratios
    for old in ("busbw_256MiB_vs_mpi4py[mpi]", "busbw_256MiB_vs_best_mpi4py[gloo]"):
        assert old not in names
    for kept in ("latency_4KiB_vs_mwms[gloo]", "unnamed_eager_4KiB_vs_named[mpi]",
                 "fusion_steps_vs_mwms[mpi]", "fit_cnn_vs_mwms[gloo]",
                 "tape_mlp_vs_single_process[mpi]"):
        assert kept in names
    assert len(names) == len(set(names))


def test_chain_vs_mpi4py_verdicts_use_the_best_way_of_each_round():
    size = MiB
    # per round: gloo and mpi chain busbw; mpi4py in place is the best way (numpy 2 lower)
    rounds_in = [(11.0, 9.0, 10.0), (12.0, 11.0, 10.0), (10.5, 10.0, 10.0)]
    per_round = [compare.evaluate_targets(one_round(
        {("gloo", size): g, ("mpi", size): m}, {size: (best - 2.0, best)}))
        for g, m, best in rounds_in]
    agg = by_name(compare.aggregate(per_round))
    gloo = agg["allreduce_chain_1MiB_vs_mpi4py[gloo]"]
    mpi = agg["allreduce_chain_1MiB_vs_mpi4py[mpi]"]
    assert gloo["ratio_spread"]["values"] == pytest.approx([1.1, 1.2, 1.05])
    assert (gloo["verdict"], gloo["met"]) == ("met", True)
    assert mpi["ratio_spread"]["values"] == pytest.approx([0.9, 1.1, 1.0])
    assert (mpi["verdict"], mpi["met"]) == ("unclear", None)
    assert gloo["alternative"] == "mpi4py[numpy_inplace]"
    assert (gloo["comparison"], gloo["target"], gloo["stretch"]) == (">=", 1.0, False)
    assert (gloo["unit"], gloo["better"]) == ("GB/s", "higher")
    assert gloo["alternative_value"] == 10.0


def test_chain_vs_mpi4py_not_met_and_no_data():
    size = 256 * MiB
    per_round = [compare.evaluate_targets(one_round({("gloo", size): g}, {size: (9.0, 11.0)}))
                 for g in (5.5, 7.7, 8.8)]
    agg = by_name(compare.aggregate(per_round))
    t = agg["allreduce_chain_256MiB_vs_mpi4py[gloo]"]
    assert t["ratio_spread"]["values"] == pytest.approx([0.5, 0.7, 0.8])
    assert (t["verdict"], t["met"]) == ("not met", False)
    # no MPI transport record at all: no data, not a failure
    t = agg["allreduce_chain_256MiB_vs_mpi4py[mpi]"]
    assert (t["verdict"], t["met"], t["ratio"]) == (None, None, None)


def test_a_wrong_result_gives_no_ratio():
    size = 64 * KiB
    parts = one_round({("gloo", size): 5.0}, {size: (4.0, 4.6)})
    parts["allreduce"][0]["correct"] = False
    t = by_name(compare.evaluate_targets(parts))["allreduce_chain_64KiB_vs_mpi4py[gloo]"]
    assert (t["tf_hvd_value"], t["ratio"], t["met"]) == (None, None, None)


def test_busbw_256MiB_vs_memcpy_is_a_target_not_a_stretch():
    size = 256 * MiB
    per_round = [compare.evaluate_targets(one_round(
        {("gloo", size): g, ("mpi", size): m}, {size: (9.0, 11.0)}, copy=20.0))
        for g, m in ((10.0, 8.0), (11.0, 12.0), (12.0, 9.0))]
    agg = by_name(compare.aggregate(per_round))
    gloo, mpi = agg["busbw_256MiB_vs_memcpy[gloo]"], agg["busbw_256MiB_vs_memcpy[mpi]"]
    assert (gloo["target"], gloo["comparison"], gloo["stretch"]) == (0.5, ">=", False)
    assert gloo["ratio_spread"]["values"] == pytest.approx([0.5, 0.55, 0.6])
    assert gloo["verdict"] == "met"
    assert mpi["ratio_spread"]["values"] == pytest.approx([0.4, 0.6, 0.45])
    assert mpi["verdict"] == "unclear"
    assert gloo["alternative"] == "numpy_local copy"


def test_training_against_the_bound_per_model_mode_and_transport():
    def training(fit_gloo, tape_mpi):
        rec = {}
        for model in ("mlp", "cnn"):
            for mode in ("fit", "tape"):
                rec[("no_allreduce", model, mode)] = 2000.0  # the separate job: not the bound
                rec[("tf_hvd_gloo", model, mode)] = 950.0
                rec[("tf_hvd_mpi", model, mode)] = 950.0
        rec[("tf_hvd_gloo", "mlp", "fit")] = fit_gloo
        rec[("tf_hvd_mpi", "cnn", "tape")] = tape_mpi
        return rec

    def with_own_bound(parts):
        # each tf_hvd record carries the bound measured in its own processes
        for r in parts["training"]:
            if r["contender"].startswith("tf_hvd"):
                r["same_processes_bound"] = {"samples_per_s": 1000.0, "finite_loss": True}
        return parts
    per_round = [compare.evaluate_targets(with_own_bound(one_round({}, {},
                                                                   training=training(f, t))))
                 for f, t in ((600.0, 880.0), (650.0, 910.0), (700.0, 950.0))]
    agg = by_name(compare.aggregate(per_round))
    names = ["%s_%s_vs_bound[%s]" % (mode, model, tr) for model in ("mlp", "cnn")
             for mode in ("fit", "tape") for tr in ("gloo", "mpi")]
    assert all(n in agg for n in names)
    fit = agg["fit_mlp_vs_bound[gloo]"]
    assert fit["ratio_spread"]["values"] == pytest.approx([0.6, 0.65, 0.7])
    assert (fit["verdict"], fit["target"], fit["alternative"]) == (
        "not met", 0.9, "same processes, no allreduce")
    assert agg["tape_cnn_vs_bound[mpi]"]["verdict"] == "unclear"
    assert agg["fit_cnn_vs_bound[mpi]"]["verdict"] == "met"
    assert agg["fit_cnn_vs_bound[mpi]"]["ratio"] == pytest.approx(0.95)
    # a record without its own bound gives no ratio (never the separate job's)
    bare = by_name(compare.evaluate_targets(one_round({}, {}, training=training(900.0, 900.0))))
    assert (bare["fit_mlp_vs_bound[gloo]"]["ratio"], bare["fit_mlp_vs_bound[gloo]"]["met"]) \
        == (None, None)
    assert "0.45" in bare["fit_mlp_vs_bound[gloo]"]["detail"]  # 900 / the separate 2000
    # the separate job's ratio and MWMS's are "other ratios"
    extras = [e["name"] for e in compare.extra_ratios({})]
    assert "tape_cnn_vs_no_allreduce[gloo]" in extras
    assert "tape_cnn_vs_mwms_ring[gloo]" in extras


def test_chain_table_spreads_values_and_per_round_ratios():
    size = 4 * MiB
    rounds_in = [(8.0, 10.0, 10.0, 16.0), (9.0, 12.0, 10.0, 20.0), (6.0, 9.0, 12.0, 24.0)]
    parts = []
    for g, m, best, copy in rounds_in:
        p = one_round({("gloo", size): g, ("mpi", size): m}, {size: (best - 1.0, best)}, copy)
        for rec in p["allreduce"]:
            if rec["mode"] == "chain":
                rec["chain_length"] = 12
        parts.append(p)
    (row,) = compare.chain_table(parts)
    assert (row["bytes"], row["size"], row["chain_length"]) == (size, "4 MiB", 12)
    assert row["mpi4py_best"] == "mpi4py[numpy_inplace]"
    assert row["gloo_busbw_gbps"]["values"] == [8.0, 9.0, 6.0]
    assert row["gloo_busbw_gbps"]["median"] == 8.0
    assert row["mpi4py_best_gbps"]["median"] == 10.0
    assert row["gloo_vs_mpi4py"]["values"] == pytest.approx([0.8, 0.9, 0.5])
    assert row["mpi_vs_mpi4py"]["values"] == pytest.approx([1.0, 1.2, 0.75])
    assert row["mpi_vs_memcpy"]["values"] == pytest.approx([0.625, 0.6, 0.375])
    assert row["gloo_latency_us"]["median"] == pytest.approx(size / 8e9 * 1e6)
    compare.print_chain_table([row])  # prints without error


def test_chain_plan_every_size_and_quick_keeps_the_warmup():
    full = allreduce_bench.make_config(allreduce_bench.SIZES, allreduce_bench.TF_MODES, False)
    quick = allreduce_bench.make_config(allreduce_bench.SIZES, allreduce_bench.TF_MODES, True)
    assert 256 * KiB in allreduce_bench.SIZES and 4 * MiB in allreduce_bench.SIZES
    for size in allreduce_bench.SIZES:
        key = str(size)
        warm, length, calls = full["chain"][key]
        q_warm, q_length, q_calls = quick["chain"][key]
        assert (q_warm, q_length) == (warm, length)
        assert calls >= q_calls >= 10 and length >= 3
        assert quick["iterations"][key][0] == full["iterations"][key][0]
        assert quick["iterations"][key][1] >= 5
    assert full["chain"][str(64 * KiB)][1] == 200
    assert full["chain"][str(256 * MiB)][1] == 3
    # from 64 KiB (the targets' sizes) long enough that a ~0.1 ms call overhead adds
    # at most ~4% to an op as fast as mpi4py's at 64 KiB (4.6 GB/s, issue 22)
    for size in compare.CHAIN_TARGET_SIZES:
        length = full["chain"][str(size)][1]
        assert 100e-6 / length <= 0.04 * size / 4.6e9, size


def test_modes_chain_at_every_size_for_tf_hvd_only_small_for_mwms():
    cfg = allreduce_bench.make_config(allreduce_bench.SIZES, allreduce_bench.TF_MODES, True)
    assert allreduce_bench._modes(cfg, 256 * MiB) == ["eager", "function", "chain"]
    assert allreduce_bench._modes(cfg, 64 * KiB) == ["eager", "function", "chain",
                                                     "eager_unnamed"]
    assert allreduce_bench._modes(cfg, 256 * MiB, hvd=False) == ["eager", "function"]
    assert allreduce_bench._modes(cfg, 4 * KiB, hvd=False) == ["eager", "function", "chain"]


def test_rounds_below_the_least_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main(["--quick", "--rounds", "2", "--parts", "allreduce"])
    assert exc.value.code == 2
    assert "--rounds must be at least 3 with --quick" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        compare.main(["--rounds", "4", "--parts", "allreduce"])
    assert exc.value.code == 2
    assert "--rounds must be at least 5: fewer rounds" in capsys.readouterr().err


def test_help_runs():
    out = subprocess.run([sys.executable, os.path.join(BENCH, "compare.py"), "--help"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                         universal_newlines=True)
    assert out.returncode == 0, out.stderr
    assert "--rounds" in out.stdout and "least" in out.stdout


def test_summary_tables_measured_checks_and_names_the_rest(capsys):
    size = 256 * MiB
    per_round = [compare.evaluate_targets(one_round({("gloo", size): 6.0}, {size: (5.0, 6.0)}))
                 for _ in range(3)]
    targets = compare.aggregate(per_round)
    extras = compare.aggregate([compare.extra_ratios({}) for _ in range(3)])
    compare.print_summary(targets, extras, 3)
    out = capsys.readouterr().out
    table, _, rest = out.partition("no data (part not run or no correct result): ")
    row = [line for line in table.splitlines()
           if line.startswith("allreduce_chain_256MiB_vs_mpi4py[gloo]")]
    assert len(row) == 1 and row[0].split()[-1] == "met"
    assert "1.00" in row[0].split() and ">=" in row[0].split()
    assert "fit_mlp_vs_bound[gloo]" not in table
    assert "fit_mlp_vs_bound[gloo]" in rest.splitlines()[0]
    assert "allreduce_chain_256MiB_vs_mpi4py[gloo]" not in rest.splitlines()[0]


def test_agreement_of_quick_and_full_runs(tmp_path, capsys):
    def summary(ratios):
        return {"targets": [{"name": n, "verdict": "unclear",
                             "ratio_spread": compare.rounds.spread(v)}
                            for n, v in ratios.items()], "other_ratios": []}
    quick = summary({"a": [0.8, 0.9, 1.0], "b": [0.5, 0.55, 0.6], "c": [None]})
    full = summary({"a": [0.95, 0.97, 0.99, 1.1, 1.2], "b": [0.7, 0.8, 0.8, 0.9, 1.0],
                    "c": [1.0], "d": [1.0]})
    rows = dict((r["name"], r["agrees"]) for r in compare.agreement(quick, full))
    assert rows == {"a": True, "b": False, "c": None}
    qpath, fpath = tmp_path / "q.json", tmp_path / "f.json"
    jsonio.write_json(str(qpath), quick)
    jsonio.write_json(str(fpath), full)
    check = ["--agreement", str(qpath), str(fpath), "--results-dir", str(tmp_path)]
    assert compare.main(check) == 1
    out = capsys.readouterr().out
    assert "1 of 2 ratios agree" in out
    written = jsonio.read_json(str(tmp_path / "compare-agreement.json"))
    assert (written["ratios"], written["agree"]) == (2, 1)
    assert (written["quick"]["file"], written["full"]["file"]) == (str(qpath), str(fpath))
    assert [r["name"] for r in written["rows"]] == ["a", "b", "c"]
    full["targets"][1]["ratio_spread"] = compare.rounds.spread([0.52, 0.6])
    jsonio.write_json(str(fpath), full)
    assert compare.main(check) == 0


def test_chain_record_is_per_allreduce():
    class Ctx(object):
        contender = "tf_hvd_gloo"

        def log(self, message):
            self.logged = message
    resources = {"minflt_per_call": 40.0, "cpu_ms_per_call": 8.0, "cpu_per_wall": 1.5}
    rec = allreduce_bench._record(Ctx(), "chain", 64 * KiB, 20, [0.004, 0.002, 0.003],
                                  resources, True, None, 2, chain_length=200)
    assert (rec["chain_length"], rec["iterations"]) == (200, 3)
    assert rec["latency_us"]["median"] == pytest.approx(15.0)   # 3 ms / 200
    assert rec["busbw_gbps"] == pytest.approx(64 * KiB / 15e-6 / 1e9)
    assert (rec["minflt_per_call"], rec["cpu_ms_per_call"]) == (0.2, 0.04)
    assert rec["cpu_per_wall"] == 1.5
    plain = allreduce_bench._record(Ctx(), "function", 64 * KiB, 20, [0.004], resources,
                                    True, None, 2)
    assert "chain_length" not in plain and plain["cpu_ms_per_call"] == 8.0


def _run(before, after):
    return {"placement": {"before": {"round_trip_ns": before, "peer_copy_gbps": 60.0},
                          "after": {"round_trip_ns": after, "peer_copy_gbps": 60.0}}}


def test_placement_labels_against_the_runs_fastest_round_trip():
    per_round = [{"tf_hvd_gloo": _run(85, 90), "mpi4py": _run(80, 400)},
                 {"tf_hvd_gloo": _run(400, 410), "mpi4py": _run(395, 390),
                  "numpy_local": {"placement": {"before": None, "after": None}}}]
    labels = compare.placement_labels(per_round)
    assert labels == [{"tf_hvd_gloo": "near", "mpi4py": "changed"},
                      {"tf_hvd_gloo": "far", "mpi4py": "far", "numpy_local": None}]
    # no probe at all (one CPU): no labels
    assert compare.placement_labels([{"mpi4py": {}}]) == [{"mpi4py": None}]


def test_chain_verdict_on_the_same_placement_uses_only_rounds_where_both_shared_it():
    size = MiB
    # round 1: both near, 2.0x; round 2: tf_hvd far, mpi4py near, 0.6x; round 3: both far, 1.5x
    rounds_in = [(20.0, 10.0), (6.0, 10.0), (9.0, 6.0)]
    round_targets = [compare.evaluate_targets(one_round({("gloo", size): g},
                                                        {size: (best - 2.0, best)}))
                     for g, best in rounds_in]
    labels = [{"tf_hvd_gloo": "near", "mpi4py": "near", "numpy_local": "near"},
              {"tf_hvd_gloo": "far", "mpi4py": "near", "numpy_local": "near"},
              {"tf_hvd_gloo": "far", "mpi4py": "far", "numpy_local": "changed"}]
    agg = by_name(compare.same_placement(compare.aggregate(round_targets), round_targets,
                                         labels))
    t = agg["allreduce_chain_1MiB_vs_mpi4py[gloo]"]
    assert t["verdict"] == "unclear"
    assert t["placement_per_round"] == [["near", "near"], ["far", "near"], ["far", "far"]]
    assert t["same_placement_rounds"] == ["near", "far"]
    assert t["same_placement_ratio_spread"]["values"] == pytest.approx([2.0, 1.5])
    assert t["same_placement_verdict"] == "met"
    # memcpy's alternative is numpy_local: its label counts
    m = agg["busbw_256MiB_vs_memcpy[gloo]"]
    assert m["placement_per_round"][2] == ["far", "changed"]
    # no tf_hvd MPI record: nothing to compare in any round
    t = agg["allreduce_chain_1MiB_vs_mpi4py[mpi]"]
    assert t["same_placement_verdict"] == "no such round"
    # not a chain target: untouched
    assert "placement_per_round" not in agg["latency_4KiB_vs_mwms[gloo]"]


def test_cpu_placement_probe_builds_and_measures_the_first_two_cpus(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # a fresh build of the probe
    cpus = sorted(os.sched_getaffinity(0))
    got = machine.cpu_placement()
    if len(cpus) < 2:
        assert got is None
        return
    assert "error" not in got, got
    assert got["cpus"] == cpus[:2]
    assert 0 < got["round_trip_ns"] < 1e6 and 0 < got["peer_copy_gbps"] < 1e4, got
    assert 0 < got["overwrite_read_gbps"] < 1e4 and 0 < got["overwrite_own_gbps"] < 1e4, got
    assert len(list((tmp_path / ".cache" / "tf_hvd_bench").iterdir())) == 1


def test_spreads_agree_either_way():
    spread = compare.rounds.spread
    # the full median (0.99) lies above all 3 quick rounds, the quick median inside the
    # full spread: the same figure measured twice, so they agree
    assert compare.spreads_agree(spread([0.90, 0.92, 0.95]), spread([0.9, 0.95, 0.99, 1.0, 1.1]))
    assert compare.spreads_agree(spread([0.5, 0.55, 0.6]), spread([0.7, 0.8, 1.0])) is False
    assert compare.spreads_agree(spread([None]), spread([1.0])) is None


def test_agreement_compares_chain_targets_placement_by_placement():
    def target(values, places, verdict):
        return {"name": "allreduce_chain_1MiB_vs_mpi4py[gloo]", "verdict": "unclear",
                "ratio_spread": compare.rounds.spread(values),
                "placement_per_round": [[p, p2] for p, p2 in places],
                "same_placement_verdict": verdict}
    # the quick run caught "far" for tf_hvd in two rounds, the full run in none
    quick = {"targets": [target([2.2, 0.65, 0.64], [("near", "near"), ("far", "near"),
                                                    ("far", "near")], "met")],
             "other_ratios": []}
    near = [("near", "near")] * 2 + [("changed", "far")] + [("near", "near")] * 2
    full = {"targets": [target([2.4, 2.3, 1.9, 2.5, 2.35], near, "met")], "other_ratios": []}
    row = compare.agreement(quick, full)[0]
    assert row["agrees"] is False
    assert row["placement"] == "near"
    assert row["quick_same_placement"]["values"] == [2.2]
    assert row["full_same_placement"]["median"] == pytest.approx(2.375)
    assert row["same_placement_difference"] == pytest.approx(2.2 / 2.375 - 1)
    assert row["same_placement_verdicts"] == ["met", "met"]
    assert row["agrees_same_placement"] is None  # one quick round: no spread to judge
    quick["targets"][0]["ratio_spread"] = compare.rounds.spread([2.3, 2.35, 2.4])
    quick["targets"][0]["placement_per_round"] = [["near", "near"]] * 3
    assert compare.agreement(quick, full)[0]["agrees_same_placement"] is True
    # a ratio without placements (training, fusion) has no such comparison
    del quick["targets"][0]["placement_per_round"]
    assert "placement" not in compare.agreement(quick, full)[0]


@pytest.mark.skipif(platform.machine() != "x86_64" or len(os.sched_getaffinity(0)) < 2,
                    reason="an x86-64 probe of two CPUs")
def test_overwrite_probe_builds_and_measures_three_ways(tmp_path):
    binary = str(tmp_path / "overwrite_probe")
    subprocess.run(["cc", "-O2", "-mclflushopt", "-pthread",
                    os.path.join(BENCH, "overwrite_probe.c"), "-o", binary], check=True,
                   timeout=60)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    got = json.loads(subprocess.run([binary] + [str(c) for c in cpus], check=True,
                                    capture_output=True, text=True, timeout=60).stdout)
    assert got["cpus"] == cpus
    rates = [got["untouched"]["overwrite"], got["read"]["overwrite"], got["read"]["reader"],
             got["read_flush"]["overwrite"], got["read_flush"]["reader"]]
    assert all(0 < r < 1e4 for r in rates), got
