"""tf_hvd.data (horovod.tensorflow.data): a 2-rank compute job runs the tf.data service
(python -m tf_hvd.data.compute_worker; one dispatcher with two workers, or two
dispatchers with one worker each), a 2-rank training job beside it reads the config
file, takes its data from the service and trains; rank 0 of the training job then shuts
the service down and the compute job ends by itself."""

import json
import os

import pytest

from jobrunner import PYTHON, Job, base_env, run, tfhvdrun_cmd

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")
N = 32        # dataset elements (ids 0..N-1); the training script batches by 8
TIMEOUT_S = 150


def _results(output):
    found = [json.loads(line.split("RESULT ", 1)[1])
             for line in output.splitlines() if "RESULT " in line]
    return {r["rank"]: r for r in found}


@pytest.mark.parametrize("dispatchers", [1, 2])
def test_training_job_reads_from_the_compute_jobs_data_service(tmp_path, dispatchers):
    configfile = str(tmp_path / "compute.json")
    compute_cmd = tfhvdrun_cmd(2) + [PYTHON, "-m", "tf_hvd.data.compute_worker", configfile,
                                     "--dispatchers", str(dispatchers),
                                     "--dispatcher-side", "compute", "--timeout", "60"]
    train_cmd = tfhvdrun_cmd(2) + [PYTHON, os.path.join(WORKERS, "data_service_train.py"),
                                   configfile, str(N)]
    with Job(compute_cmd, env=base_env()) as compute:
        train = run(train_cmd, timeout=TIMEOUT_S, env=base_env())
        served = compute.wait(timeout=30 if train.ok else 0)
    assert train.ok, train.describe()
    assert served.ok, served.describe()  # shut down by the training job, not killed
    assert "rank=0 size=2 dispatchers=%d" % dispatchers in served.output

    # The config file is Horovod's JSON: the 2 compute ranks are the dispatchers' workers.
    with open(configfile) as f:
        config = json.load(f)
    assert (config["dispatchers"], config["workers_per_dispatcher"],
            config["dispatcher_side"], config["timeout"]) == (
                dispatchers, 2 // dispatchers, "compute", 60)
    assert len(bytes.fromhex(config["key"])) == 32

    results = _results(train.output)
    assert sorted(results) == [0, 1], train.describe()
    addresses = [results[rank]["dispatcher"] for rank in (0, 1)]
    assert all(a.startswith("grpc://") for a in addresses), addresses
    if dispatchers == 1:
        # Both ranks use the one dispatcher; reuse_dataset=True, distributed_epoch: they
        # share one job and get every element exactly once between them.
        assert addresses[0] == addresses[1]
        shared = results[0]["shared_ids"] + results[1]["shared_ids"]
        assert sorted(shared) == list(range(N))
    else:
        # Rank r uses dispatcher r: a job of its own there, so the whole dataset.
        assert addresses[0] != addresses[1]
        for rank in (0, 1):
            assert sorted(results[rank]["shared_ids"]) == list(range(N))
    for rank in (0, 1):
        r = results[rank]
        # A job per rank: each rank got the whole dataset once, in N/8 local batches.
        assert sorted(r["train_ids"]) == list(range(N))
        assert r["steps"] == N // 8
        assert r["weights"] != r["initial"]  # training changed the model
    # Same start (broadcast) and averaged gradients: the same weights on both ranks.
    assert results[0]["initial"] == results[1]["initial"]
    assert results[0]["weights"] == results[1]["weights"]
