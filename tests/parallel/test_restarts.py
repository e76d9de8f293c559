"""tfhvdrun --max-restarts: a failed job is stopped and started again, whole, with a
fresh rendezvous, and says why each time (a job killed again and again that resumes from
its checkpoints each time: test_checkpoint_chaos.py).

* a job that keeps failing is restarted --max-restarts times, then the launcher gives up
  with the last failure's exit code.
"""

import os
import re
import sys

from jobrunner import clean_env, run, tfhvdrun_cmd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


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
    assert re.match(r"tfhvdrun: restarting every rank with a fresh rendezvous \(restart 1 "
                    r"of 2\) because rank 1 \(on localhost, pid \d+\) exited with code 5$",
                    lines[1]), lines
    assert re.match(r"tfhvdrun: giving up: the job failed 3 time\(s\), more than "
                    r"--max-restarts 2 allows \(last failure: rank 1 \(on localhost, pid \d+\) "
                    r"exited with code 5\)$", lines[-1]), lines
    assert len(lines) == 6, lines
