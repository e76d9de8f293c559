"""tf_hvd jobs started by a real Slurm (Debian's slurm-wlm) on the namespace cluster.

One module-wide cluster: hosts h1 and h2 (tools/clusters/netns_cluster.py), munged with a fresh
key, slurmctld on h1 and a slurmd on each host (tools/clusters/slurm_cluster.py), all torn down
at the end. ``srun`` runs on h1 like on a login node; no tfhvdrun anywhere: hvd.init()
reads Slurm's variables (tf_hvd.scheduler) and meets over Gloo with the secret srun
propagates, or runs on MPI under ``srun --mpi=pmi2``. Skipped, with the reason, where
the machine cannot run Slurm (not root, no namespaces, Slurm not installed).
"""

import json
import os
import re
import secrets
import sys
import time

import psutil
import pytest

from jobrunner import PYTHON, REPO, base_env, run
from namespace_hosts import namespace_cluster

import slurm_cluster  # noqa: E402 (namespace_hosts puts its folder on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "workers", "engine_checks.py")
EPOCHS = os.path.join(HERE, "fault_workers", "horovod_elastic_epochs.py")
TRAIN_EAGER = os.path.join(HERE, "training_workers", "train_eager.py")
TIMEOUT = 240


@pytest.fixture(scope="module")
def slurm():
    reason = slurm_cluster.available()
    if reason:
        pytest.skip("no Slurm cluster: %s" % reason)
    with namespace_cluster(2, __name__) as c, slurm_cluster.SlurmCluster(c) as s:
        # the daemons and their helpers (slurmctld's slurmscriptd), before any job
        s.baseline = set(pid for h in c.hosts for pid in c.processes_in(h))
        yield s


def _srun(slurm, args, extra_env=None, timeout=TIMEOUT):
    env = base_env({"HOROVOD_GLOO_RENDEZVOUS_SECRET": secrets.token_hex(32)})
    env.update(extra_env or {})
    env = slurm.env(env)
    cmd = slurm.cluster.exec_argv("h1", ["srun", "-N", "2", "--ntasks-per-node", "2",
                                         "--label"] + args)
    return run(cmd, timeout, env=env, cwd=REPO)


def _results(out):
    return {int(m.group(1)): json.loads(m.group(2))
            for m in re.finditer(r"^(\d+): ENGINE_RESULT (.*)$", out, re.M)}


def _leftovers(slurm, within=15.0):
    """Processes on the hosts other than sshd and the Slurm daemons (after a grace)."""
    daemons = slurm.baseline
    deadline = time.time() + within
    while True:
        left = []
        for host in slurm.cluster.hosts:
            for pid in slurm.cluster.processes_in(host):
                if pid in daemons:
                    continue
                try:
                    left.append("%s:%d %s" % (host, pid, " ".join(psutil.Process(pid).cmdline())))
                except psutil.Error:
                    pass
        if not left or time.time() > deadline:
            return left
        time.sleep(0.5)


def _check_exact(got, transport, res):
    assert sorted(got) == [0, 1, 2, 3], res.describe()
    for rank, r in got.items():
        assert (r["rank"], r["size"]) == (rank, 4), r
        assert (r["local_rank"], r["local_size"]) == (rank % 2, 2), r
        assert (r["cross_rank"], r["cross_size"]) == (rank // 2, 2), r
        assert r["host"] == "h%d" % (rank // 2 + 1), r
        assert r[transport] and r["sum_exact"] and r["gathered"] == [0, 1, 2, 3], json.dumps(r)
        assert r["broadcast"] == [7.5] and not r["secret_on_cmdline"], r


def test_srun_gloo_np4_two_nodes_exact_then_a_killed_task_is_named(slurm):
    """One job: exact collectives over Gloo at np=4 on h1:2,h2:2; then rank 3 (on h2) is
    SIGKILLed: srun names the task and its node, the other ranks fail naming it (none
    trains on or hangs), the step ends and nothing is left on either node."""
    start = time.time()
    res = _srun(slurm, [PYTHON, WORKER],
                {"ENGINE_KILL_RANK": "3", "HOROVOD_GLOO_TIMEOUT_SECONDS": "20"})
    assert not res.timed_out and res.returncode != 0, res.describe()
    got = _results(res.output)
    _check_exact(got, "gloo", res)
    assert re.search(r"^srun: error: h2: task 3: Killed$", res.output, re.M), res.describe()
    lost = dict(re.findall(r"^(\d+): ENGINE_PEER_LOST (.*)$", res.output, re.M))
    assert "rank 3 (on h2)" in lost.get("0", "") and "rank 3 (on h2)" in lost.get("1", ""), \
        res.describe()
    assert time.time() - start < 180
    assert _leftovers(slurm) == []


def test_srun_mpi_pmi2_np4_two_nodes_exact(slurm):
    # MPICH runs on its OFI netmod over libfabric's TCP provider, not on UCX. Slurm's PMI2
    # plugin reads a PMI-1 request with one 1024-byte read(); MPICH's UCX business cards
    # (node-root allgathers in 511-byte segments, hex with run-length packing of partly
    # uninitialised bytes) reach ~1080-byte lines when they pack badly, and slurmstepd
    # then fails the job ("value not properly terminated in client request": 1 CI run in
    # several). OFI's TCP address is 8 bytes: one short put per node. (UCX also took the
    # namespace hosts, which share a kernel, for one machine and tried shared memory
    # between them.) docs/cluster.md says so for users.
    res = _srun(slurm, ["--mpi=pmi2", PYTHON, WORKER],
                {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"})
    assert res.ok, res.describe()
    _check_exact(_results(res.output), "mpi", res)
    assert _leftovers(slurm) == []


def test_srun_keras_fit_equals_one_process(slurm, tmp_path):
    res = _srun(slurm, [PYTHON, TRAIN_EAGER, str(tmp_path)],
                {"TRAINING_ONLY": "keras_equivalence"})
    assert res.ok, res.describe()
    trained = set(int(r) for r in re.findall(r"\[rank (\d+)\] TRAINING OK", res.output))
    assert trained == {0, 1, 2, 3}, res.describe()


def test_tfhvdrun_in_sbatch_takes_the_allocation_and_uses_srun(slurm, tmp_path):
    """tfhvdrun in a batch script without -H: h1:2,h2:2 from Slurm; h2's ranks by srun."""
    script, out = tmp_path / "job.sh", tmp_path / "job.out"
    script.write_text("#!/bin/sh\ncd %s\n%s -m tf_hvd.runner --verbose -np 4 %s %s\n"
                      "echo tfhvdrun exit $?\n" % (REPO, PYTHON, PYTHON, WORKER))
    script.chmod(0o755)
    env = slurm.env(base_env())
    cmd = slurm.cluster.exec_argv("h1", ["sbatch", "-W", "-N", "2", "--ntasks-per-node", "2",
                                         "-o", str(out), str(script)])
    res = run(cmd, TIMEOUT, env=env, cwd=REPO)
    assert res.ok, res.describe()
    text = out.read_text()
    assert "tfhvdrun exit 0" in text, text[-5000:]
    got = {int(m.group(1)): json.loads(m.group(2))
           for m in re.finditer(r"^\[(\d+)\]<stdout>:ENGINE_RESULT (.*)$", text, re.M)}
    assert sorted(got) == [0, 1, 2, 3], text[-5000:]
    for rank, r in got.items():
        assert r["host"] == "h%d" % (rank // 2 + 1) and r["sum_exact"], r
    # the ranks on h2 were started by srun, not ssh
    for rank in (2, 3):
        assert re.search(r"rank %d on h2 .*: \S*srun --nodes=1 --ntasks=1 --nodelist=h2 "
                         % rank, text), text[-5000:]
    assert _leftovers(slurm) == []


def test_tfhvdrun_elastic_in_sbatch_moves_the_state_to_the_node_it_adds(slurm, tmp_path):
    """Horovod's "hosts added then removed" schedule inside a 2-node allocation: the
    discovery script lists h1:2, then h1:2 and h2:2, then h2:2 (by the epochs rank 0 has
    recorded). The newcomers on h2 start with srun (sleeping 3 s before importing
    TensorFlow); the running ranks wait for them at their next commit, then h1's ranks
    leave: epochs [(start rank 0, size 2), (0, 4), (2, 2)], commits never going back."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    log = job_dir / "log.jsonl"
    discover, script, out = tmp_path / "discover.sh", tmp_path / "job.sh", tmp_path / "job.out"
    discover.write_text(
        "#!/bin/sh\nepoch=0\n[ -f %s ] && epoch=$(wc -l < %s | tr -d ' ')\n"
        'if [ "$epoch" = 0 ]; then echo h1:2\n'
        'elif [ "$epoch" = 1 ]; then echo h1:2; echo h2:2\n'
        "else echo h2:2; fi\n" % (log, log))
    discover.chmod(0o755)
    script.write_text(
        "#!/bin/sh\ncd %s\n%s -m tf_hvd.runner -np 2 --min-np 2 --max-np 4 "
        "--host-discovery-script %s %s %s --logfile %s --epochs 3 --batches-per-epoch 3 "
        "--epoch-wait 2 --slow-start-from 2 --slow-start 3\necho tfhvdrun exit $?\n"
        % (REPO, PYTHON, discover, PYTHON, EPOCHS, log))
    script.chmod(0o755)
    env = slurm.env(base_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}))
    cmd = slurm.cluster.exec_argv("h1", ["sbatch", "-W", "-N", "2", "--ntasks-per-node", "2",
                                         "-o", str(out), str(script)])
    start = time.time()
    res = run(cmd, TIMEOUT, env=env, cwd=REPO)
    sys.stderr.write("tfhvdrun elastic in sbatch: %.1f s\n" % (time.time() - start))
    text = out.read_text() if out.exists() else ""
    assert res.ok and "tfhvdrun exit 0" in text, res.describe(text=text[-6000:])
    launcher = [l for l in text.splitlines() if l.startswith("tfhvdrun:")]
    records = [json.loads(l) for l in log.read_text().splitlines()]
    print("\n".join(launcher))  # the docs quote them (pytest -s)
    print("\n".join(json.dumps(r, sort_keys=True) for r in records))
    assert launcher == [
        "tfhvdrun: host discovery: 2 slot(s) on h2; started rank(s) 2, 3, which the running "
        "ranks wait for at their next commit (at most 600 s, --elastic-timeout) to hand them "
        "the committed state",
        "tfhvdrun: host discovery: h1 is no longer listed; rank(s) 0, 1 on it leave at the "
        "next commit (the others re-form without them)"], text[-6000:]
    assert [(r["epoch"], r["start_rank"], r["size"], r["hostname"]) for r in records] == [
        (0, 0, 2, "h1"), (1, 0, 4, "h1"), (2, 2, 2, "h2")], records
    assert [r["commits"] for r in records] == [3, 7, 11], records
    assert _leftovers(slurm) == []
