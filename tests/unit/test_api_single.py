"""The Python API in one process without a launcher (a job of size 1)."""

import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)

import tf_hvd as hvd
from tf_hvd import _library
from tf_hvd import ops as hvd_ops

DTYPES = (tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16,
          tf.bfloat16, tf.float32, tf.float64)


def _vals(dtype, shape=(2, 3)):
    n = int(np.prod(shape))
    v = np.arange(n) % 5 + 1
    return v.reshape(shape).astype(dtype.as_numpy_dtype)


def test_topology():
    assert hvd.is_initialized()
    assert (hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank()) == (1, 0, 1, 0)
    assert (hvd.cross_size(), hvd.cross_rank()) == (1, 0)
    assert hvd.is_homogeneous()
    assert hvd.mpi_enabled() is False and hvd.gloo_enabled() is False
    assert isinstance(hvd.mpi_built(), bool) and isinstance(hvd.gloo_built(), bool)
    # The library says it has NCCL exactly when it calls NCCL: False for the default
    # build, True for --config=cuda (tests/unit/test_cuda_build.py). MPI is loaded at run
    # time: found here (the development venv has the mpich wheel).
    with open(_library._find_library(), "rb") as f:
        library = f.read()
    assert hvd.nccl_built() is (b"ncclCommInitRank\0" in library)
    assert hvd.mpi_built() is True
    assert hvd.rocm_built() is False
    hvd.init()  # idempotent
    assert hvd.size() == 1


def test_reduce_op_constants():
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)


def test_init_comm_and_process_set_objects():
    hvd.init(comm=[0])  # every rank of this job (and initialized already: nothing to do)
    with pytest.raises(ValueError, match="Invalid type of argument comm"):
        hvd.init(comm=["0"])
    with pytest.raises(ValueError, match="list of process ranks"):
        hvd.ProcessSet([0.5])
    ps = hvd.ProcessSet([3, 1])
    assert ps.ranks == [1, 3] and ps.process_set_id is None and ps.size() is None
    assert str(ps) == "ProcessSet(process_set_id=None, ranks=[1, 3], mpi_comm=None)"
    assert ps.included() is False and hvd.ProcessSet([0]).included() is True
    g = hvd.global_process_set
    assert (g.process_set_id, g.ranks, g.size(), g.rank()) == (0, [0], 1, 0)
    with pytest.raises(ValueError, match="is not registered"):
        hvd.allreduce(tf.ones([1]), process_set=ps)
    assert int(hvd.size_op(process_set_id=0)) == 1
    np.testing.assert_array_equal(hvd.allreduce(tf.ones([2]), process_set=g).numpy(), [1, 1])
    with pytest.raises(ValueError, match="HOROVOD_DYNAMIC_PROCESS_SETS=1"):
        hvd.add_process_set([0])
    assert hvd.remove_process_set(g) is False


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_identity(dtype, op):
    x = _vals(dtype)
    out = hvd.allreduce(tf.constant(x), op=getattr(hvd, op))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), x)


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4, 5)])
def test_allreduce_shapes_and_scaling(shape):
    x = _vals(tf.float32, shape)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    np.testing.assert_allclose(out.numpy(), x * 2.0)
    out = hvd.allreduce(x.astype(np.int32), op=hvd.Sum, prescale_factor=2.0,
                        postscale_factor=3.0)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.int32) * 6)


def test_allreduce_default_is_average_and_average_flag():
    x = np.array([1.0, 3.0], np.float32)
    np.testing.assert_allclose(hvd.allreduce(x).numpy(), x)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_allclose(hvd.allreduce(x, average=False).numpy(), x)
    with pytest.raises(ValueError):
        hvd.allreduce(x, op=hvd.Sum, average=True)
    with pytest.raises(ValueError):
        hvd.allreduce(x, op=17)


def test_fp16_compression():
    x = np.array([1.5, -2.25, 3.0], np.float32)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), x)
    c, ctx = hvd.Compression.fp16.compress(tf.constant(x))
    assert c.dtype == tf.float16 and ctx == tf.float32
    c, ctx = hvd.Compression.fp16.compress(tf.constant([1, 2]))
    assert c.dtype == tf.int32 and ctx is None
    c, ctx = hvd.Compression.fp16.compress(tf.constant([1.0], tf.float64))
    assert c.dtype == tf.float16
    assert hvd.Compression.fp16.decompress(c, ctx).dtype == tf.float64
    c, ctx = hvd.Compression.none.compress(tf.constant(x))
    assert c.dtype == tf.float32 and ctx is None
    assert issubclass(hvd.Compression.fp16, hvd.Compressor)


def test_grouped_allreduce():
    xs = [_vals(tf.float32, (3,)), _vals(tf.int32, (2, 2)), _vals(tf.float16, ())]
    outs = hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Sum)
    assert len(outs) == 3
    for o, x in zip(outs, xs):
        np.testing.assert_array_equal(o.numpy(), x)
    assert hvd.grouped_allreduce([]) == []


@pytest.mark.parametrize("dtype", DTYPES + (tf.bool,), ids=lambda d: d.name)
def test_allgather_broadcast_alltoall(dtype):
    x = _vals(dtype, (3, 2)) if dtype != tf.bool else np.array([[True, False]] * 3)
    np.testing.assert_array_equal(hvd.allgather(x).numpy(), x)
    np.testing.assert_array_equal(hvd.broadcast(x, 0).numpy(), x)
    out = hvd.alltoall(x)  # without splits: the output alone, as Horovod
    np.testing.assert_array_equal(out.numpy(), x)
    out, splits = hvd.alltoall(x, splits=[3])
    np.testing.assert_array_equal(out.numpy(), x)
    np.testing.assert_array_equal(splits.numpy(), [3])


def test_allgather_empty():
    out = hvd.allgather(tf.zeros([0, 4]))
    assert out.shape == (0, 4)


def test_reducescatter():
    x = _vals(tf.float32, (5, 2))
    np.testing.assert_allclose(hvd.reducescatter(x).numpy(), x)
    np.testing.assert_allclose(hvd.reducescatter(x, op=hvd.Sum, prescale_factor=2.0).numpy(),
                               2 * x)
    with pytest.raises(ValueError):
        hvd.reducescatter(x, op=hvd.Max)


def test_join_and_barrier():
    assert int(hvd.join().numpy()) == 0
    assert hvd.barrier() is None


def test_scale_factors_round_as_horovod():
    # Integers: float64 product truncated toward zero; float16: in float32.
    x = tf.constant([7, -7, 5, 3], tf.int32)
    for fn in (lambda t, **k: hvd.allreduce(t, op=hvd.Sum, **k),
               lambda t, **k: hvd.reducescatter(t, op=hvd.Sum, **k),
               lambda t, **k: hvd.grouped_reducescatter([t], op=hvd.Sum, **k)[0],
               lambda t, **k: hvd.grouped_allreduce([t], op=hvd.Sum, **k)[0]):
        np.testing.assert_array_equal(fn(x, prescale_factor=0.5).numpy(), [3, -3, 2, 1])
        np.testing.assert_array_equal(fn(x, postscale_factor=0.5).numpy(), [3, -3, 2, 1])
        np.testing.assert_array_equal(
            fn(tf.constant([3, -3], tf.int8), prescale_factor=2.6).numpy(), [7, -7])
        h = fn(tf.constant([1.26, 1.299], tf.float16), postscale_factor=2.9).numpy()
        assert h.view(np.uint16).tolist() == [0x434f, 0x4389]
    # Average of integers is sum * (post / size), truncated.
    np.testing.assert_array_equal(
        hvd.allreduce(x, op=hvd.Average, postscale_factor=0.25).numpy(), [1, -1, 1, 0])


def test_scalar_ops():
    assert int(hvd.size_op().numpy()) == 1
    assert int(hvd.size_op(0).numpy()) == 1  # Horovod's order: process_set_id first
    assert int(hvd.process_set_included_op().numpy()) == 1
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Process set does not exist or has not been registered "
                             r"\(process set id 3\)"):
        hvd.size_op(3)
    assert int(hvd.rank_op().numpy()) == 0
    assert int(hvd.local_size_op().numpy()) == 1
    assert int(hvd.local_rank_op().numpy()) == 0


def test_indexed_slices():
    s = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([0, 2]),
                         dense_shape=tf.constant([3, 2]))
    out = hvd.allreduce(s, op=hvd.Average)
    assert isinstance(out, tf.IndexedSlices)
    np.testing.assert_allclose(tf.convert_to_tensor(out).numpy(),
                               [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]])
    for op in (hvd.Max, hvd.Min, hvd.Product, hvd.Adasum):
        with pytest.raises(NotImplementedError):
            hvd.allreduce(s, op=op)
    with pytest.raises(NotImplementedError, match="prescale_factor"):
        hvd.allreduce(s, op=hvd.Sum, prescale_factor=2.0)
    with pytest.raises(NotImplementedError, match="postscale_factor"):
        hvd.grouped_allreduce([s], postscale_factor=0.5)
    # Integer values: Average divides with "/" (int32 -> float64), as Horovod.
    si = tf.IndexedSlices(tf.constant([[3, 4]], tf.int32), tf.constant([1]),
                          dense_shape=tf.constant([2, 2]))
    out = hvd.allreduce(si, op=hvd.Average)
    assert out.values.dtype == tf.float64
    np.testing.assert_array_equal(out.values.numpy(), [[3.0, 4.0]])
    assert hvd.allreduce(si, op=hvd.Sum).values.dtype == tf.int32


def _grad(fn, x, w):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(fn(x) * w)
    return tape.gradient(loss, x).numpy()


@pytest.mark.parametrize("name,fn", [
    ("allreduce_sum", lambda t: hvd.allreduce(t, op=hvd.Sum)),
    ("allreduce_avg_scaled", lambda t: hvd.allreduce(t, op=hvd.Average, prescale_factor=2.0,
                                                     postscale_factor=1.5)),
    ("allreduce_max", lambda t: hvd.allreduce(t, op=hvd.Max)),
    ("allreduce_min", lambda t: hvd.allreduce(t, op=hvd.Min)),
    ("allreduce_product", lambda t: hvd.allreduce(t, op=hvd.Product)),
    ("allgather", lambda t: hvd.allgather(t)),
    ("broadcast", lambda t: hvd.broadcast(t, 0)),
    ("alltoall", lambda t: hvd.alltoall(t, splits=[3])[0]),
    ("reducescatter", lambda t: hvd.reducescatter(t, op=hvd.Sum)),
    ("grouped", lambda t: hvd.grouped_allreduce([t], op=hvd.Sum)[0]),
])
def test_gradients_size_one(name, fn):
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]], np.float32)
    w = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    expected = w * (3.0 if name == "allreduce_avg_scaled" else 1.0)
    np.testing.assert_allclose(_grad(fn, x, w), expected)
    # Same inside tf.function.
    got = tf.function(lambda: tf.convert_to_tensor(_grad_graph(fn, x, w)))()
    np.testing.assert_allclose(got.numpy(), expected)


def _grad_graph(fn, x, w):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(fn(x) * w)
    return tape.gradient(loss, x)


def test_eager_noname_is_the_kind():
    # Independent of how many collectives ran before: ranks stay in step.
    assert hvd_ops.op_names("allreduce", "HorovodAllreduce", None) == (None, "allreduce.noname")
    hvd.allreduce(tf.constant([1.0]))
    assert hvd_ops.op_names("allreduce", "HorovodAllreduce", None) == (None, "allreduce.noname")
    assert hvd_ops.op_names("allgather", "HorovodAllgather", "given") == (None, "given")


def test_graph_op_names():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0], name="dense/kernel")
        y = hvd.allreduce(x, op=hvd.Sum)
        assert y.op.type == "HorovodAllreduce"
        assert y.op.name == "HorovodAllreduce_dense_kernel_0"
        assert y.op.get_attr("tensor_name") == b""
        z = hvd.allgather(x, name="my_gather")
        assert z.op.name == "my_gather"
        with tf.name_scope("outer"):
            b = hvd.broadcast(x, 0)
            a = hvd.alltoall(x)
            rs = hvd.reducescatter(x, ignore_name_scope=True)
        assert b.op.name == "outer/HorovodBroadcast_dense_kernel_0"
        assert a.op.name == "outer/HorovodAlltoall_dense_kernel_0"
        assert rs.op.get_attr("ignore_name_scope") is True
        ga = hvd.grouped_allreduce([x, x])
        assert ga[0].op.name == "HorovodGroupedAllreduce_dense_kernel_0"
        j = hvd.join()
        assert j.op.type == "HorovodJoin"
        bar = hvd.barrier()
        assert bar.type == "HorovodBarrier"
        with tf.compat.v1.Session(graph=g) as sess:
            res = sess.run([y, z, b, a, rs] + ga)
        for r in res:
            np.testing.assert_allclose(r, [1.0])


def test_broadcast_variables_tf_and_keras():
    import keras
    v = tf.Variable([1.0, 2.0])
    k = keras.Variable(np.ones([2, 2], np.float32))
    assert hvd.broadcast_variables([v, k], root_rank=0) is None
    np.testing.assert_allclose(v.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(k.numpy(), np.ones([2, 2]))
    assert hvd.broadcast_variables([], 0) is None


def test_in_place_broadcast_and_object_fn():
    v = tf.Variable([1.0, 2.0])
    w = tf.Variable([[3]], dtype=tf.int64)
    values = hvd.broadcast_([v, w], root_rank=0, name="inplace")
    np.testing.assert_array_equal(values[0].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(values[1].numpy(), [[3]])
    assert hvd.broadcast_variables([v], 0, inplace=True) is None
    got = tf.function(lambda: hvd.broadcast_([v], 0))()
    np.testing.assert_array_equal(got[0].numpy(), [1.0, 2.0])
    bcast = hvd.broadcast_object_fn(root_rank=0, name="cfg")
    assert bcast({"lr": 0.1}) == {"lr": 0.1}
    g = tf.Graph()
    with g.as_default():
        gv = tf.compat.v1.get_variable("gv", initializer=np.arange(3, dtype=np.float32))
        vals = hvd.broadcast_([gv], 0)
        op = hvd.broadcast_variables([gv], 0, inplace=True)
        assert isinstance(op, tf.Operation)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_allclose(sess.run(vals)[0], [0.0, 1.0, 2.0])
            sess.run(op)
            assert hvd.broadcast_object_fn(0)([1, 2]) == [1, 2]


def test_average_helpers():
    assert hvd.handle_average_backwards_compatibility(None, None) == hvd.Average
    assert hvd.handle_average_backwards_compatibility(hvd.Max, None) == hvd.Max
    with pytest.warns(DeprecationWarning):
        assert hvd.handle_average_backwards_compatibility(None, False) == hvd.Sum
    with pytest.raises(ValueError):
        hvd.handle_average_backwards_compatibility(hvd.Sum, True)
    assert [n for n in range(10) if hvd.check_num_rank_power_of_2(n)] == [1, 2, 4, 8]


def test_local_sources_and_scaling_single_rank():
    # One rank: local gradients divided by size() == 1, split in two lists.
    a, b = tf.Variable(2.0), tf.Variable(3.0)
    with tf.GradientTape() as tape:
        loss = a * b
    tape = hvd.DistributedGradientTape(tape, scale_local_gradients=True)
    tape.register_local_source(b)
    local, shared = tape.get_local_and_global_gradients(loss, [a, b])
    assert [float(g) for g in local] == [2.0] and [float(g) for g in shared] == [3.0]
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0))
    opt.register_local_var(b)
    assert opt.scale_local_gradients is True
    helper = hvd.LocalGradientAggregationHelperEager(
        2, lambda g, v=None: [x * 10 for x in g], False, False, 4.0)
    helper.register_local_var(b)
    helper.compute_gradients([tf.constant(1.0), tf.constant(1.0)], [a, b])
    out = helper.compute_gradients([tf.constant(1.0), tf.constant(1.0)], [a, b])
    assert [float(x) for x in out] == [20.0, 0.5]  # shared allreduced, local / 4


def test_broadcast_global_variables_refuses_eager():
    with pytest.raises(RuntimeError, match="does not support eager execution; use "
                                           r"hvd.broadcast_variables\("):
        hvd.broadcast_global_variables(0)


def test_objects_travel_by_value_with_cloudpickle():
    """As Horovod (cloudpickle): lambdas, closures and classes made in a function."""
    offset = 5

    class Local(object):
        def value(self):
            return offset * 2

    assert hvd.broadcast_object(lambda v: v + offset, root_rank=0)(1) == 6
    got = hvd.broadcast_object(Local(), root_rank=0)
    assert type(got).__name__ == "Local" and got.value() == 10
    assert [f() for f in hvd.allgather_object(lambda: offset)] == [5]
    assert hvd.broadcast_object_fn(root_rank=0)(Local)().value() == 10


def test_an_unregistered_process_set_id_raises_value_error_when_built():
    fake = hvd.ProcessSet([0])
    fake.process_set_id = 10      # Horovod's test does this ("you should not do this")
    x = tf.ones([4])
    for build in (lambda: hvd.allreduce(x, process_set=fake),
                  lambda: hvd.allgather(x, process_set=fake),
                  lambda: hvd.broadcast(x, 0, process_set=fake),
                  lambda: tf.function(lambda: hvd.allreduce(x, process_set=fake))()):
        with pytest.raises(ValueError, match=r"not been registered \(process set id 10\)"):
            build()


def test_broadcast_global_variables_graph():
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("v", initializer=np.arange(3, dtype=np.float32))
        op = hvd.broadcast_global_variables(0)
        assert isinstance(op, tf.Operation)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(op)
            np.testing.assert_allclose(sess.run(v), [0.0, 1.0, 2.0])


def test_objects():
    obj = {"a": [1, 2, 3], "b": np.arange(4), "c": "text"}
    got = hvd.broadcast_object(obj, root_rank=0)
    assert got["a"] == [1, 2, 3] and got["c"] == "text"
    np.testing.assert_array_equal(got["b"], np.arange(4))
    assert hvd.allgather_object(obj["a"]) == [[1, 2, 3]]
    assert hvd.broadcast_object(None) is None
    # Inside a tf.function it runs at trace time.
    seen = []

    @tf.function
    def f():
        seen.append(hvd.broadcast_object(5, 0))
        return tf.constant(0)
    f()
    assert seen == [5]


def test_public_names():
    for name in ("init", "shutdown", "allreduce", "grouped_allreduce", "allgather", "broadcast",
                 "alltoall", "reducescatter", "join", "barrier", "broadcast_variables",
                 "broadcast_object", "allgather_object", "Compression", "Average", "Sum",
                 "Adasum", "Min", "Max", "Product", "mpi_enabled", "gloo_enabled",
                 "nccl_built", "size_op", "rank_op", "local_size_op", "local_rank_op",
                 "broadcast_global_variables", "start_timeline", "stop_timeline",
                 "broadcast_", "broadcast_object_fn", "process_set_included_op",
                 "LocalGradientAggregationHelper", "LocalGradientAggregationHelperEager",
                 "handle_average_backwards_compatibility", "check_num_rank_power_of_2"):
        assert hasattr(hvd, name), name
    assert "allreduce" in dir(hvd)
    with pytest.raises(AttributeError):
        hvd.no_such_function


def test_tensorflow_state_tf1_session():
    """Horovod's TensorFlowState(variables, session): TF1 values go through the session."""
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        v = tf.compat.v1.get_variable("elastic_v", initializer=np.arange(3, dtype=np.float32))
        session.run(tf.compat.v1.global_variables_initializer())
        state = hvd.elastic.TensorFlowState(None, session, epoch=1)  # Horovod's positions
        assert state.variables == [v] and state.session is session
        v.load(np.array([7.0, 7.0, 7.0], np.float32), session)
        state.epoch = 5
        state.restore()
        assert session.run(v).tolist() == [0.0, 1.0, 2.0] and state.epoch == 1
        v.load(np.array([4.0, 5.0, 6.0], np.float32), session)
        state.commit()
        state.sync()
        v.load(np.zeros(3, np.float32), session)
        state.restore()
        assert session.run(v).tolist() == [4.0, 5.0, 6.0]
    eager = tf.Variable([1.0, 2.0])
    state = hvd.elastic.TensorFlowState([eager], batch=0)
    assert state.session is None
    eager.assign([9.0, 9.0])
    state.restore()
    assert eager.numpy().tolist() == [1.0, 2.0]
