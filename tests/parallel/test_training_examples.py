"""The three examples of python/examples converge on 2 ranks.

With their default settings (15 epochs) they reach the accuracies stated in
the README (at least 0.95); here each trains for fewer epochs and must clear
a lower, still real, bar. Only rank 0 prints and writes checkpoints.

TensorFlow's multi-worker Keras tutorial on tf_hvd (python/examples/mwms_tutorial/)
runs as the tutorial runs it: two plain processes, each with its own TF_CONFIG and
no launcher; then under tfhvdrun, and alone.
"""

import contextlib
import json
import os
import re
import secrets
import socket

import pytest

from jobrunner import Job
from training_launch import PYTHON, REPO, base_env, run

EXAMPLES = os.path.join(REPO, "python", "examples")

CASES = [
    # example, transport, epochs, minimum test accuracy
    ("keras_digits.py", "gloo", 6, 0.90),
    ("tf2_digits.py", "gloo", 6, 0.90),
    ("tf1_digits.py", "mpi", 6, 0.90),
]


@pytest.mark.parametrize("example,transport,epochs,bar", CASES,
                         ids=[c[0][:-3] for c in CASES])
def test_example_converges(example, transport, epochs, bar, tmp_path):
    ckpt = tmp_path / "checkpoints"
    rc, out = run(2, transport, os.path.join(EXAMPLES, example),
                  ["--epochs", epochs, "--checkpoint-dir", ckpt], timeout=270,
                  hide_optional=False)  # the digits data come from scikit-learn
    assert rc == 0, out[-8000:]
    found = re.findall(r"\[(\d+)\]<stdout>:test accuracy: ([0-9.]+)", out)
    assert [r for r, _ in found] == ["0"], (
        "expected exactly one 'test accuracy' line, from rank 0:\n" + out[-8000:])
    accuracy = float(found[0][1])
    assert accuracy >= bar, "test accuracy %.4f < %.2f\n%s" % (accuracy, bar, out[-4000:])
    assert ckpt.is_dir() and any(ckpt.iterdir()), "rank 0 wrote no checkpoint"


# -- TensorFlow's multi-worker Keras tutorial (python/examples/mwms_tutorial) ----------------

MWMS_MAIN = os.path.join(EXAMPLES, "mwms_tutorial", "main.py")
# 3 epochs as in the tutorial, fewer steps: its 70 reach about 0.96 test accuracy on the
# digits at np=1 and np=2; 40 steps of 64 images per worker reached 0.89 (np=1) and 0.93
# (np=2), the loss falling from about 2.0 and 1.6 to 0.45 and 0.25.
MWMS_ARGS = ["--epochs", "3", "--steps-per-epoch", "40"]
MWMS_ACCURACY_FLOOR = 0.80
MWMS_TIMEOUT = 150
# The line every rank of main.py ends with.
MWMS_LINE = re.compile(r"^rank (\d+) of (\d+): loss ([0-9.]+) -> ([0-9.]+), "
                       r"test accuracy ([0-9.]+), weights sha256 ([0-9a-f]{64})$", re.M)
# Variables of other engines that hvd.init() would also read: none may reach the workers.
OTHER_ENGINES = ("SLURM_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TF_CONFIG", "CLUSTER_SPEC", "OMPI_", "PMI_")


def _free_ports(n):
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(contextlib.closing(socket.socket())) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _mwms_env(extra=None):
    env = base_env(extra, hide_optional=False)  # the digits come from scikit-learn
    for name in [n for n in env if n.startswith(OTHER_ENGINES) and n not in (extra or {})]:
        del env[name]
    return env


def _mwms_result(output, what):
    """(rank, size, first loss, last loss, accuracy, checksum) of main.py's last line."""
    found = MWMS_LINE.findall(output)
    assert len(found) == 1, "%s: expected one result line, got %d:\n%s" % (
        what, len(found), output[-6000:])
    rank, size, first, last, accuracy, checksum = found[0]
    return int(rank), int(size), float(first), float(last), float(accuracy), checksum


def _check_learned(what, first, last, accuracy):
    assert last < 0.5 * first, "%s: the loss went from %.4f to %.4f" % (what, first, last)
    assert accuracy >= MWMS_ACCURACY_FLOOR, "%s: test accuracy %.4f < %.2f" % (
        what, accuracy, MWMS_ACCURACY_FLOOR)


def test_mwms_tutorial_tf_config_workers_and_one_process(tmp_path):
    """Two workers started the tutorial's way (a TF_CONFIG each, a shared secret, no
    launcher) form one job of 2: ranks 0 and 1, the same final weights, a falling loss and
    a test accuracy above the floor, only the chief writing. Then one process alone
    (no TF_CONFIG) reaches the same scale of accuracy."""
    ports = _free_ports(2)
    cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
    secret = secrets.token_hex(32)
    model_dir = tmp_path / "model"
    with contextlib.ExitStack() as stack:
        jobs = []
        for index in range(2):
            env = _mwms_env({
                "TF_CONFIG": json.dumps({"cluster": cluster,
                                         "task": {"type": "worker", "index": index}}),
                "HOROVOD_GLOO_RENDEZVOUS_SECRET": secret,
                "HOROVOD_START_TIMEOUT": "60",
            })
            jobs.append(stack.enter_context(Job(
                [PYTHON, MWMS_MAIN, "--model-dir", model_dir] + MWMS_ARGS, env=env)))
        results = [job.wait(MWMS_TIMEOUT) for job in jobs]
    workers = []
    for index, res in enumerate(results):
        what = "worker %d (TF_CONFIG)" % index
        assert res.ok, what + "\n" + res.describe()
        rank, size, first, last, accuracy, checksum = _mwms_result(res.output, what)
        assert (rank, size) == (index, 2), "%s reported rank %d of %d" % (what, rank, size)
        _check_learned(what, first, last, accuracy)
        workers.append((accuracy, checksum))
    assert workers[0][1] == workers[1][1], "the ranks' final weights differ: %r" % workers
    assert workers[0][0] == workers[1][0], "the ranks' test accuracies differ: %r" % workers
    assert sorted(os.listdir(model_dir)) == ["checkpoint.keras", "model.keras"]

    alone = Job([PYTHON, MWMS_MAIN, "--model-dir", tmp_path / "alone"] + MWMS_ARGS,
                env=_mwms_env())
    with alone:
        res = alone.wait(MWMS_TIMEOUT)
    assert res.ok, "one process\n" + res.describe()
    rank, size, first, last, accuracy, _ = _mwms_result(res.output, "one process")
    assert (rank, size) == (0, 1)
    _check_learned("one process", first, last, accuracy)
    assert abs(accuracy - workers[0][0]) <= 0.10, (
        "one process reached test accuracy %.4f, two workers %.4f" % (accuracy, workers[0][0]))


def test_mwms_tutorial_under_tfhvdrun(tmp_path):
    """The same script under tfhvdrun -np 2: one job of 2, equal weights, learning."""
    rc, out = run(2, "gloo", MWMS_MAIN, ["--model-dir", tmp_path / "model"] + MWMS_ARGS,
                  timeout=MWMS_TIMEOUT, hide_optional=False)
    assert rc == 0, out[-8000:]
    found = re.findall(r"\[(\d+)\]<stdout>:(rank \d+ of \d+: .*)", out)
    assert sorted(r for r, _ in found) == ["0", "1"], out[-8000:]
    checksums = set()
    for launcher_rank, line in found:
        rank, size, first, last, accuracy, checksum = _mwms_result(line, "rank " + launcher_rank)
        assert (rank, size) == (int(launcher_rank), 2)
        _check_learned("rank %d under tfhvdrun" % rank, first, last, accuracy)
        checksums.add(checksum)
    assert len(checksums) == 1, "the ranks' final weights differ:\n" + out[-4000:]
