"""An elastic job never loses its committed state (issue 37), with a Horovod elastic test
program (fault_workers/horovod_elastic_epochs.py: the interface and epoch records of
Horovod's elastic_tensorflow2_main.py) and discovery scripts written as Horovod's
elastic tests write them (the hosts depend on how many epochs rank 0 has recorded), on
two namespace hosts (tools/clusters/netns_cluster.py; one cluster for the module, skipped with the
reason unless this runs as root with ip and sshd). The launcher runs on h1:

    tfhvdrun -np 2 --min-np 2 --max-np 4 --host-discovery-script ./discover.sh python ...

Newcomers (ranks 2 and 3, started on h2) sleep before importing TensorFlow, longer than
an epoch takes, as a newcomer on a real cluster does.

(a) hosts added then removed (Horovod's test_hosts_added_and_removed): epoch 0 on h1:2,
    epoch 1 on h1:2 + h2:2, then h2:2 only: the running ranks wait at their next commit
    for the newcomers, so the epochs are [(start_rank 0, size 2), (0, 4), (2, 2)];
(b) h1 removed in the same update that adds h2 (newcomers still starting): h1's ranks
    stay until the newcomers have the state, then leave at a commit;
(c) every holder killed (SIGKILL, by the discovery script, once the newcomers were
    started): the job fails saying the committed state was lost and at which commit;
    the newcomers never train from nothing;
(d) bad discovery output: a host with no reachable slots, a host flapping in and out,
    garbage lines: the job goes on at size 2 on h1 with its state, saying what it
    ignored.

Commits never go backwards across each job.
"""

import json
import os
import re
import time

from jobrunner import PYTHON, REPO, job_env, run

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "fault_workers", "horovod_elastic_epochs.py")
FLAGS = ["-np", "2", "--min-np", "2", "--max-np", "4"]
SLOW = ["--slow-start-from", "2", "--slow-start", "6"]  # longer than an epoch (2 s)

# Horovod's discovery script template: $epoch is the number of epochs rank 0 recorded.
PROLOGUE = """#!/bin/sh
D=%s
LOG=$D/log.jsonl
epoch=0
[ -f $LOG ] && epoch=$(wc -l < $LOG | tr -d ' ')
"""


def _job(cluster, tmp_path, script, worker_args=(), timeout=150):
    """(result, epoch records, launcher lines)."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    discover = tmp_path / "discover.sh"
    discover.write_text(PROLOGUE % job_dir + script + "\nexit 0\n")
    discover.chmod(0o755)
    cmd = cluster.exec_argv("h1", [PYTHON, "-m", "tf_hvd.runner"] + FLAGS + [
        "--host-discovery-script", str(discover), PYTHON, WORKER,
        "--logfile", str(job_dir / "log.jsonl"), "--pid-dir", str(job_dir),
        "--epochs", "3", "--batches-per-epoch", "3", "--epoch-wait", "2"] +
        list(worker_args))
    started = time.monotonic()
    res = run(cmd, timeout, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO,
              log_path=str(tmp_path / "output.log"))
    assert not res.timed_out and not res.survivors, res.describe(text=res.output[-6000:])
    log = job_dir / "log.jsonl"
    records = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    launcher = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    print("%.1f s" % (time.monotonic() - started))
    print("\n".join(launcher))  # the report quotes them (pytest -s)
    print("\n".join(json.dumps(r, sort_keys=True) for r in records))
    return res, records, launcher


def _shape(records):
    return [(r["epoch"], r["start_rank"], r["size"], r["hostname"]) for r in records]


def _commits_go_forward(records):
    commits = [r["commits"] for r in records]
    assert commits == sorted(set(commits)), records
    # every epoch is 3 batch commits and one at its end: none was lost or repeated
    assert commits == [4 * r["epoch"] + 3 for r in records], records


STARTED = ("tfhvdrun: host discovery: 2 slot(s) on h2; started rank(s) 2, 3, which the "
           "running ranks wait for at their next commit (at most 600 s, --elastic-timeout) "
           "to hand them the committed state")


def test_a_hosts_added_then_removed_with_slow_newcomers(cluster, tmp_path):
    script = ('if [ "$epoch" = 0 ]; then echo h1:2\n'
              'elif [ "$epoch" = 1 ]; then echo h1:2; echo h2:2\n'
              'else echo h2:2; fi')
    res, records, launcher = _job(cluster, tmp_path, script, SLOW)
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    assert launcher == [
        STARTED,
        "tfhvdrun: host discovery: h1 is no longer listed; rank(s) 0, 1 on it leave at the "
        "next commit (the others re-form without them)"], launcher
    assert _shape(records) == [(0, 0, 2, "h1"), (1, 0, 4, "h1"), (2, 2, 2, "h2")], records
    assert [r["rendezvous"] for r in records] == [1, 2, 3], records
    _commits_go_forward(records)


def test_b_hosts_removed_while_newcomers_still_start(cluster, tmp_path):
    script = 'if [ "$epoch" = 0 ]; then echo h1:2; else echo h2:2; fi'
    res, records, launcher = _job(cluster, tmp_path, script, SLOW)
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    assert launcher[:2] == [
        STARTED,
        "tfhvdrun: host discovery: h1 is no longer listed, but its rank(s) 0, 1 hold the "
        "job's committed state (commit %d), which rank(s) 2, 3 have not received yet: they "
        "stay until it has (at most 600 s, --elastic-timeout)" % records[0]["commits"],
    ], launcher
    # The holders leave as soon as one newcomer holds the state; rank 3 may record its
    # copy a poll after rank 2 (or before it).
    assert len(launcher) == 3 and re.fullmatch(
        r"tfhvdrun: the committed state has reached rank\(s\) (2, 3|2|3): rank\(s\) 0, 1 on "
        r"h1, which is no longer listed, leave at the next commit \(the others re-form "
        r"without them\)", launcher[2]), launcher
    shape = _shape(records)
    # epoch 1 ran at size 4 or, when h1 left within its first commits, at size 2 on h2
    assert shape[0] == (0, 0, 2, "h1") and shape[2] == (2, 2, 2, "h2"), records
    assert shape[1] in ((1, 0, 4, "h1"), (1, 2, 2, "h2")), records
    _commits_go_forward(records)


def test_c_every_holder_killed_fails_the_job_naming_the_commit(cluster, tmp_path):
    # once the newcomers were started (the second listing of h2), SIGKILL both h1 ranks
    script = ('if [ "$epoch" = 0 ]; then echo h1:2; exit 0; fi\n'
              'if [ -e $D/listed ] && [ ! -e $D/killed ]; then touch $D/killed; '
              'kill -9 $(cat $D/pid.0 $D/pid.1); fi\n'
              'touch $D/listed; echo h1:2; echo h2:2')
    res, records, launcher = _job(cluster, tmp_path, script,
                                  ["--slow-start-from", "2", "--slow-start", "30"])
    assert res.returncode == 137, res.describe(text=res.output[-6000:])
    killed = "was killed by signal 9 (SIGKILL)"
    assert launcher[0] == STARTED, launcher
    # killed in epoch 0's --epoch-wait (commit 3) or after its last commit (4)
    commit = 3 if "lost at commit 3:" in launcher[-1] else 4
    assert launcher[-1] == (
        "tfhvdrun: the job failed: its committed state was lost at commit %d: the rank(s) "
        "that held it are gone (rank 0 (on h1) %s; rank 1 (on h1) %s), and rank(s) 2, 3, "
        "which joined later, had not received it; tf_hvd does not start a job over from "
        "nothing: restart it from a checkpoint of your own" % (commit, killed, killed)), launcher
    assert any(l.endswith("no rank left holds the job's committed state: stopping the job")
               for l in launcher), launcher
    assert _shape(records) == [(0, 0, 2, "h1")], records  # nobody started over


def test_d_bad_discovery_output_is_ignored_and_the_state_kept(cluster, tmp_path):
    # nohost has no reachable slot; h2 flaps in and out every second; garbage now and then
    script = ('n=$(cat $D/n 2>/dev/null || echo 0); echo $((n + 1)) > $D/n\n'
              'echo h1:2\n'
              '[ "$n" = 1 ] && echo nohost:1\n'
              '[ $((n % 2)) = 1 ] && [ "$n" -gt 2 ] && echo h2:1\n'
              '[ $((n % 3)) = 2 ] && echo "%%% not a host %%%"')
    res, records, launcher = _job(cluster, tmp_path, script, ["--epoch-wait", "3"])
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    text = "\n".join(launcher)
    assert "nohost" in text and "ignoring" in text and "not a host" in text, launcher
    assert [r["epoch"] for r in records] == [0, 1, 2], records
    assert records[0]["start_rank"] == 0
    _commits_go_forward(records)
