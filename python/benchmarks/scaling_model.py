"""A time model of ring-allreduce data parallelism: fitted to measured points, then
used to project scaling efficiency to many workers.

One ring allreduce of ``nbytes`` over ``n`` workers takes 2(n-1) steps; each step
pays a per-hop latency ``alpha`` and moves nbytes/n over the slowest link, whose
usable bandwidth is ``bandwidth`` (bytes/s)::

    t_ar(n) = alpha * 2(n-1) + 2(n-1)/n * nbytes / bandwidth

A training step computes for ``compute_s`` and allreduces the gradients; a fraction
``overlap`` of the allreduce runs behind the backward pass (never more than the
compute itself)::

    t_step(n) = compute_s + t_ar(n) - min(overlap * t_ar(n), compute_s)

Scaling efficiency is throughput(n) / (n * throughput(1)) = compute_s / t_step(n):
one worker has nothing to allreduce.

    >>> ring_allreduce_seconds(2, 1e6, alpha=0.0, bandwidth=1e6)
    1.0
    >>> round(efficiency(4, 1e6, compute_s=1.0, overlap=0.5, alpha=0.0, bandwidth=1e6), 4)
    0.5714
"""

GBIT = 1e9 / 8.0  # bytes per second of 1 Gbit/s


def ring_allreduce_seconds(n, nbytes, alpha, bandwidth):
    """Seconds of one ring allreduce of nbytes over n workers (0 for one worker)."""
    if n <= 1:
        return 0.0
    return alpha * 2.0 * (n - 1) + 2.0 * (n - 1) / n * float(nbytes) / bandwidth


def step_seconds(n, grad_bytes, compute_s, overlap, alpha, bandwidth):
    """Seconds of one training step: compute plus the allreduce time not hidden."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError("overlap must be between 0 and 1 (got %r)" % (overlap,))
    comm = ring_allreduce_seconds(n, grad_bytes, alpha, bandwidth)
    return compute_s + comm - min(overlap * comm, compute_s)


def efficiency(n, grad_bytes, compute_s, overlap, alpha, bandwidth):
    """Scaling efficiency at n workers: compute_s / step time (1.0 at n=1)."""
    return compute_s / step_seconds(n, grad_bytes, compute_s, overlap, alpha, bandwidth)


def fit_ring(points):
    """(alpha, bandwidth) that fit measured allreduces best in relative error.

    points: [(n, nbytes, seconds)] with n >= 2. Least squares of (model - t) / t,
    linear in alpha and 1/bandwidth; alpha is kept >= 0 (refitted with alpha = 0
    when the free fit makes it negative).

    >>> pts = [(n, b, ring_allreduce_seconds(n, b, 1e-4, 1e8)) for n in (2, 4, 8)
    ...        for b in (1e5, 1e7)]
    >>> [round(x, 6) for x in fit_ring(pts)]
    [0.0001, 100000000.0]
    """
    rows = []
    for n, nbytes, t in points:
        if n < 2 or t <= 0:
            raise ValueError("every point needs n >= 2 and a positive time: %r"
                             % ((n, nbytes, t),))
        # model / t = alpha * a + inv_b * b, target 1
        rows.append((2.0 * (n - 1) / t, 2.0 * (n - 1) / n * float(nbytes) / t))
    if len(rows) < 2:
        raise ValueError("fit_ring needs at least two points")
    saa = sum(a * a for a, _ in rows)
    sab = sum(a * b for a, b in rows)
    sbb = sum(b * b for _, b in rows)
    sa = sum(a for a, _ in rows)
    sb = sum(b for _, b in rows)
    det = saa * sbb - sab * sab
    alpha = inv_b = None
    if abs(det) > 1e-12 * max(saa * sbb, 1e-300):
        alpha = (sa * sbb - sb * sab) / det
        inv_b = (saa * sb - sab * sa) / det
    if alpha is None or alpha < 0 or inv_b <= 0:
        alpha, inv_b = 0.0, sb / sbb
    return alpha, 1.0 / inv_b


def fit_overlap(points, alpha, bandwidth):
    """The overlap fraction (0..1) that fits measured steps best (least squares).

    points: [(n, grad_bytes, compute_s, step_s)]; compute_s is the step time of the
    same workers without any allreduce. The min() cap of step_seconds is ignored
    in the fit (it only binds when the allreduce is longer than the compute).

    >>> pts = [(n, 1e6, 0.01, step_seconds(n, 1e6, 0.01, 0.3, 0.0, 1e8)) for n in (2, 4)]
    >>> round(fit_overlap(pts, 0.0, 1e8), 6)
    0.3
    """
    num = den = 0.0
    for n, grad_bytes, compute_s, step_s in points:
        comm = ring_allreduce_seconds(n, grad_bytes, alpha, bandwidth)
        num += comm * (compute_s + comm - step_s)
        den += comm * comm
    if den == 0:
        raise ValueError("fit_overlap needs a point with n >= 2")
    return min(1.0, max(0.0, num / den))


# Models of the projection: gradient bytes (fp32 parameters) and compute per step of
# one V100-class GPU at batch 64 (assumptions, stated in docs/performance.md).
PROJECTED_MODELS = {
    "resnet50": {"label": "ResNet-50-like", "params": 25.6e6, "compute_s": 0.22},
    "vgg16": {"label": "VGG-16-like", "params": 138.0e6, "compute_s": 0.35},
}
PROJECTED_WORKERS = (64, 128, 256, 512)


def project(workers=PROJECTED_WORKERS, link_gbit=25.0, link_efficiency=0.9, alpha=10e-6,
            overlaps=(0.0, 0.5, 0.8), models=None, bytes_per_param=4):
    """Projected scaling efficiency per model, overlap fraction and worker count.

    link_efficiency: the share of the link rate a ring reaches (busbw / link rate,
    e.g. as measured on the shaped cluster); alpha: seconds per ring hop.
    Returns [{"model", "label", "params", "compute_s", "grad_bytes", "overlap",
    "efficiency": {n: e}, "allreduce_s": {n: t}}].
    """
    models = models or PROJECTED_MODELS
    bandwidth = link_gbit * GBIT * link_efficiency
    rows = []
    for key, m in models.items():
        grad_bytes = m["params"] * bytes_per_param
        for overlap in overlaps:
            rows.append({
                "model": key, "label": m["label"], "params": m["params"],
                "compute_s": m["compute_s"], "grad_bytes": grad_bytes, "overlap": overlap,
                "efficiency": dict((n, efficiency(n, grad_bytes, m["compute_s"], overlap,
                                                  alpha, bandwidth)) for n in workers),
                "allreduce_s": dict((n, ring_allreduce_seconds(n, grad_bytes, alpha,
                                                               bandwidth))
                                    for n in workers)})
    return rows
