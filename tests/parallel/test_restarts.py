"""tfhvdrun --max-restarts: a failed job is stopped and started again, whole, with a
fresh rendezvous, and says why each time; a script resumes from its own checkpoints.

* a Keras fit with BackupAndRestore whose rank 1 is SIGKILLed once in epoch 2 finishes
  every epoch after one restart, with the final weights of an uninterrupted run (bit for
  bit: deterministic data, seeds and ops);
* a job that keeps failing is restarted --max-restarts times, then the launcher gives up
  with the last failure's exit code.
"""

import json
import os
import re
import sys

import numpy as np

from jobrunner import clean_env, job_env, run, tfhvdrun_cmd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "restart_keras.py")
PY = sys.executable


def _events(result_dir, rank):
    with open(os.path.join(result_dir, "rank%d.events" % rank)) as f:
        return [json.loads(line) for line in f if line.strip()]


def _fit(tmp_path, name, launcher_args=(), worker_args=()):
    result_dir = tmp_path / name
    result_dir.mkdir()
    cmd = tfhvdrun_cmd(2, launcher_args=launcher_args) + [PY, WORKER, "--dir",
                                                          str(result_dir)] + list(worker_args)
    res = run(cmd, 300, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO,
              log_path=str(result_dir / "output.log"))
    assert not res.timed_out and not res.survivors, res.describe()
    return res, str(result_dir)


def test_keras_fit_killed_once_resumes_after_one_restart_with_the_same_weights(tmp_path):
    marker = tmp_path / "killed-once"
    res, restarted = _fit(tmp_path, "restarted", ["--max-restarts", 1],
                          ["--kill-once", str(marker)])
    assert res.returncode == 0, res.describe()
    lines = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    assert lines == [
        "tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); rank 0 stopped "
        "in consequence",
        "tfhvdrun: restarting every rank with a fresh rendezvous (restart 1 of 1) because "
        "rank 1 (on localhost) was killed by signal 9 (SIGKILL); rank 0 stopped in "
        "consequence"], res.describe()
    for rank in (0, 1):
        events = _events(restarted, rank)
        begun = [(e["restart"], e["epoch"]) for e in events if e["event"] == "epoch_begin"]
        # first run: epochs 0 and 1 (killed in 1); after the restart: from epoch 1 on
        assert begun == [(0, 0), (0, 1), (1, 1), (1, 2)], events
        ended = [(e["restart"], e["epoch"]) for e in events if e["event"] == "epoch_end"]
        assert ended == [(0, 0), (1, 1), (1, 2)], events
    res, plain = _fit(tmp_path, "uninterrupted")
    assert res.returncode == 0, res.describe()
    for rank in (0, 1):
        got = np.load(os.path.join(restarted, "weights.rank%d.npy" % rank))
        want = np.load(os.path.join(plain, "weights.rank%d.npy" % rank))
        assert np.array_equal(got, want), (rank, got, want)


def test_a_job_that_keeps_failing_is_restarted_then_given_up(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import os, sys\n"
                      "print('run', os.environ['TF_HVD_RESTART_COUNT'], flush=True)\n"
                      "sys.exit(5 if os.environ['HOROVOD_RANK'] == '1' else 0)\n")
    res = run(tfhvdrun_cmd(2, launcher_args=["--max-restarts", 2]) + [PY, str(script)], 60,
              env=clean_env(), cwd=REPO)
    assert res.returncode == 5, res.describe()
    runs = re.findall(r"^\[1\]<stdout>:run (\d)$", res.output, re.M)
    assert runs == ["0", "1", "2"], res.describe()
    lines = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    assert lines[1] == "tfhvdrun: restarting every rank with a fresh rendezvous (restart 1 " \
                       "of 2) because rank 1 (on localhost) exited with code 5", lines
    assert lines[-1] == "tfhvdrun: giving up: the job failed 3 time(s), more than " \
                        "--max-restarts 2 allows (last failure: rank 1 (on localhost) " \
                        "exited with code 5)", lines
    assert len(lines) == 6, lines
