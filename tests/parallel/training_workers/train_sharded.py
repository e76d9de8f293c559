"""Checks of the sharded DistributedOptimizer (optimizer state split over the
ranks). Run under the launcher; every rank runs every section chosen by
TRAINING_ONLY:

    python -m tf_hvd.runner -np 2 python tests/parallel/training_workers/train_sharded.py DIR

equivalence    model.fit and tf.function custom loops: sharded == unsharded
               DistributedOptimizer (SGD+momentum, Adam; weights and losses after
               24 steps), identical on every rank, each rank holding its slice
composition    backward_passes_per_step, clipnorm, global_clipnorm,
               LossScaleOptimizer, fp16 and bf16 compression, a DistributedGradientTape
state_bytes    optimizer state bytes per rank for Adam on an 11M-parameter model
               (printed as a STATE_BYTES line) and the process's peak memory
process_set    sharded over a process set of ranks 0 and 1 (HOROVOD_DYNAMIC_PROCESS_SETS=1)
bad_input      unsupported optimizers and options, variables differing across ranks
ckpt_save      10 sharded steps, then hvd.save_model to DIR/sharded.keras (+ the
               data and the weights/state saved, as .npz)
ckpt_resume    from DIR/sharded.keras at this size: sharded and unsharded resume
               are equal after 10 more steps; an incompatible optimizer is named
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.keras as hk  # noqa: E402
import sharded_lib  # noqa: E402
from sharded_lib import B, DIM, HID, TOL  # noqa: E402
from trainlib import Checks, make_data, shard  # noqa: E402

hvd.init()
N, R = hvd.size(), hvd.rank()
C = Checks(hvd)
DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="train_sharded_")
STEPS = 24

OPTS = {
    "sgd_momentum": lambda **kw: keras.optimizers.SGD(0.05, momentum=0.9, **kw),
    "adam": lambda **kw: keras.optimizers.Adam(0.01, **kw),
}


def to_np(values):
    return [keras.ops.convert_to_numpy(v) for v in values]


def mlp(seed=0):
    return sharded_lib.mlp(keras, seed)


def params_count(model):
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def fit(opt, x, y, model=None):
    return sharded_lib.fit(keras, opt, x, y, hvd, model)


def own_slice_bytes(opt):
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in opt.variables)


def check_holds_slice(label, opt, model):
    sharded_lib.check_holds_slice(C, hvd, label, opt, model)


# ---------------------------------------------------------------------------


def equivalence():
    x, y = make_data(STEPS, N, B, DIM)
    for name in ("sgd_momentum", "adam"):
        label = "fit %s" % name
        ref, ref_losses = fit(hk.DistributedOptimizer(OPTS[name]()), x, y)
        opt = hk.DistributedOptimizer(OPTS[name](), sharded=True)
        model, losses = fit(opt, x, y)
        sharded_lib.check_fit_equals(C, hvd, label, opt, model, losses, ref, ref_losses,
                                     STEPS)
    # A custom loop in tf.function: plain tape -> sharded apply_gradients.
    xs, ys = shard(x, N, R, B), shard(y, N, R, B)
    for name in ("sgd_momentum", "adam"):
        results = []
        for sharded in (False, True):
            model = mlp()
            opt = hvd.DistributedOptimizer(OPTS[name](), sharded=sharded)

            @tf.function
            def step(xb, yb):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            losses = [float(step(xs[i * B:(i + 1) * B], ys[i * B:(i + 1) * B]))
                      for i in range(STEPS)]
            results.append((to_np(model.weights), losses))
        label = "custom loop %s" % name
        C.close(label + " weights sharded vs unsharded", results[1][0], results[0][0], **TOL)
        C.close(label + " losses sharded vs unsharded", [results[1][1]], [results[0][1]], **TOL)
        C.same_on_all_ranks(label + " weights on every rank", results[1][0])


def composition():
    steps = 12
    x, y = make_data(steps, N, B, DIM)
    cases = [
        ("bpps=2", lambda: OPTS["sgd_momentum"](),
         dict(backward_passes_per_step=2, average_aggregated_gradients=True)),
        ("clipnorm", lambda: OPTS["sgd_momentum"](clipnorm=0.05), {}),
        ("global_clipnorm", lambda: OPTS["adam"](global_clipnorm=0.05), {}),
        ("loss scale", lambda: keras.optimizers.LossScaleOptimizer(OPTS["adam"]()), {}),
        ("fp16 compression", lambda: OPTS["adam"](), dict(compression=hvd.Compression.fp16)),
        ("bf16 compression", lambda: OPTS["adam"](), dict(compression=hvd.Compression.bf16)),
        ("gradient_predivide_factor", lambda: OPTS["adam"](),
         dict(gradient_predivide_factor=2.0)),
    ]
    for label, make, kwargs in cases:
        ref, ref_losses = fit(hk.DistributedOptimizer(make(), **kwargs), x[:steps * N * B],
                              y[:steps * N * B])
        opt = hk.DistributedOptimizer(make(), sharded=True, **kwargs)
        model, losses = fit(opt, x[:steps * N * B], y[:steps * N * B])
        # The 16-bit sums of a reduce-scatter and of an allreduce round alike
        # when the ring splits the tensor the same way, not always.
        tol = {"fp16": dict(rtol=1e-3, atol=1e-4),
               "bf16": dict(rtol=1e-2, atol=1e-3)}.get(label[:4], TOL)
        C.close(label + ": sharded vs unsharded weights", to_np(model.weights),
                to_np(ref.weights), **tol)
        C.close(label + ": sharded vs unsharded losses", [losses], [ref_losses], **tol)
        C.same_on_all_ranks(label + ": weights on every rank", to_np(model.weights))
    # clipnorm really clipped: an unclipped run differs.
    plain, _ = fit(hk.DistributedOptimizer(OPTS["sgd_momentum"](), sharded=True), x, y)
    clipped, _ = fit(hk.DistributedOptimizer(OPTS["sgd_momentum"](clipnorm=0.05),
                                             sharded=True), x, y)
    C.expect(max(float(np.max(np.abs(a - b))) for a, b in
                 zip(to_np(plain.weights), to_np(clipped.weights))) > 1e-3,
             "clipnorm changes the result")
    # A DistributedGradientTape's gradients (already averaged) are not reduced again.
    xs, ys = shard(x, N, R, B), shard(y, N, R, B)
    results = []
    for use_tape, sharded in ((False, False), (True, True)):
        model = mlp()
        opt = hvd.DistributedOptimizer(OPTS["adam"](), sharded=sharded)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
            if use_tape:
                tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        for i in range(steps):
            step(xs[i * B:(i + 1) * B], ys[i * B:(i + 1) * B])
        results.append(to_np(model.weights))
        if sharded:
            graph = step.get_concrete_function(xs[:B], ys[:B]).graph
            kinds = sorted(set(op.type for op in graph.get_operations()
                               if op.type.startswith("Horovod")))
            C.expect("HorovodReducescatter" not in kinds and
                     ("HorovodAllreduce" in kinds) == (N > 1),
                     "tape + sharded optimizer: no reduce-scatter", "ops %s" % kinds)
    C.close("DistributedGradientTape + sharded == unsharded", results[1], results[0], **TOL)


def process_set():
    """Sharded over the process set of ranks 0 and 1 (needs
    HOROVOD_DYNAMIC_PROCESS_SETS=1); the other ranks do not take part."""
    pair = hvd.add_process_set([0, 1])
    try:
        if R not in (0, 1):
            C.expect(True, "not a member")
            return
        x, y = make_data(12, 2, B, DIM)
        xs, ys = shard(x, 2, R, B), shard(y, 2, R, B)
        results = []
        for sharded in (False, True):
            model = mlp()
            opt = hk.DistributedOptimizer(OPTS["adam"](), sharded=sharded, process_set=pair)
            model.compile(optimizer=opt, loss="mse")
            model.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
            results.append(to_np(model.weights))
        C.close("process set: sharded == unsharded", results[1], results[0], **TOL)
        sizes = [int(v.shape[0]) for v in opt.variables if len(v.shape) == 1]
        total = params_count(model)
        C.equal("process set: slots hold 1/2", sizes, [total // 2 + (R < total % 2)] * 2)
        digests = hvd.allgather_object(results[1], process_set=pair)
        C.close("process set: same on both members", digests[0], digests[1], rtol=0, atol=0)
    finally:
        hvd.remove_process_set(pair)


def state_bytes():
    """Adam's state per rank on an 11.0M-parameter MLP after one step."""
    inputs = keras.Input((1000,))
    h = keras.layers.Dense(3000)(inputs)
    h = keras.layers.Dense(2000)(h)
    outputs = keras.layers.Dense(500)(h)
    model = keras.Model(inputs, outputs)
    params = params_count(model)
    largest = max(int(np.prod(v.shape)) for v in model.trainable_variables)
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(1e-4), sharded=True)
    model.compile(optimizer=opt, loss="mse")
    rs = np.random.RandomState(R)
    before = psutil.Process().memory_info().rss
    model.fit(rs.randn(2, 1000).astype(np.float32), rs.randn(2, 500).astype(np.float32),
              batch_size=2, epochs=1, verbose=0)
    peak = psutil.Process().memory_info().rss
    try:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except ImportError:  # pragma: no cover
        pass
    held = own_slice_bytes(opt)
    # The unsharded figure: Adam's two fp32 slots per parameter + its 2 scalars.
    plain = keras.optimizers.Adam(1e-4)
    plain.build(model.trainable_variables)
    unsharded = own_slice_bytes(plain)
    del plain
    # At most one element more than 1/N per slot (2 fp32 slots), and the
    # iterations and learning rate (8 + 4 bytes) held whole on every rank.
    bound = unsharded / N + 2 * 4 + 12
    C.expect(held <= bound, "state bytes <= unsharded/N",
             "held %d bytes, unsharded %d, bound %d" % (held, unsharded, bound))
    C.log("STATE_BYTES np=%d rank=%d params=%d held=%d unsharded=%d largest_var_slots=%d "
          "peak_rss=%d rss_before_fit=%d" % (N, R, params, held, unsharded, 2 * 4 * largest,
                                             peak, before))


def bad_input():
    C.raises("Lamb is refused",
             lambda: hk.DistributedOptimizer(keras.optimizers.Lamb(), sharded=True),
             ValueError,
             ["DistributedOptimizer(sharded=True) cannot shard the state of "
              "keras.src.optimizers.lamb.Lamb: sharding cuts variables into flat slices, "
              "which only optimizers with an elementwise update allow. Supported: "
              "keras.optimizers.SGD, Adam, AdamW, Adamax, Nadam, RMSprop, Adagrad, "
              "Adadelta, Ftrl, Lion (and a LossScaleOptimizer around one of them); use "
              "sharded=False for Lamb."])
    C.raises("LossScaleOptimizer(Lamb) is refused",
             lambda: hk.DistributedOptimizer(
                 keras.optimizers.LossScaleOptimizer(keras.optimizers.Lamb()), sharded=True),
             ValueError, ["cannot shard the state of keras.src.optimizers.lamb.Lamb"])
    C.raises("TF1 optimizer is refused",
             lambda: hvd.DistributedOptimizer(
                 tf.compat.v1.train.AdamOptimizer(), sharded=True), ValueError,
             ["DistributedOptimizer(sharded=True) supports Keras optimizers only; "
              "AdamOptimizer is a TF1 optimizer (tf.compat.v1.train): use sharded=False "
              "in TF1 graphs"])
    C.raises("Adasum is refused",
             lambda: hk.DistributedOptimizer(keras.optimizers.Adam(), sharded=True,
                                             op=hvd.Adasum), ValueError,
             ["DistributedOptimizer(sharded=True) reduces with reducescatter, which takes "
              "op=hvd.Average or hvd.Sum, not Adasum"])
    C.raises("use_ema is refused",
             lambda: hk.DistributedOptimizer(keras.optimizers.Adam(use_ema=True),
                                             sharded=True), ValueError, ["use_ema=True"])
    # The last rank's model has a wider first layer: every rank names the variable.
    hid = HID + 1 if R == N - 1 else HID
    model = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(hid),
                              keras.layers.Dense(1)])
    kernel = model.trainable_variables[0].path
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(), sharded=True)
    others = ", ".join(str(r) for r in range(N - 1))
    expected = ("sharded optimizer: trainable variable 0 differs across ranks: '%s' has "
                "shape (%d, %d) float32 on rank%s %s but shape (%d, %d) float32 on rank %d"
                % (kernel, DIM, HID, "s" if N > 2 else "", others, DIM, HID + 1, N - 1))
    names = hvd.allgather_object(kernel)
    if len(set(names)) > 1:  # auto-numbered layer names differ: each rank's is named
        expected = "sharded optimizer: trainable variable 0 differs across ranks:"
    C.raises("variables differing across ranks", lambda: opt.build(model.trainable_variables),
             ValueError, [expected])
    # Saving without gathering first is refused with what to do.
    model = mlp()
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(), sharded=True)
    model.compile(optimizer=opt, loss="mse")
    x, y = make_data(1, N, B, DIM)
    model.fit(shard(x, N, R, B), shard(y, N, R, B), batch_size=B, verbose=0)
    if N > 1:
        C.raises("save without gather_state",
                 lambda: model.save(os.path.join(DIR, "nogather_%d.keras" % R)),
                 ValueError, ["a sharded optimizer holds 1/%d of the optimizer state on each "
                              "rank: call optimizer.gather_state(root_rank) on every rank "
                              "first" % N])


# ---------------------------------------------------------------------------
# Checkpoints: saved sharded at one size, resumed at another.

CKPT = os.path.join(DIR, "sharded.keras")
RESUME_STEPS = 10


def ckpt_data():
    return make_data(10 + RESUME_STEPS * 6, 1, B, DIM, seed=77)


def ckpt_save():
    x, y = ckpt_data()
    model = mlp(seed=5)
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.01), sharded=True)
    fit(opt, x[:10 * N * B], y[:10 * N * B], model=model)
    hk.save_model(model, CKPT)
    state = opt.gather_state(root_rank=0)
    if R == 0:
        np.savez(os.path.join(DIR, "saved_at_np%d.npz" % N), *to_np(model.weights))
        np.savez(os.path.join(DIR, "saved_state_np%d.npz" % N), *state)
        with open(os.path.join(DIR, "saved_np"), "w") as f:
            f.write(str(N))
    hvd.barrier()
    C.expect(os.path.exists(CKPT), "saved")


def _npz(path):
    data = np.load(path)
    return [data["arr_%d" % i] for i in range(len(data.files))]


def ckpt_resume():
    with open(os.path.join(DIR, "saved_np")) as f:
        saved_np = int(f.read())
    saved_weights = _npz(os.path.join(DIR, "saved_at_np%d.npz" % saved_np))
    saved_state = _npz(os.path.join(DIR, "saved_state_np%d.npz" % saved_np))
    x, y = ckpt_data()
    start = 10 * saved_np * B
    xr, yr = x[start:start + RESUME_STEPS * N * B], y[start:start + RESUME_STEPS * N * B]
    sharded = hk.load_model(CKPT, sharded=True)
    C.expect(getattr(type(sharded.optimizer), "_hvd_sharded", False), "loaded sharded")
    C.close("resumed weights == saved", to_np(sharded.weights), saved_weights, rtol=0, atol=0)
    restored = sharded.optimizer.gather_state(root_rank=0)
    restored = hvd.broadcast_object(restored, root_rank=0)
    C.close("resumed sharded state == saved state (np=%d -> %d)" % (saved_np, N),
            restored, saved_state, rtol=0, atol=0)
    check_holds_slice("resumed", sharded.optimizer, sharded)
    unsharded = hk.load_model(CKPT)
    C.close("unsharded load: state == saved", to_np(unsharded.optimizer.variables),
            saved_state, rtol=0, atol=0)
    _, losses_s = fit(sharded.optimizer, xr, yr, model=sharded)
    _, losses_u = fit(unsharded.optimizer, xr, yr, model=unsharded)
    C.close("resumed at np=%d: sharded == unsharded weights after %d steps"
            % (N, RESUME_STEPS), to_np(sharded.weights), to_np(unsharded.weights), **TOL)
    C.close("resumed at np=%d: sharded == unsharded losses" % N, [losses_s], [losses_u],
            **TOL)
    C.equal("resumed iterations", int(sharded.optimizer.iterations), 10 + RESUME_STEPS)
    C.same_on_all_ranks("resumed weights on every rank", to_np(sharded.weights))
    # An optimizer of another kind cannot take this checkpoint's state.
    model = mlp(seed=5)
    model.compile(optimizer=hk.DistributedOptimizer(
        keras.optimizers.SGD(0.1, momentum=0.9), sharded=True), loss="mse")
    model.optimizer.build(model.trainable_variables)
    C.raises("incompatible checkpoint", lambda: model.load_weights(CKPT), ValueError,
             ["incompatible optimizer checkpoint: it holds 14 optimizer variables, but a "
              "SGD built on these 6 trainable variables has 8 (2 of its own and the slots "
              "['momentum'] per variable): a checkpoint of another optimizer or of another "
              "model"])


C.section("state_bytes", state_bytes)   # first: the peak memory is this section's
C.section("equivalence", equivalence)
C.section("composition", composition)
C.section("process_set", process_set)
C.section("bad_input", bad_input)
C.section("ckpt_save", ckpt_save)
C.section("ckpt_resume", ckpt_resume)
sys.exit(C.finish())
