"""hvd.init() and TensorFlow's thread pools (when ranks share a host) and CPU
allocator (tf_hvd/tf_threads.py).

Each case runs in a fresh process: the settings only apply before TensorFlow's
runtime starts, once per process."""

from jobrunner import run_python


def _run(*pieces, env_extra=None, timeout=180):
    # hvd.init() in the test process itself (other test files) sets
    # TF_CPU_ALLOCATOR_USE_BFC: each case starts from TensorFlow's defaults.
    return run_python(*pieces, timeout=timeout, env=env_extra,
                      drop=("TF_CPU_ALLOCATOR_USE_BFC",))


def test_two_local_ranks_split_cores_and_stop_spinning():
    out = _run("""
        import os
        import tensorflow as tf
        from tensorflow.python.eager import context
        from tf_hvd import tf_threads
        got = tf_threads.configure(local_size=2)
        cores = len(os.sched_getaffinity(0))
        assert got["configured"], got
        assert got["intra_op_threads"] == max(1, cores // 2), (got, cores)
        assert got["inter_op_threads"] == max(2, cores // 2), (got, cores)
        settings = tf_threads.tf_thread_settings()
        assert {k: v for k, v in settings.items() if k != "binding"} == got, settings
        if "cpus" in got:  # bound, and the background thread may release it
            assert settings["binding"] == {"active": True, "bound": True, "releases": 0,
                                           "cpus": got["cpus"]}, settings
        # The runtime starts with these settings.
        assert float(tf.reduce_sum(tf.ones([4]))) == 4.0
        assert tf.config.threading.get_intra_op_parallelism_threads() == got["intra_op_threads"]
        assert tf.config.threading.get_inter_op_parallelism_threads() == got["inter_op_threads"]
        assert context.context().config.experimental.disable_thread_spinning
        # The caching allocator is in use: only it keeps statistics.
        assert got["caching_allocator"] is True, got
        assert tf.config.experimental.get_memory_info("CPU:0")["peak"] >= 16
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


def test_each_local_rank_is_bound_to_its_own_slice_of_the_cpus():
    out = _run("""
        import os, threading
        from tf_hvd import tf_threads
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            print("SKIP one CPU")
            raise SystemExit(0)
        # The background thread stands in for one that exists before init.
        ready, stop = threading.Event(), threading.Event()
        def early():
            ready.set()
            stop.wait()
        t = threading.Thread(target=early)
        t.start()
        ready.wait()
        got = tf_threads.configure(local_size=2, local_rank=1)
        half = len(cpus) // 2
        assert got["cpus"] == cpus[half:2 * half], (got, cpus)
        assert sorted(os.sched_getaffinity(t.native_id)) == got["cpus"]
        assert sorted(os.sched_getaffinity(0)) == got["cpus"]
        # A second configure before the runtime starts (hvd.init() twice) splits
        # the same CPUs: those of the process before binding.
        again = tf_threads.configure(local_size=2, local_rank=1)
        assert again["cores"] == len(cpus) and again["cpus"] == got["cpus"], (again, cpus)
        later = []
        t2 = threading.Thread(target=lambda: later.append(sorted(os.sched_getaffinity(0))))
        t2.start(); t2.join()
        assert later == [got["cpus"]], later
        stop.set(); t.join()
        # An elastic re-init (the runtime runs now) binds again, from all the CPUs.
        import tensorflow as tf
        assert float(tf.reduce_sum(tf.ones([2]))) == 2.0
        got = tf_threads.configure(local_size=2, local_rank=0)
        assert not got["configured"] and got["cpus"] == cpus[:half], (got, cpus)
        got = tf_threads.configure(local_size=1, local_rank=0)
        assert got["cpus"] == cpus and sorted(os.sched_getaffinity(0)) == cpus, got
        print("OK")
    """)
    assert "OK" in out or "SKIP" in out, out[-3000:]


def test_binding_is_skipped_when_turned_off_pinned_or_short_of_cpus():
    for env, reason in (({"HOROVOD_CPU_BIND": "0"}, "HOROVOD_CPU_BIND=0"),
                        ({"HOROVOD_THREAD_AFFINITY": "0"},
                         "HOROVOD_THREAD_AFFINITY pins the background thread")):
        out = _run("""
            import os
            from tf_hvd import tf_threads
            before = os.sched_getaffinity(0)
            got = tf_threads.configure(local_size=2, local_rank=1)
            assert got["configured"] and got["not_bound"] == %r, got
            assert "cpus" not in got and os.sched_getaffinity(0) == before
            print("OK")
        """ % reason, env_extra=env)
        assert "OK" in out, (env, out[-3000:])
    out = _run("""
        import os
        from tf_hvd import tf_threads
        n = len(os.sched_getaffinity(0))
        got = tf_threads.configure(local_size=n + 1, local_rank=n)
        assert got["not_bound"] == "%d CPU(s) for %d local ranks" % (n, n + 1), got
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


def test_thread_counts_chosen_by_the_script_are_kept():
    out = _run("""
        import tensorflow as tf
        from tf_hvd import tf_threads
        tf.config.threading.set_intra_op_parallelism_threads(3)
        got = tf_threads.configure(local_size=4)
        assert got["configured"] and got["intra_op_threads"] == 3, got
        assert tf.config.threading.get_intra_op_parallelism_threads() == 3
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


def test_nothing_changes_for_one_rank_a_started_runtime_or_the_knob_off():
    out = _run("""
        import os
        import tensorflow as tf
        from tensorflow.python.eager import context
        from tf_hvd import tf_threads
        got = tf_threads.configure(local_size=1)
        assert not got["configured"] and got["reason"] == "one rank on this host", got
        os.environ["HOROVOD_TF_THREADS"] = "0"
        got = tf_threads.configure(local_size=2)
        assert not got["configured"] and got["reason"] == "HOROVOD_TF_THREADS=0", got
        del os.environ["HOROVOD_TF_THREADS"]
        assert float(tf.reduce_sum(tf.ones([2]))) == 2.0  # the runtime starts
        got = tf_threads.configure(local_size=2)
        assert not got["configured"] and "already started" in got["reason"], got
        assert not context.context().config.experimental.disable_thread_spinning
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


# tf_hvd selects TensorFlow's caching allocator through TensorFlow's own switch,
# TF_CPU_ALLOCATOR_USE_BFC, read when the runtime starts. What TensorFlow's default
# allocator reports through get_memory_info differs between machines (ValueError on some,
# zeros or a peak on others), so these cases check the switch tf_hvd leaves behind.
def test_a_runtime_started_before_init_keeps_the_default_allocator():
    out = _run("""
        import os
        import tensorflow as tf
        from tf_hvd import tf_threads
        tf.ones([8])  # the runtime starts with TensorFlow's default allocator
        got = tf_threads.configure(local_size=2)
        assert not got["configured"] and got["caching_allocator"] is False, got
        assert "TF_CPU_ALLOCATOR_USE_BFC" not in os.environ, os.environ["TF_CPU_ALLOCATOR_USE_BFC"]
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


def test_the_allocator_chosen_in_the_environment_is_kept():
    out = _run("""
        import os
        import tensorflow as tf
        from tf_hvd import tf_threads
        got = tf_threads.configure(local_size=2)
        assert got["configured"] and got["caching_allocator"] is False, got
        assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == "false", os.environ["TF_CPU_ALLOCATOR_USE_BFC"]
        print("OK")
    """, env_extra={"TF_CPU_ALLOCATOR_USE_BFC": "false"})
    assert "OK" in out, out[-3000:]


def test_a_fresh_runtime_gets_the_caching_allocator_switch():
    out = _run("""
        import os
        from tf_hvd import tf_threads
        got = tf_threads.configure(local_size=1)
        assert got["caching_allocator"] is True, got
        assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
        print("OK")
    """)
    assert "OK" in out, out[-3000:]


def test_malformed_knob_fails_init_naming_it():
    out = _run("""
        import tf_hvd as hvd
        try:
            hvd.init()
            raise AssertionError("init accepted HOROVOD_TF_THREADS=many")
        except RuntimeError as e:
            assert "HOROVOD_TF_THREADS='many' is not a valid value" in str(e), str(e)
        assert not hvd.is_initialized()
        print("OK")
    """, env_extra={"HOROVOD_TF_THREADS": "many"})
    assert "OK" in out, out[-3000:]
