"""The ring-allreduce time model behind scaling_bench.py's projection
(python/benchmarks/scaling_model.py), and the benchmark's own small helpers."""

import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "python", "benchmarks")
sys.path.insert(0, BENCH)

import link_stream  # noqa: E402
import scaling_model as sm  # noqa: E402


@pytest.mark.parametrize("n,nbytes,alpha,bandwidth,expected", [
    # 2 workers: 2 hops, each worker moves the whole buffer once (2 * 1/2)
    (2, 1000.0, 0.5, 100.0, 0.5 * 2 + 1.0 * 1000.0 / 100.0),     # 11.0
    # 4 workers: 6 hops, 2 * 3/4 of the buffer
    (4, 1000.0, 0.5, 100.0, 0.5 * 6 + 1.5 * 1000.0 / 100.0),     # 18.0
    (8, 800.0, 0.0, 100.0, 2.0 * 7 / 8 * 800.0 / 100.0),         # 14.0
    (3, 0.0, 0.25, 1.0, 1.0),                                     # latency only
])
def test_ring_allreduce_seconds_exact(n, nbytes, alpha, bandwidth, expected):
    assert sm.ring_allreduce_seconds(n, nbytes, alpha, bandwidth) == pytest.approx(
        expected, rel=1e-12)


def test_one_worker_has_nothing_to_allreduce():
    assert sm.ring_allreduce_seconds(1, 1e9, 1.0, 1.0) == 0.0
    assert sm.efficiency(1, 1e9, 0.2, 0.0, 1e-5, 1e9) == 1.0


def test_step_seconds_hides_the_overlapped_share_up_to_the_compute():
    # comm = 2 * 1/2 * 1000 / 100 = 10 s
    assert sm.step_seconds(2, 1000.0, 4.0, 0.0, 0.0, 100.0) == pytest.approx(14.0)
    assert sm.step_seconds(2, 1000.0, 4.0, 0.3, 0.0, 100.0) == pytest.approx(11.0)
    # 0.8 * 10 = 8 s would hide more than the 4 s of compute: only 4 s are hidden
    assert sm.step_seconds(2, 1000.0, 4.0, 0.8, 0.0, 100.0) == pytest.approx(10.0)
    assert sm.efficiency(2, 1000.0, 4.0, 0.3, 0.0, 100.0) == pytest.approx(4.0 / 11.0)


def test_overlap_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match="overlap must be between 0 and 1"):
        sm.step_seconds(2, 1.0, 1.0, 1.5, 0.0, 1.0)


def test_efficiency_falls_with_workers_and_rises_with_overlap_and_bandwidth():
    grad, compute = 100e6, 0.22
    effs = [sm.efficiency(n, grad, compute, 0.5, 10e-6, 3e9) for n in (2, 8, 64, 512)]
    assert all(a > b for a, b in zip(effs, effs[1:]))
    by_overlap = [sm.efficiency(64, grad, compute, f, 10e-6, 3e9) for f in (0.0, 0.5, 0.9)]
    assert by_overlap == sorted(by_overlap) and by_overlap[0] < by_overlap[-1]
    by_bw = [sm.efficiency(64, grad, compute, 0.5, 10e-6, b) for b in (1e9, 3e9, 10e9)]
    assert by_bw == sorted(by_bw) and by_bw[0] < by_bw[-1]


def test_fit_ring_recovers_known_parameters():
    alpha, bandwidth = 150e-6, 117e6
    pts = [(n, b, sm.ring_allreduce_seconds(n, b, alpha, bandwidth))
           for n in (2, 4, 8) for b in (1 << 20, 16 << 20, 64 << 20)]
    got_alpha, got_bw = sm.fit_ring(pts)
    assert got_alpha == pytest.approx(alpha, rel=1e-6)
    assert got_bw == pytest.approx(bandwidth, rel=1e-6)


def test_fit_ring_with_noise_stays_close():
    alpha, bandwidth = 200e-6, 1e8
    noise = [1.03, 0.98, 1.01, 0.97, 1.02, 0.99]
    pts = [(n, b, sm.ring_allreduce_seconds(n, b, alpha, bandwidth) * e)
           for (n, b), e in zip([(2, 1e5), (4, 1e5), (8, 1e5), (2, 6e7), (4, 6e7), (8, 6e7)],
                                noise)]
    got_alpha, got_bw = sm.fit_ring(pts)
    assert got_alpha == pytest.approx(alpha, rel=0.15)
    assert got_bw == pytest.approx(bandwidth, rel=0.05)


def test_fit_ring_keeps_alpha_non_negative():
    # pure bandwidth points made slightly faster at small sizes: the free fit goes < 0
    pts = [(2, 1e3, 0.9e-5), (2, 1e8, 1.0), (4, 1e8, 1.5)]
    alpha, bandwidth = sm.fit_ring(pts)
    assert alpha == 0.0
    assert 0.9e8 < bandwidth < 1.1e8


def test_fit_ring_rejects_bad_points():
    with pytest.raises(ValueError, match="n >= 2"):
        sm.fit_ring([(1, 10.0, 1.0), (2, 10.0, 1.0)])
    with pytest.raises(ValueError, match="at least two points"):
        sm.fit_ring([(2, 10.0, 1.0)])


def test_fit_overlap_recovers_known_fraction_and_clamps():
    pts = [(n, 2.7e6, 0.01 * n, sm.step_seconds(n, 2.7e6, 0.01 * n, 0.35, 1e-4, 1.1e8))
           for n in (2, 4, 8)]
    assert sm.fit_overlap(pts, 1e-4, 1.1e8) == pytest.approx(0.35, rel=1e-9)
    # steps slower than compute + the whole allreduce: no overlap at all, not < 0
    slow = [(2, 2.7e6, 0.01, 0.01 + 2 * sm.ring_allreduce_seconds(2, 2.7e6, 0.0, 1e8))]
    assert sm.fit_overlap(slow, 0.0, 1e8) == 0.0


def test_project_rows():
    rows = sm.project(workers=(64, 512), link_gbit=25.0, link_efficiency=1.0, alpha=0.0,
                      overlaps=(0.0,),
                      models={"m": {"label": "M", "params": 25e6, "compute_s": 0.2}})
    assert len(rows) == 1
    row = rows[0]
    assert row["grad_bytes"] == 100e6
    # 25 Gbit/s = 3.125e9 B/s; t(512) = 2 * 511/512 * 1e8 / 3.125e9
    t512 = 2.0 * 511 / 512 * 1e8 / 3.125e9
    assert row["allreduce_s"][512] == pytest.approx(t512)
    assert row["efficiency"][512] == pytest.approx(0.2 / (0.2 + t512))
    assert row["efficiency"][64] > row["efficiency"][512]


def test_window_rate_leaves_out_the_edges():
    samples = [(0.0, 0), (0.5, 10), (1.0, 100), (2.0, 300), (2.5, 390), (3.0, 400)]
    assert link_stream.window_rate(samples, edge=1.0) == pytest.approx(200.0)
    assert link_stream.window_rate(samples[:1]) is None


def test_scaling_bench_help():
    out = subprocess.run([sys.executable, os.path.join(BENCH, "scaling_bench.py"), "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--hosts" in out.stdout and "--quick" in out.stdout


def test_ring_pieces_match_the_cores_pieces_per_chunk():
    # The same cases as RingAllreduce::PiecesPerChunk's gtest (algorithms_test.cc).
    import scaling_bench
    assert scaling_bench.ring_pieces(4, 3) == 1                     # one element
    assert scaling_bench.ring_pieces(4000, 2) == 1                  # 2000 B a chunk
    assert scaling_bench.ring_pieces(4 * 2 * 50000, 2) == 3         # 200 KB: 3 small pieces
    assert scaling_bench.ring_pieces(4 * 2 * 32768, 2) == 2         # 128 KiB: 2 of 64 KiB
    assert scaling_bench.ring_pieces(4 * 3 * 262145, 3) == 3        # 1 MiB + 4 B
    assert scaling_bench.ring_pieces(64 << 20, 8) == 8              # 64 MiB, 8 ranks
    assert scaling_bench.ring_pieces((64 << 20) + 4, 8) == 9
    assert scaling_bench.ring_pieces(2, 3, elem=1) == 1             # fewer elements than ranks


def test_ring_overhead_spreads_the_excess_over_the_pieces():
    import scaling_bench
    # 64 MiB over 8 ranks: 2 * 7 steps of 8 pieces; TCP needs 7/4 * 64 MiB / rate
    out = scaling_bench.ring_overhead(8, 64 << 20, 1.0, 0.125e9)
    wire = 1.75 * (64 << 20) / 0.125e9
    assert out["exchanges"] == 112
    assert out["tcp_time_s"] == pytest.approx(wire)
    assert out["excess_ms_per_exchange"] == pytest.approx((1.0 - wire) * 1e3 / 112)


def test_link_counter_deltas_per_host():
    import scaling_bench
    after = {"tbf_dropped": 3, "per_host": {"h1": {"out_overlimits": 10, "in_sent_bytes": 7}}}
    before = {"tbf_dropped": 1, "per_host": {"h1": {"out_overlimits": 4, "in_sent_bytes": 2}}}
    assert scaling_bench._delta(after, before) == {
        "tbf_dropped": 2, "per_host": {"h1": {"out_overlimits": 6, "in_sent_bytes": 5}}}
