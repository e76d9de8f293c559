"""DistributedGradientTape, the TF1 DistributedOptimizer, the local gradient
aggregation helpers and the gradient-reduction function in one process
(size 1). Multi-process behaviour: tests/parallel/test_training.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)

import tf_hvd as hvd
from tf_hvd import allreduce_grads as ag
from tf_hvd.gradient_aggregation import (LocalGradientAggregationHelper,
                                         LocalGradientAggregationHelperEager)
from tf_hvd.optimizer import _DistributedOptimizer

v1 = tf.compat.v1


def test_exported_names():
    for name in ["DistributedOptimizer", "DistributedGradientTape",
                 "PartialDistributedGradientTape", "BroadcastGlobalVariablesHook"]:
        assert hasattr(hvd, name), name


# ---------------------------------------------------------------------------
# DistributedGradientTape


def _quadratic():
    w = tf.Variable([1.0, 2.0, 3.0])
    return w, lambda: tf.reduce_sum(w * w)


def test_tape_wraps_a_finished_tape_and_keeps_its_class():
    class MyTape(tf.GradientTape):
        pass

    w, loss_fn = _quadratic()
    with MyTape() as tape:
        loss = loss_fn()
    dtape = hvd.DistributedGradientTape(tape)
    assert isinstance(dtape, MyTape) and isinstance(dtape, tf.GradientTape)
    np.testing.assert_allclose(dtape.gradient(loss, w), [2, 4, 6])
    with pytest.raises(RuntimeError):
        dtape.gradient(loss, w)   # non-persistent: one gradient only


def test_tape_as_context_manager_watch_and_persistent():
    x = tf.constant(3.0)
    with hvd.DistributedGradientTape(tf.GradientTape(persistent=True)) as tape:
        tape.watch(x)
        y = x * x
        z = y * x
    assert float(tape.gradient(y, x)) == 6.0
    assert float(tape.gradient(z, x)) == 27.0
    assert len(tape.watched_variables()) == 0


def test_tape_nested_sources_none_and_jacobian():
    w, loss_fn = _quadratic()
    unused = tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as tape:
        loss = loss_fn()
        vec = w * 2.0
    dtape = hvd.DistributedGradientTape(tape)
    grads = dtape.gradient(loss, {"a": [w], "b": (unused,)})
    assert set(grads) == {"a", "b"} and grads["b"][0] is None
    np.testing.assert_allclose(grads["a"][0], [2, 4, 6])
    np.testing.assert_allclose(dtape.jacobian(vec, w), 2 * np.eye(3))
    zeros = dtape.gradient(loss, unused, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert float(zeros) == 0.0


def test_tape_in_tf_function_with_keras_variables():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    @tf.function
    def grads(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        tape = hvd.DistributedGradientTape(tape, compression=hvd.Compression.fp16,
                                           groups=1, sparse_as_dense=True)
        return tape.gradient(loss, model.trainable_variables)

    kernel, bias = grads(tf.ones((4, 2)))
    np.testing.assert_allclose(kernel, 4 * np.ones((2, 1)))
    np.testing.assert_allclose(bias, [4.0])


def test_tape_argument_errors():
    with pytest.raises(TypeError):
        hvd.DistributedGradientTape(object())
    dtape = hvd.DistributedGradientTape(tf.GradientTape())
    with pytest.raises(ValueError, match="already"):
        hvd.DistributedGradientTape(dtape)
    with pytest.raises(ValueError, match="predivide"):
        hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Sum,
                                    gradient_predivide_factor=2.0)


def test_partial_tape_registers_local_layers():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    tape = hvd.PartialDistributedGradientTape(tf.GradientTape(), local_layers=layer)
    assert tape._hvd_local_sources == {id(v) for v in layer.trainable_weights}


# ---------------------------------------------------------------------------
# The gradient-reduction function


def test_allreduce_grads_is_identity_in_one_process():
    fn = ag.make_allreduce_grads_fn("X", sparse_as_dense=False)
    g = tf.constant([1.0])
    sparse = tf.IndexedSlices(tf.ones((1, 2)), tf.constant([0]), tf.constant([3, 2]))
    out = fn([g, None, sparse])
    assert out[0] is g and out[1] is None and out[2] is sparse
    dense = ag.make_allreduce_grads_fn("X", sparse_as_dense=True)([sparse])[0]
    assert isinstance(dense, tf.Tensor)
    np.testing.assert_allclose(dense, [[1, 1], [0, 0], [0, 0]])


def test_allreduce_grads_functions_are_cached():
    a = ag.make_allreduce_grads_fn("T", "", "", hvd.Compression.none, False, hvd.Average,
                                   1.0, None)
    b = ag.make_allreduce_grads_fn("T", "", "", hvd.Compression.none, False, hvd.Average,
                                   1.0, None)
    c = ag.make_allreduce_grads_fn("T", "", "", hvd.Compression.fp16, False, hvd.Average,
                                   1.0, None)
    assert a is b and a is not c


def test_allreduce_grads_argument_errors():
    with pytest.raises(ValueError, match="predivide"):
        ag.make_allreduce_grads_fn("X", op=hvd.Sum, gradient_predivide_factor=2.0)
    assert callable(ag.make_allreduce_grads_fn("X", op=hvd.Adasum))
    with pytest.raises(ValueError, match="groups"):
        ag.make_allreduce_grads_fn("X", groups="two")
    with pytest.raises(ValueError, match="groups"):
        ag.make_allreduce_grads_fn("X", groups=-1)([tf.ones(1)], None) if hvd.size() > 1 \
            else ag._group_layout([tf.ones(1)], None, -1)


def test_group_layout():
    g = [tf.ones(1)] * 5
    assert ag._group_layout(g, None, None) == ((0,), (1,), (2,), (3,), (4,))
    assert ag._group_layout(g, None, 2) == ((0, 1, 2), (3, 4))
    assert ag._group_layout(g, None, 9) == ((0,), (1,), (2,), (3,), (4,))
    sparse = tf.IndexedSlices(tf.ones((1, 1)), tf.constant([0]), tf.constant([2, 1]))
    mixed = [g[0], None, sparse, g[1], g[2]]
    assert ag._group_layout(mixed, None, 1) == ((0, 3, 4),)
    vs = [tf.Variable(1.0, name="v%d" % i) for i in range(5)]
    assert ag._group_layout(g, vs, [[vs[4], vs[1]], [vs[2]]]) == ((0,), (1, 4), (2,), (3,))
    assert ag._labels(vs, 5) == ("v0", "v1", "v2", "v3", "v4")
    assert ag._labels(None, 2) == ("", "")


# ---------------------------------------------------------------------------
# Local gradient aggregation


class _FakeAllreduce(object):
    """Stands in for the allreduce: counts calls, remembers what it got (in
    variables, so it works inside tf.function) and multiplies by 10."""

    def __init__(self, shape):
        self.calls = tf.Variable(0)
        self.received = tf.Variable(tf.zeros((4,) + shape))

    def __call__(self, grads, variables=None):
        g = tf.convert_to_tensor(grads[0])
        self.received.scatter_nd_update([[self.calls]], [g])
        self.calls.assign_add(1)
        return [tf.convert_to_tensor(x) * 10.0 for x in grads]


@pytest.mark.parametrize("in_function", [False, True])
@pytest.mark.parametrize("average", [False, True])
def test_eager_aggregation_communicates_every_n_passes(in_function, average):
    fake = _FakeAllreduce((2,))
    helper = LocalGradientAggregationHelperEager(
        3, fake, average_aggregated_gradients=average)
    var = tf.Variable([0.0, 0.0])
    applied = []

    def step(g):
        out = helper.compute_gradients([g, None], [var, None])
        assert out[1] is None
        return helper.apply_gradients(lambda: var.assign_add(out[0]), grads=out)

    if in_function:
        step = tf.function(step)
    for i in range(7):
        applied.append(bool(step(tf.constant([1.0, float(i)]))))
    assert applied == [False, False, True, False, False, True, False]
    assert int(fake.calls.numpy()) == 2
    expected = [[3.0, 3.0], [3.0, 12.0]]
    if average:
        expected = [[1.0, 1.0], [1.0, 4.0]]
    np.testing.assert_allclose(fake.received.numpy()[:2], expected)
    np.testing.assert_allclose(var.numpy(), 10 * np.sum(expected, axis=0))
    assert int(helper.counter.numpy()) == 1


def test_eager_aggregation_of_sparse_gradients_and_none_checks():
    fake = _FakeAllreduce((3, 2))
    helper = LocalGradientAggregationHelperEager(2, fake)
    sparse = tf.IndexedSlices(tf.ones((2, 2)), tf.constant([0, 2]), tf.constant([3, 2]))
    helper.compute_gradients([sparse])
    out = helper.compute_gradients([sparse])
    np.testing.assert_allclose(fake.received.numpy()[0], [[2, 2], [0, 0], [2, 2]])
    np.testing.assert_allclose(out[0], [[20, 20], [0, 0], [20, 20]])
    with pytest.raises(ValueError, match="changed"):
        helper.compute_gradients([None])
    with pytest.raises(ValueError):
        LocalGradientAggregationHelperEager(0, fake)


@pytest.mark.parametrize("control_flow_v2", [True, False])
def test_graph_aggregation_uses_local_variables(control_flow_v2):
    if not control_flow_v2:
        v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default():
            helper = LocalGradientAggregationHelper(
                2, lambda grads, variables=None: [g * 10.0 for g in grads],
                average_aggregated_gradients=True)
            g = v1.placeholder(tf.float32, [2])
            var = v1.get_variable("v", initializer=tf.zeros([2]), use_resource=True)
            out = helper.compute_gradients([g], [var])
            op = helper.apply_gradients(lambda: var.assign_add(out[0]), grads=out)
            local = {v.name for v in v1.local_variables()}
            assert any("counter" in n for n in local) and len(local) == 2
            assert not any("counter" in v.name for v in v1.global_variables()
                           if v is not var)
            with v1.Session() as sess:
                sess.run([v1.global_variables_initializer(),
                          v1.local_variables_initializer()])
                seen = [sess.run(op, {g: [1.0, float(i)]}) for i in range(4)]
                assert seen == [False, True, False, True]
                np.testing.assert_allclose(sess.run(var), [20.0, 30.0])
    finally:
        if not control_flow_v2:
            v1.enable_control_flow_v2()


# ---------------------------------------------------------------------------
# TF1 DistributedOptimizer


def _tf1_problem(seed=0):
    rs = np.random.RandomState(seed)
    x = v1.placeholder(tf.float32, [None, 3])
    y = v1.placeholder(tf.float32, [None, 1])
    w = v1.get_variable("w", initializer=tf.constant(rs.randn(3, 1).astype(np.float32)))
    b = v1.get_variable("b", initializer=tf.zeros([1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    return x, y, [w, b], loss


def test_tf1_optimizer_delegates():
    with tf.Graph().as_default():
        x, y, variables, loss = _tf1_problem()
        inner = v1.train.AdamOptimizer(0.1)
        opt = hvd.DistributedOptimizer(inner)
        assert isinstance(opt, _DistributedOptimizer)
        assert isinstance(opt, v1.train.Optimizer)
        assert opt.get_name() == "DistributedAdamOptimizer"
        train = opt.minimize(loss)
        assert opt.get_slot_names() == inner.get_slot_names() == ["m", "v"]
        assert opt.get_slot(variables[0], "m") is inner.get_slot(variables[0], "m")
        assert opt.variables() == inner.variables() and opt.variables()
        assert train is not None
    with pytest.raises(ValueError, match="already"):
        hvd.DistributedOptimizer(opt)


@pytest.mark.parametrize("name", ["sgd", "adam"])
@pytest.mark.parametrize("control_flow_v2", [True, False])
def test_tf1_backward_passes_per_step_equals_the_bigger_batch(name, control_flow_v2):
    make = {"sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
            "adam": lambda: v1.train.AdamOptimizer(0.05)}[name]
    rs = np.random.RandomState(3)
    data_x = rs.randn(16, 3).astype(np.float32)
    data_y = rs.randn(16, 1).astype(np.float32)
    if not control_flow_v2:
        v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default():
            x, y, variables, loss = _tf1_problem()
            step = v1.train.get_or_create_global_step()
            opt = hvd.DistributedOptimizer(make(), backward_passes_per_step=2,
                                           average_aggregated_gradients=True)
            train = opt.minimize(loss, global_step=step)
            with v1.train.MonitoredTrainingSession(
                    hooks=[hvd.BroadcastGlobalVariablesHook(0)]) as sess:
                for i in range(8):
                    sess.run(train, {x: data_x[2 * i:2 * i + 2], y: data_y[2 * i:2 * i + 2]})
                result, gstep = sess.run([variables, step])
    finally:
        if not control_flow_v2:
            v1.enable_control_flow_v2()
    assert gstep == 8    # the global step counts backward passes
    with tf.Graph().as_default():
        x, y, variables, loss = _tf1_problem()
        train = make().minimize(loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for i in range(4):
                sess.run(train, {x: data_x[4 * i:4 * i + 4], y: data_y[4 * i:4 * i + 4]})
            ref = sess.run(variables)
    for a, b in zip(result, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_tf1_optimizer_executes_eagerly_too():
    w = tf.Variable([1.0, 1.0])
    opt = hvd.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.5),
                                   backward_passes_per_step=2)
    for _ in range(4):
        opt.minimize(lambda: tf.reduce_sum(w * w), var_list=[w])
    # Two updates, each with the sum of two passes' gradients (2w each):
    # w = 1 - 0.5 * (2 + 2) = -1, then -1 - 0.5 * (-2 - 2) = 1.
    np.testing.assert_allclose(w.numpy(), [1.0, 1.0])
    opt = hvd.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.25))
    opt.minimize(lambda: tf.reduce_sum(w * w), var_list=[w])
    np.testing.assert_allclose(w.numpy(), [0.5, 0.5])


def test_broadcast_hook_builds_its_op_per_graph():
    hook = hvd.BroadcastGlobalVariablesHook(0)
    for _ in range(2):
        with tf.Graph().as_default() as graph:
            v = v1.get_variable("v", initializer=tf.ones([2]))
            with v1.train.MonitoredTrainingSession(hooks=[hook]) as sess:
                np.testing.assert_allclose(sess.run(v), [1, 1])
            assert hook.bcast_op.graph is graph


def test_xla_steps_reduce_each_dtype_as_one_group():
    grads = [tf.ones(2), None, tf.ones(3, tf.float64), tf.ones(1),
             tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0])), tf.ones(4, tf.float64)]
    assert ag._xla_layout(grads) == ((0, 3), (2, 5))


def test_ops_without_xla_kernels_are_refused_naming_the_op():
    from tf_hvd import ops as hvd_ops

    @tf.function(jit_compile=True)
    def step(x):
        return hvd_ops.alltoall(x)

    with pytest.raises(NotImplementedError, match="HorovodAlltoall has no XLA kernel"):
        step(tf.ones(2))
    assert hvd_ops.in_xla_function() is False
