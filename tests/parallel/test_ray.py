"""tf_hvd.ray on a local Ray instance (ray.init in this process, 4 logical CPUs): one
RayExecutor of 2 ranks shared by the module, with an ``executable_cls``.

Exact collectives on every rank; the semantics of run / run_remote / execute /
execute_single; a worker's exception surfacing with its type and rank; a dead worker
named; the argument checks and the placement timeout. The multi-node runs (Keras fit,
ElasticRayExecutor) are in test_ray_cluster.py.
"""

import json
import os
import re
import sys
import time

import pytest

ray = pytest.importorskip("ray")

HERE = os.path.dirname(os.path.abspath(__file__))
FNS_DIR = os.path.join(HERE, "ray_workers")
sys.path.insert(0, FNS_DIR)

import ray_fns  # noqa: E402

from tf_hvd.exceptions import HorovodInternalError  # noqa: E402
from tf_hvd.ray import RayExecutor  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def local_ray():
    # The actors import ray_fns by name: Ray's workers inherit this environment.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([FNS_DIR, HERE] + ([old] if old else []))
    for name in [k for k in os.environ if k.startswith("HOROVOD_")]:
        del os.environ[name]  # an enclosing job's variables must not reach the actors
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def executor(local_ray):
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=120), num_workers=2,
                     cpus_per_worker=1)
    ex.start(executable_cls=ray_fns.Counter, executable_args=[100],
             executable_kwargs={"step": 5}, extra_env_vars={"RAY_TEST_EXTRA": "x y"})
    try:
        yield ex
    finally:
        ex.shutdown()


def test_collectives_exact_on_every_rank(executor):
    results = executor.run(ray_fns.collective_values, args=[2.5])
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert (r["size"], r["local_size"], r["cross_rank"], r["cross_size"]) == (2, 2, 0, 1)
        assert r["local_rank"] == r["rank"]
        assert r["sum"] == [3.0, 5.0, 2.0 ** -20]
        assert r["average"] == [0.5, 5.0]
        assert r["allgather"] == [0, 1, 1]
        assert r["broadcast"] == [8]
        assert r["secret_len"] == 64 and not r["secret_in_cmdline"]
        assert r["extra"] == "x y"


def test_run_and_run_remote(executor):
    assert executor.run(ray_fns.my_rank_plus, args=[10], kwargs={"scale": 3}) == [30, 33]
    refs = executor.run_remote(ray_fns.my_rank_plus, kwargs={"offset": 1})
    assert len(refs) == 2 and all(isinstance(r, ray.ObjectRef) for r in refs)
    assert ray.get(refs) == [1, 2]


def test_execute_keeps_the_executable_and_execute_single_runs_on_rank_zero(executor):
    first = executor.execute(ray_fns.bump)
    assert executor.execute_single(ray_fns.bump) == first[0] + 5
    # rank 0 was bumped twice, rank 1 once; both started at 100 + rank
    assert executor.execute(ray_fns.bump) == [first[0] + 10, first[1] + 5]
    assert first[1] - first[0] == 1 and (first[0] - 105) % 5 == 0


def test_worker_exception_names_the_rank_and_keeps_its_type(executor):
    with pytest.raises(ValueError) as info:
        executor.run(ray_fns.fail_on_rank_one, args=["bad shard 7"])
    message = str(info.value)
    assert message == "rank 1 (on %s, pid %d) raised ValueError: bad shard 7" \
        % (executor.hosts[1], executor.pids[1]), message
    # the executor stays usable after a function failed
    assert executor.run(ray_fns.my_rank_plus, args=[0]) == [0, 1]


def test_dead_worker_is_named(local_ray):
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
    ex.start()
    try:
        assert ex.execute(ray_fns.executable_is) == [True, True]
        with pytest.raises(HorovodInternalError,
                           match=r"^rank 1 \(on [0-9.]+, pid %d\) lost its Ray worker "
                                 r"process" % ex.pids[1]):
            ex.run(ray_fns.die_on_rank_one)
    finally:
        ex.shutdown()
    assert ex.workers == []


@pytest.mark.parametrize("how", ["raise", "kill", "freeze"])
def test_the_root_cause_is_named_first_with_host_and_pid(local_ray, how):
    """As tfhvdrun names them (rank_faults.py), from the failed calls and the cores' fault
    records; the frozen rank's actor is killed. Ray tells no signal: a killed rank's
    worker process is named lost."""
    from rank_faults import FIRST_LINES, fail_rank_one
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
    ex.start(extra_env_vars={"HOROVOD_PEER_TIMEOUT_SECONDS": "4"})
    lines = dict(FIRST_LINES, kill=r"lost its Ray worker process \(.*\)")
    try:
        with pytest.raises(KeyError if how == "raise" else HorovodInternalError) as raised:
            ex.run(fail_rank_one, args=[how])
        first = str(raised.value.args[0]).splitlines()[0]
        assert re.match(r"^rank 1 \(on %s, pid %d\) %s; rank 0 stopped in consequence$"
                        % (re.escape(ex.hosts[1]) if how != "freeze" else r"\S+", ex.pids[1],
                           lines[how]), first), first
        print(type(raised.value).__name__, first)  # the closing note quotes it (pytest -s)
    finally:
        ex.shutdown()


def test_placement_timeout_says_what_was_asked(local_ray):
    ex = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=2),
                     num_hosts=2, num_workers_per_host=1, cpus_per_worker=1)
    with pytest.raises(TimeoutError, match=r"could not reserve 2 bundle\(s\) of "
                                           r"\{'CPU': 1\} \(STRICT_SPREAD\) within 2 s"):
        ex.start()
    assert ex.workers == []


def test_ray_train_trainer_runs_a_tf_hvd_job(local_ray, tmp_path):
    pytest.importorskip("pandas", reason="Ray Train needs ray[train] (pandas, pyarrow)")
    from ray.train import RunConfig, ScalingConfig
    from tf_hvd.ray.train import TfHvdConfig, TfHvdTrainer
    trainer = TfHvdTrainer(
        ray_fns.train_loop_reporting_collectives,
        train_loop_config={"x": 0.25, "out": str(tmp_path / "rank")},
        tf_hvd_config=TfHvdConfig(env_vars={"HOROVOD_CYCLE_TIME": "2"}),
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1}),
        run_config=RunConfig(name="tf_hvd_train", storage_path=str(tmp_path)))
    t0 = time.monotonic()
    result = trainer.fit()
    sys.stderr.write("Ray Train fit: %.1f s\n" % (time.monotonic() - t0))
    assert result.error is None
    for rank in (0, 1):
        with open(str(tmp_path / ("rank-%d.json" % rank))) as f:
            metrics = json.load(f)
        assert metrics["sum"] == [3.0, 0.5]
        assert metrics["size"] == metrics["world_size"] == 2
        # tf_hvd's rank and local rank are Ray Train's world and local ranks
        assert [tuple(r) for r in metrics["ranks"]] == [(0, 0, 0, 0), (1, 1, 1, 1)]


def test_argument_checks():
    settings = RayExecutor.create_settings()
    with pytest.raises(ValueError, match="either num_workers, or num_hosts"):
        RayExecutor(settings, num_workers=2, num_hosts=1)
    with pytest.raises(ValueError, match="either num_workers, or num_hosts"):
        RayExecutor(settings)
    with pytest.raises(ValueError, match="gpus_per_worker is set but use_gpu is False"):
        RayExecutor(settings, num_workers=1, gpus_per_worker=1)
    with pytest.raises(ValueError, match="max_np"):
        RayExecutor.create_settings(min_np=3, max_np=2)
    with pytest.raises(RuntimeError, match="not started: call start"):
        RayExecutor(settings, num_workers=1).run(ray_fns.my_rank_plus, args=[0])
