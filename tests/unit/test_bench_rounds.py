"""The statistics behind compare.py's rounds: spreads, verdicts, the median round
of each figure, per-round ratios and the busy process of the contention mode."""

import os
import sys
import time

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "python", "benchmarks")
sys.path.insert(0, BENCH)

import compare  # noqa: E402
import rounds  # noqa: E402


def test_spread_leaves_out_missing_rounds():
    s = rounds.spread([3.0, None, 1.0, 2.0])
    assert (s["n"], s["median"], s["min"], s["max"]) == (3, 2.0, 1.0, 3.0)
    assert s["values"] == [3.0, None, 1.0, 2.0]
    assert rounds.spread([None])["median"] is None


@pytest.mark.parametrize("ratios,comparison,target,expected", [
    ([0.91, 0.95, 0.99], ">=", 0.9, "met"),
    ([0.85, 0.95], ">=", 0.9, "unclear"),
    ([0.5, 0.8], ">=", 0.9, "not met"),
    ([0.9], ">=", 0.9, "met"),
    ([0.04, 0.05], "<=", 0.05, "met"),
    ([0.04, 0.06], "<=", 0.05, "unclear"),
    ([0.06, None], "<=", 0.05, "not met"),
    ([None, None], ">=", 1.0, None),
])
def test_verdict_needs_the_whole_spread(ratios, comparison, target, expected):
    assert rounds.verdict(ratios, comparison, target) == expected


def test_fmt_spread():
    assert rounds.fmt_spread(rounds.spread([0.8, 0.76, 0.88])) == "0.800 [0.760-0.880]"
    assert rounds.fmt_spread(rounds.spread([2.0])) == "2.00"
    assert rounds.fmt_spread(None) == "-"


def test_round_order_flips():
    assert rounds.round_order("abc", 0) == ["a", "b", "c"]
    assert rounds.round_order("abc", 1) == ["c", "b", "a"]
    assert rounds.round_order("abc", 2) == ["a", "b", "c"]


def test_merge_records_picks_the_median_round():
    per_round = [[{"k": "x", "v": 5.0}, {"k": "y", "v": 1.0}],
                 [{"k": "x", "v": 9.0}],
                 [{"k": "x", "v": 7.0}, {"k": "y", "v": 3.0}]]
    merged = rounds.merge_records(per_round, lambda r: r["k"], lambda r: r["v"])
    x, y = merged
    assert (x["k"], x["v"], x["rounds"]["picked_round"]) == ("x", 7.0, 3)
    assert (x["rounds"]["min"], x["rounds"]["max"]) == (5.0, 9.0)
    # two rounds, higher is better: the lower of the two middle values
    assert (y["v"], y["rounds"]["values"]) == (1.0, [1.0, None, 3.0])
    low = rounds.merge_records(per_round[:2], lambda r: r["k"], lambda r: r["v"],
                               lower_is_better=True)
    assert low[0]["v"] == 9.0  # latency: the higher (worse) of two middle values


def test_aggregate_takes_ratios_per_round_not_of_medians():
    def check(mine, theirs):
        return {"name": "t", "alternative": "alt", "tf_hvd_value": mine,
                "alternative_value": theirs, "ratio": mine / theirs,
                "comparison": ">=", "target": 0.9, "detail": "d%s" % mine}
    per_round = [[check(10.0, 10.0)], [check(4.0, 5.0)], [check(9.0, 9.5)]]
    (t,) = compare.aggregate(per_round)
    assert t["ratio_spread"]["values"] == [1.0, 0.8, 9.0 / 9.5]
    assert t["ratio"] == 9.0 / 9.5          # median of the per-round ratios
    assert t["tf_hvd_value"] == 9.0 and t["alternative_value"] == 9.5
    assert (t["verdict"], t["met"], t["detail"]) == ("unclear", None, "d9.0")


def test_aggregate_rejects_rounds_that_differ():
    with pytest.raises(RuntimeError, match="the rounds' checks differ at a"):
        compare.aggregate([[{"name": "a"}], [{"name": "b"}]])


def test_busy_process_runs_and_is_stopped():
    with rounds.BusyProcess() as busy:
        time.sleep(1.0)
        assert busy.proc.poll() is None
    assert busy.proc.returncode == -9  # killed (SIGKILL) and reaped on leaving the block
    info = busy.describe()
    assert info["busy_process"] == "while True: pass"
    assert info["seconds"] >= 1.0
    assert info["cpu_seconds"] is not None and info["cpu_seconds"] > 0
