"""Jobs across two hosts: network namespaces with their own sshd (tools/clusters/netns_cluster.py).

Skipped, with the reason, unless this runs as root with ip, tc, ssh and sshd. One cluster
(h1, h2) serves the whole module and is always torn down. The launcher runs on h1, as on
a head node; ranks on h2 are started over ssh (Gloo) or by MPICH's hydra over ssh (MPI).

Per job (dense: one job checks many things, workers/multihost_checks.py): the topology of
an even or uneven layout, the rendezvous secret reaching every rank but no command line,
the job's environment on remote ranks, every collective case exact, and (in one job per
transport) the training worker's equivalence with a single process. With the hierarchical
allreduce/allgather knobs on: on h1:2,h2:2 (Gloo, with training, and MPI) the hierarchical
path must run (the core's algorithm counters say so) and every result must equal the
flat one exactly; on the uneven np=3 layouts the flat algorithms must run. An autotune
job whose tuner also switches hierarchical allreduce (test_autotune.py's checks). Then: start-up
errors naming the host with ssh's message, and a rank SIGKILLed on h2 ending the job on
both hosts, leaving no process behind on either. An elastic job on h1 that the discovery
script grows onto h2: the rank started there over ssh joins with the committed state.
"""

import os
import re
import signal
import time

import pytest

from jobrunner import PYTHON, REPO, Job, job_env, mpiexec_path, run
from namespace_hosts import leftovers

HERE = os.path.dirname(os.path.abspath(__file__))

WORKERS = os.path.join(HERE, "workers")
CHECKS = os.path.join(WORKERS, "multihost_checks.py")
KILLER = os.path.join(WORKERS, "multihost_kill.py")
TIMEOUT = 240


def _layout_slots(layout):
    return [int(e.split(":")[1]) for e in layout.split(",")]


def _launcher(cluster, transport, np_, layout, hostfile=False, ssh_opts=True, given="-H"):
    """argv (run on h1) that starts np_ ranks over ``layout`` on ``transport``: MPI with
    mpiexec itself, or through ``tfhvdrun --mpi`` when ``given`` says so."""
    if transport == "mpi" and given != "--mpi":
        return cluster.exec_argv("h1", [mpiexec_path(), "-n", str(np_), "-hosts", layout])
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", str(np_)]
    if given == "--mpi":
        cmd.append("--mpi")
    if hostfile:
        cmd += ["--hostfile", cluster.hostfile(_layout_slots(layout))]
    else:
        cmd += ["-H", layout]
    if ssh_opts:  # horovodrun's ssh options (sshd listens on 22 and 2222)
        cmd += ["-p", "2222", "-i", cluster.client_key]
    return cluster.exec_argv("h1", cmd)


# (transport, np, layout, how it is given, training sections run in the same job,
# algorithms: with HOROVOD_HIERARCHICAL_ALLREDUCE/ALLGATHER on, the path that must run).
# On even hosts the hierarchical allreduce and allgather run (reduce on the host, across
# hosts, share on the host; the allgather across hosts, then on the host) and every
# result must be exactly the flat one, training included; on uneven hosts the knobs are
# on yet the flat algorithms must run.
HIERARCHICAL = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "HOROVOD_HIERARCHICAL_ALLGATHER": "1"}
JOBS = [
    ("gloo", 4, "h1:2,h2:2", "-H", "tf2_equivalence", "hierarchical"),
    ("gloo", 3, "h1:1,h2:2", "--hostfile", "", "flat"),  # --hierarchical-* flags
    ("mpi", 4, "h1:3,h2:1", "-hosts", "tf2_equivalence", ""),
    ("mpi", 4, "h1:2,h2:2", "-hosts", "", "hierarchical"),
    ("mpi", 3, "h1:2,h2:1", "--mpi", "", "flat"),  # tfhvdrun --mpi -H ... -p 2222 -i KEY
]


@pytest.mark.parametrize("transport,np_,layout,given,train,algorithms", JOBS,
                         ids=["%s-np%d-%s" % (j[0], j[1], j[2]) for j in JOBS])
def test_job_across_hosts(cluster, tmp_path, transport, np_, layout, given, train,
                          algorithms):
    result_dir = str(tmp_path)
    env = job_env({"HOROVOD_FUSION_THRESHOLD": "1048576", "MULTIHOST_MARK": "x y"})
    cmd = _launcher(cluster, transport, np_, layout, hostfile=given == "--hostfile",
                    given=given)
    expect = []
    if algorithms:
        if given == "--hostfile":  # horovodrun's flags set the knobs
            cmd += ["--hierarchical-allreduce", "--hierarchical-allgather"]
        else:
            env.update(HIERARCHICAL)
        if algorithms == "hierarchical":  # + process sets across hosts, added at run time
            env["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
        expect = ["--expect-env", "HOROVOD_HIERARCHICAL_ALLREDUCE=1",
                  "--expect-env", "HOROVOD_HIERARCHICAL_ALLGATHER=1",
                  "--algorithms", algorithms]
    cmd += [PYTHON, CHECKS] + expect + [ "--layout", layout, "--np", str(np_), "--transport", transport,
            "--result-dir", result_dir, "--expect-env", "HOROVOD_FUSION_THRESHOLD=1048576",
            "--expect-env", "PYTHONPATH=%s" % env["PYTHONPATH"]]
    if train:
        cmd += ["--train", train]
    res = run(cmd, TIMEOUT + (120 if train else 0), env=env, cwd=REPO)
    out = res.output
    assert res.ok, res.describe(text="\n".join(
        l for l in out.splitlines() if "FAIL" in l or "EXCEPTION" in l or "tfhvdrun" in l
        or "rror" in l)[-6000:] + "\n...\n" + out[-4000:])
    assert not res.survivors, res.describe()
    missing = [r for r in range(np_) if not os.path.exists(
        os.path.join(result_dir, "rank%d.ok" % r))]
    assert not missing, "ranks %s wrote no result\n%s" % (missing, out[-6000:])
    ranks_ok = set(int(r) for r in re.findall(r"\[rank (\d+)\] OK \d+ checks", out))
    assert ranks_ok == set(range(np_)), out[-6000:]
    if algorithms:  # the section ran on every rank, with its path check
        checked = set(int(r) for r in re.findall(
            r"\[rank (\d+)\] section hierarchical +\d+ checks, 0 failures", out))
        assert checked == set(range(np_)), out[-6000:]
        if algorithms == "hierarchical":  # every rank is in one of the two sets
            checked = set(int(r) for r in re.findall(
                r"\[rank (\d+)\] section hierarchical process sets +[1-9]\d* checks, "
                r"0 failures", out))
            assert checked == set(range(np_)), out[-6000:]
    if train:
        trained = set(int(r) for r in re.findall(r"\[rank (\d+)\] TRAINING OK", out))
        assert trained == set(range(np_)), out[-6000:]
    if transport == "gloo" or given == "--mpi":  # prefixed lines, also from h2
        for r in range(np_):
            assert re.search(r"^\[%d\]<stdout>:\[rank %d\] OK" % (r, r), out, re.M), out[-3000:]
    assert not leftovers(cluster), leftovers(cluster)


def test_autotune_across_hosts(cluster, tmp_path):
    # Autotune with hierarchical allreduce among the tuned knobs: exact results, the
    # same switches at the same round on all four ranks (test_autotune.py's checks).
    from test_autotune import autotune_env, check_histories
    result_dir = str(tmp_path)
    log = os.path.join(result_dir, "autotune.csv")
    cmd = _launcher(cluster, "gloo", 4, "h1:2,h2:2")
    cmd += [PYTHON, os.path.join(WORKERS, "autotune_checks.py"), "--np", "4",
            "--transport", "gloo", "--result-dir", result_dir]
    res = run(cmd, TIMEOUT, env=job_env(autotune_env(log)), cwd=REPO)
    assert res.ok, res.describe(text=res.output[-6000:])
    assert not res.survivors, res.describe()
    ranks_ok = set(int(r) for r in re.findall(r"\[rank (\d+)\] OK \d+ checks", res.output))
    assert ranks_ok == set(range(4)), res.output[-6000:]
    check_histories(result_dir, 4, log, hierarchical_tuned=True)
    assert not leftovers(cluster), leftovers(cluster)


def test_start_up_names_the_host_and_ssh_message(cluster):
    env = job_env()
    cases = [(["-H", "h1:1,h2:1", "-p", "2999"],
              "cannot reach host h2 over ssh: ssh: connect to host %s port 2999: "
              "Connection refused" % cluster.address("h2")),
             (["-H", "h1:1,10.213.0.77:1"],
              "cannot reach host 10.213.0.77 over ssh: ssh: connect to host 10.213.0.77 "
              "port 22:"),
             (["-H", "h1:1,nosuchhost:1"],
              "cannot reach host nosuchhost over ssh: ssh: Could not resolve hostname "
              "nosuchhost")]
    for flags, message in cases:
        cmd = cluster.exec_argv("h1", [PYTHON, "-m", "tf_hvd.runner", "-np", "2"] + flags +
                                [PYTHON, "-c", "print('never runs')"])
        res = run(cmd, 60, env=env, cwd=REPO)
        assert res.returncode == 255, res.describe()
        assert message in res.output, res.describe()
        assert "never runs" not in res.output


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_killed_remote_rank_ends_the_job_on_all_hosts(cluster, tmp_path, transport):
    layout, np_, victim = "h1:2,h2:2", 4, 2  # rank 2 is h2's first
    cmd = _launcher(cluster, transport, np_, layout, ssh_opts=False)
    cmd += [PYTHON, KILLER, str(tmp_path)]
    pid_files = [os.path.join(str(tmp_path), "pid.%d" % r) for r in range(np_)]
    with Job(cmd, env=job_env(), cwd=REPO) as job:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and job.running() and \
                not all(os.path.exists(p) for p in pid_files):
            time.sleep(0.2)
        assert all(os.path.exists(p) for p in pid_files), job.wait(0).describe()
        with open(pid_files[victim]) as f:
            pid, host = f.read().split()
        assert host == "h2"
        killed_at = time.monotonic()
        os.kill(int(pid), signal.SIGKILL)
        res = job.wait(60)
    assert not res.timed_out, res.describe()
    assert res.returncode != 0, res.describe()
    assert time.monotonic() - killed_at < 45, res.describe()
    assert not res.survivors, res.describe()
    left = leftovers(cluster)
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftovers(cluster)
    assert not left, "processes left on the hosts: %s\n%s" % (left, res.describe())
    if transport == "gloo":
        # The launcher names the killed rank and its host (its status comes over ssh, maybe
        # after a survivor's exit); the survivors name the lost rank.
        assert "tfhvdrun: rank %d (on h2) was killed by signal 9 (SIGKILL)" % victim in \
            res.output, res.describe()
        assert res.returncode == 128 + 9, res.describe()
        assert re.search(r"rank %d closed its connection|lost the connection to rank %d|"
                         r"rank %d \(on h2\) was killed by signal 9" % (victim, victim, victim),
                         res.output), res.describe()


def test_elastic_job_grows_onto_a_host_the_discovery_script_adds(cluster, tmp_path):
    # np=2 on h1 (--min-np 2 --max-np 3); once rank 0 marks step 3 the script also lists
    # h2:1: the launcher starts rank 2 on h2 over ssh (-p/-i, secret on stdin), it joins
    # at the next commit with the committed state, and all three finish at np=3.
    import json
    from test_elastic import GLOBAL_BATCH, WORKER
    result_dir, marker = tmp_path / "job", tmp_path / "grow"
    result_dir.mkdir()
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho h1:2\nif [ -e %s ]; then echo h2:1; fi\n" % marker)
    script.chmod(0o755)
    cmd = _launcher(cluster, "gloo", 2, "h1:2")
    cmd += ["--min-np", "2", "--max-np", "3", "--host-discovery-script", str(script),
            "--network-interfaces", "eth0",
            PYTHON, WORKER, "--dir", str(result_dir), "--grow-marker", str(marker),
            "--steps", "12", "--victim", "-1"]
    res = run(cmd, 90, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO)
    assert res.ok and not res.survivors, res.describe(text=res.output[-6000:])
    launcher = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    assert launcher == ["tfhvdrun: host discovery: 1 slot(s) on h2; started rank(s) 2, "
                        "which the running ranks wait for at their next commit (at most 600 s, "
                        "--elastic-timeout) to hand them the committed state"], res.output[-4000:]
    events = {r: [json.loads(l) for l in (result_dir / ("rank%d.events" % r))
                  .read_text().splitlines()] for r in range(3)}
    begins = {r: [e for e in events[r] if e["event"] == "train_begins"] for r in range(3)}
    [joined] = begins[2]
    assert (joined["host"], joined["size"], joined["rank"]) == ("h2", 3, 2), joined
    again = begins[0][1]  # rank 0 starts again at np=3 from the same committed state
    assert again["host"] == "h1" and again["size"] == 3 and 0 < again["step"] == \
        joined["step"], (again, joined)
    assert (joined["w"], joined["samples"]) == (again["w"], again["samples"])
    for r in range(3):
        [done] = [e for e in events[r] if e["event"] == "done"]
        assert (done["step"], done["samples"], done["size"]) == \
            (12, 12 * GLOBAL_BATCH, 3), events[r]
    assert not leftovers(cluster), leftovers(cluster)
