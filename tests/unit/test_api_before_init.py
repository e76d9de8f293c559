"""The API before hvd.init() and after hvd.shutdown() (fresh processes: init is process-wide)."""

from jobrunner import run_python


def _run(*pieces, timeout=180):
    return run_python(*pieces, timeout=timeout)


_CHECK_ALL = """
    import tensorflow as tf
    def expect_not_initialized(what, fn):
        try:
            fn()
        except ValueError as e:
            assert "hvd.init()" in str(e), (what, str(e))
            assert "not been initialized" in str(e), (what, str(e))
        else:
            raise AssertionError(what + ": no ValueError")
        checked.append(what)
    checked = []
    x = tf.constant([1.0, 2.0])
    v = tf.Variable([1.0])
    calls = {
        "size": hvd.size, "rank": hvd.rank, "local_size": hvd.local_size,
        "local_rank": hvd.local_rank, "cross_size": hvd.cross_size,
        "cross_rank": hvd.cross_rank, "is_homogeneous": hvd.is_homogeneous,
        "allreduce": lambda: hvd.allreduce(x),
        "allreduce IndexedSlices": lambda: hvd.allreduce(tf.IndexedSlices(x, tf.constant([0, 1]))),
        "grouped_allreduce": lambda: hvd.grouped_allreduce([x, x]),
        "allgather": lambda: hvd.allgather(x),
        "broadcast": lambda: hvd.broadcast(x, 0),
        "alltoall": lambda: hvd.alltoall(x),
        "reducescatter": lambda: hvd.reducescatter(x),
        "join": hvd.join, "barrier": hvd.barrier,
        "size_op": hvd.size_op, "rank_op": hvd.rank_op,
        "local_size_op": hvd.local_size_op, "local_rank_op": hvd.local_rank_op,
        "broadcast_variables": lambda: hvd.broadcast_variables([v], 0),
        "broadcast_object": lambda: hvd.broadcast_object({"a": 1}, 0),
        "allgather_object": lambda: hvd.allgather_object(1),
        "allreduce in tf.function": lambda: tf.function(lambda: hvd.allreduce(x))(),
    }
    for what, fn in calls.items():
        expect_not_initialized(what, fn)
    assert not hvd.is_initialized()
"""


def test_collectives_before_init_raise_value_error():
    out = _run("""
        import tf_hvd as hvd
    """, _CHECK_ALL, """
        print("CHECKED", len(checked))
    """)
    assert "CHECKED 24" in out, out[-3000:]


def test_collectives_after_shutdown_raise_value_error():
    out = _run("""
        import tf_hvd as hvd
        hvd.init()
        assert hvd.is_initialized()
        assert hvd.size() == 1
        hvd.shutdown()
    """, _CHECK_ALL, """
        print("CHECKED", len(checked))
    """)
    assert "CHECKED 24" in out, out[-3000:]


def test_broadcast_global_variables_before_init_as_horovod():
    """Eagerly: RuntimeError before any initialization check. In a TF1 graph: the
    op is built without init; it runs once init has happened."""
    out = _run("""
        import numpy as np
        import tensorflow as tf
        import tf_hvd as hvd
        try:
            hvd.broadcast_global_variables(0)
            raise AssertionError("eager broadcast_global_variables did not raise")
        except RuntimeError as e:
            assert "does not support eager execution" in str(e), str(e)
        graph = tf.Graph()
        with graph.as_default():
            v = tf.compat.v1.get_variable("v", initializer=np.arange(3, dtype=np.float32))
            op = hvd.broadcast_global_variables(0)
            assert isinstance(op, tf.Operation), op
            assert not hvd.is_initialized()
            hvd.init()
            with tf.compat.v1.Session(graph=graph) as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(op)
                print("VALUES", session.run(v).tolist())
    """)
    assert "VALUES [0.0, 1.0, 2.0]" in out, out[-3000:]


def test_import_is_lazy_and_init_without_launcher_is_size_one():
    out = _run("""
        import sys
        import tf_hvd
        assert "tensorflow" not in sys.modules, "import tf_hvd imported tensorflow"
        import tf_hvd as hvd
        hvd.init()
        assert "tensorflow" in sys.modules
        print("SIZE", hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank())
        print("FLAGS", hvd.mpi_enabled(), hvd.gloo_enabled())
    """)
    assert "SIZE 1 0 1 0" in out, out[-3000:]
    assert "FLAGS False False" in out, out[-3000:]


def test_malformed_shared_memory_knobs_fail_init_naming_them():
    out = _run("""
        import os
        import tf_hvd as hvd
        for name, value, says in (("HOROVOD_SHM_SLOT_BYTES", "100", "from 4096 to"),
                                  ("HOROVOD_SHM_MIN_BYTES", "lots", "non-negative number"),
                                  ("HOROVOD_SHM_ALLREDUCE", "-1", "one of 1, 0, true, false, yes, no")):
            os.environ[name] = value
            try:
                hvd.init()
                raise AssertionError("init accepted %s=%s" % (name, value))
            except RuntimeError as e:
                assert "%s='%s' is not a valid value" % (name, value) in str(e), str(e)
                assert says in str(e), str(e)
            del os.environ[name]
            print("REJECTED", name)
        hvd.init()
        print("SIZE", hvd.size())
    """)
    assert out.count("REJECTED") == 3, out[-3000:]
    assert "SIZE 1" in out, out[-3000:]
