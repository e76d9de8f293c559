"""tf_hvd.ray on a two-node Ray cluster: a Ray head on namespace host h1 and a worker node
on h2 (tools/clusters/netns_cluster.py), both real ``ray start`` processes with a fresh cluster
token, started and torn down by this module (one cluster for all its tests).

* RayExecutor, 2 nodes x 2 workers (4 ranks): a Keras fit whose final weights equal one
  process's fit of the same data; the ranks' local/cross topology follows the nodes.
* ElasticRayExecutor on the cluster's 4 slots (min_np 2): worker 3 SIGKILLs itself (the
  job goes on with 3), then the test stops h2's whole Ray node (the job goes on with the
  2 workers of h1), then starts a new Ray node on h2 (2 workers join at the next commit).
  Every finishing worker ends with the same weights, equal to one process's, and the
  sample count shows no step was lost or repeated.
* The committed state is never lost (issue 37), with Horovod's elastic test loop
  (ray_workers/ray_train_fns.py: elastic_epochs, one record per epoch) on
  ElasticRayExecutor (min_np 2, max_np 4), the job started on h1's 2 slots alone (h2's
  node stopped): (a) a new node on h2, whose 2 workers the running workers wait for and
  hand the state to, then h1's workers killed: epochs at sizes 2, 4, 2, commits never
  going backwards; (b) h1's workers (every holder) killed once the newcomers were
  started, while they are still starting: ``run`` fails saying the committed state was
  lost and at which commit.
* Ray Train's own TensorflowTrainer (MultiWorkerMirroredStrategy's launcher) runs a
  tf_hvd Keras fit unchanged from TF_CONFIG: equal to one process's; a killed worker is
  named by Ray and FailureConfig's retry restarts the group.
* After the nodes are stopped, no process is left in either namespace.

The Ray nodes are stopped by killing their own process trees (and whatever is left in the
two namespaces), not with ``ray stop``, which would stop every Ray process of the machine.
Skipped, with the reason, where the namespace cluster cannot be made (not root, no ip...).
"""

import json
import re
import os
import secrets
import shutil
import sys
import time

import numpy as np
import pytest

pytest.importorskip("ray")

from jobrunner import PYTHON, REPO, Job, job_env, run  # noqa: E402
from namespace_hosts import namespace_cluster, netns_cluster  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

RAY_WORKERS = os.path.join(HERE, "ray_workers")
DRIVER = os.path.join(RAY_WORKERS, "cluster_driver.py")
RAY = os.path.join(os.path.dirname(PYTHON), "ray")
PORT = 6379
STARTED_LINE = "This command will now block forever"

pytestmark = pytest.mark.timeout(420)


class RayNodes(object):
    """`ray start --block` processes on the namespace hosts, one per node."""

    def __init__(self, cluster, tmp):
        self.cluster, self.tmp = cluster, tmp
        self.env = job_env({
            "PYTHONPATH": os.pathsep.join([REPO, RAY_WORKERS]),
            # A token for this cluster only: nodes and drivers without it are refused.
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0"})
        self.jobs = {}   # host -> Job
        self.temps = {}  # host -> the node's --temp-dir (removed when it stops)
        self.starts = 0

    @property
    def head_address(self):
        return "%s:%d" % (self.cluster.address("h1"), PORT)

    def start(self, host, within=120):
        self.starts += 1
        temp = "/tmp/tfr%d-%s-%d" % (os.getpid() % 1000, host, self.starts)  # short: sockets
        self.temps[host] = temp
        cmd = [RAY, "start", "--block", "--num-cpus", "2", "--temp-dir", temp,
               "--node-ip-address", self.cluster.address(host)]
        if host == "h1":
            cmd += ["--head", "--port", str(PORT), "--include-dashboard=false"]
        else:
            cmd += ["--address", self.head_address]
        lines = []
        job = Job(self.cluster.exec_argv(host, cmd), env=self.env, cwd=REPO,
                  log_path=os.path.join(self.tmp, "ray-%s-%d.log" % (host, self.starts)),
                  on_line=lambda name, line: lines.append(line))
        self.jobs[host] = job
        deadline = time.monotonic() + within
        while not any(STARTED_LINE in l for l in lines):
            if not job.running() or time.monotonic() > deadline:
                job.kill()
                raise RuntimeError("ray start on %s failed:\n%s" % (host, "\n".join(lines[-30:])))
            time.sleep(0.2)
        return job

    def stop(self, host):
        """Kill the node's process tree, then anything else left in its namespace (Ray's
        workers outlive the raylet briefly), sshd excepted."""
        job = self.jobs.pop(host, None)
        if job is not None:
            job.kill()
            job.wait(timeout=30)
        netns_cluster._kill_all(self.leftovers(host))
        shutil.rmtree(self.temps.pop(host, ""), ignore_errors=True)

    def leftovers(self, host):
        sshd = set(self.cluster.sshd_pids.values())
        left = []
        for pid in self.cluster.processes_in(host):
            try:
                with open("/proc/%d/comm" % pid) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if pid not in sshd and comm != "sshd":
                left.append(pid)
        return left

    def driver(self, mode, out, extra=(), timeout=300, on_line=None):
        cmd = self.cluster.exec_argv("h1", [PYTHON, DRIVER, mode, "--address",
                                            self.head_address, "--out", out] + list(extra))
        if on_line is None:
            return run(cmd, timeout, env=self.env, cwd=REPO)
        return Job(cmd, env=self.env, cwd=REPO, on_line=on_line)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    with namespace_cluster(2, __name__) as cluster:
        ray_nodes = RayNodes(cluster, str(tmp_path_factory.mktemp("ray")))
        t0 = time.monotonic()
        try:
            ray_nodes.start("h1")
            ray_nodes.start("h2")
            sys.stderr.write("ray cluster up in %.1f s\n" % (time.monotonic() - t0))
            yield ray_nodes
        finally:
            for host in ("h2", "h1"):
                ray_nodes.stop(host)


def _max_diff(weights, reference):
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(weights, reference))


def test_keras_fit_on_two_nodes_equals_one_process(nodes, tmp_path):
    out = str(tmp_path / "fit.json")
    res = nodes.driver("fit", out, ["--per-host", "2"])
    assert res.ok, res.describe()
    result = json.load(open(out))
    ranks = result["ranks"]
    sys.stderr.write("fit: start %.1f s, run %.1f s, fit per rank %s s\n"
                     % (result["start_s"], result["run_s"],
                        ["%.1f" % r["fit_s"] for r in ranks]))
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert all(r["size"] == 4 and r["local_size"] == 2 and r["cross_size"] == 2
               for r in ranks)
    assert [(r["local_rank"], r["cross_rank"]) for r in ranks] == [(0, 0), (1, 0), (0, 1),
                                                                  (1, 1)]
    # ranks 0,1 share a node, 2,3 the other one
    assert ranks[0]["host"] == ranks[1]["host"] != ranks[2]["host"] == ranks[3]["host"]
    assert sorted(set(r["host"] for r in ranks)) == ["h1", "h2"]
    for r in ranks:
        assert r["weights"] == ranks[0]["weights"]  # bit-identical across ranks
        assert _max_diff(r["weights"], result["reference"]) < 1e-5


def _trainer(nodes, tmp_path, extra):
    out = str(tmp_path / "trainer.json")
    res = nodes.driver("tensorflow-trainer", out, ["--workers", "4", "--secret"] + extra)
    assert os.path.exists(out), res.describe()
    return res, json.load(open(out))


def test_ray_tensorflow_trainer_runs_a_tf_hvd_fit_and_retries_a_killed_worker(nodes, tmp_path):
    """Ray Train's own TensorflowTrainer (4 workers on the two nodes) runs a tf_hvd Keras
    fit unchanged: hvd.init() reads the TF_CONFIG Ray sets, the secret comes in the job's
    runtime_env. Worker 3 SIGKILLs itself in the first attempt; Ray names it, and
    FailureConfig(max_failures=1) restarts the group, whose fit equals one process's."""
    marker = str(tmp_path / "killed")
    res, result = _trainer(nodes, tmp_path, ["--max-failures", "1", "--victim", "3",
                                             "--marker", marker])
    assert res.ok and result["error"] is None, res.describe()
    assert os.path.exists(marker)  # the first attempt lost worker 3
    assert "world_rank=3" in res.output and "died" in res.output, res.describe()
    ranks = result["ranks"]
    sys.stderr.write("TensorflowTrainer: run %.1f s (two attempts)\n" % result["run_s"])
    assert [(r["rank"], r["world_rank"], r["size"]) for r in ranks] == [
        (0, 0, 4), (1, 1, 4), (2, 2, 4), (3, 3, 4)]
    for r in ranks:
        tf_config = json.loads(r["tf_config"])
        assert tf_config["task"] == {"type": "worker", "index": r["rank"]}
        assert len(tf_config["cluster"]["worker"]) == 4
        assert r["weights"] == ranks[0]["weights"]  # bit-identical across ranks
        assert _max_diff(r["weights"], result["reference"]) < 1e-5
    # local ranks count the workers that share a node (the host of their address)
    by_host = {}
    for r in ranks:
        by_host.setdefault(r["host"], []).append(r)
    assert sorted(by_host) == ["h1", "h2"]
    for host, rs in by_host.items():
        assert [(r["local_rank"], r["local_size"]) for r in rs] == [(i, len(rs)) for i in
                                                                   range(len(rs))], host


def test_ray_tensorflow_trainer_without_retries_fails_naming_the_killed_worker(nodes,
                                                                                tmp_path):
    res, result = _trainer(nodes, tmp_path, ["--victim", "3", "--marker",
                                             str(tmp_path / "killed")])
    error = result["error"] or ""
    assert error.startswith("WorkerGroupError: Training failed due to worker errors"), error
    # Ray names the dead worker; where the other ranks' own errors reach Ray's report
    # before its health check does, they name the rank that left
    assert "[Rank 3 Error Snippet]" in error and "world_rank=3" in error, error
    assert "The actor died unexpectedly" in error, error
    if "a rank may have exited or crashed" in error:
        assert re.search(r"\brank 3 \((pid|on) ", error), error


def test_elastic_follows_killed_worker_and_nodes_leaving_and_joining(nodes, tmp_path):
    out = str(tmp_path / "elastic.json")
    marker = str(tmp_path / "waiting")
    lines = []
    job = nodes.driver("elastic", out, ["--victim", "3", "--kill-at", "3", "--steps", "10",
                                        "--regrow-at", "6", "--marker", marker],
                       on_line=lambda name, line: lines.append(line))
    with job:
        def wait_for(what, check, within=180):
            deadline = time.monotonic() + within
            while not check():
                if not job.running() or time.monotonic() > deadline:
                    job.kill()
                    pytest.fail("%s did not happen:\n%s" % (what, "\n".join(lines[-60:])))
                time.sleep(0.2)

        t0 = time.monotonic()
        times = {}
        wait_for("worker 3's death", lambda: os.path.exists(marker))
        times["3 left"] = time.monotonic() - t0
        nodes.stop("h2")  # the node with workers 2 and 3 goes away
        wait_for("worker 2's death", lambda: any("worker 2 on" in l for l in lines))
        times["2 left"] = time.monotonic() - t0
        nodes.start("h2")  # a new node: two slots
        times["h2 back"] = time.monotonic() - t0
        wait_for("the end", lambda: not job.running(), within=300)
        times["end"] = time.monotonic() - t0
        res = job.wait(timeout=10)
    assert res.ok, res.describe()
    result = json.load(open(out))
    sys.stderr.write("elastic: run %.1f s; %s\n" % (result["run_s"], ", ".join(
        "%s at %.1f s" % kv for kv in times.items())))
    assert result["lost"] == [3, 2]
    results = result["results"]
    assert [r["id"] for r in results] == [0, 1, 4, 5]
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    for r in results:
        assert (r["size"], r["step"], r["samples"]) == (4, 10, 10 * 12)
        assert r["weights"] == results[0]["weights"]
        assert _max_diff(r["weights"], result["reference"]) < 1e-5
    assert [r["host"] for r in results] == ["h1", "h1", "h2", "h2"]
    # steps ran with 4 and with 3 workers (with 2 they waited for the new node)
    assert results[0]["sizes"] == [3, 4]
    assert any("worker 3 on %s died" % nodes.cluster.address("h2") in l for l in lines)


def _epochs_job(nodes, tmp_path, extra):
    """Start elastic-epochs with h2's node stopped (the job starts on h1's 2 slots)."""
    nodes.stop("h2")
    out = str(tmp_path / "epochs.json")
    lines = []
    job = nodes.driver("elastic-epochs", out, ["--epochs", "4"] + extra,
                       on_line=lambda name, line: lines.append((time.time(), line)))
    return job, out, lines


def _records(tmp_path):
    log = tmp_path / "log.jsonl"
    return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []


def _wait(job, lines, what, check, within=180):
    deadline = time.monotonic() + within
    while not check():
        if not job.running() or time.monotonic() > deadline:
            job.kill()
            pytest.fail("%s did not happen:\n%s" % (what, "\n".join(l for _, l in lines[-60:])))
        time.sleep(0.2)


def _kill_workers(tmp_path, ids):
    for i in ids:
        os.kill(int((tmp_path / ("pid.%d" % i)).read_text()), 9)


def _driver_lines(lines):
    return [l for _, l in lines if l.startswith("tf_hvd.ray:")]


def _ray_started_line(nodes):
    return ("tf_hvd.ray: new slots on %s: started worker(s) 2, 3, which the running workers "
            "wait for at their next commit (at most 120 s, elastic_timeout) to hand them the "
            "committed state" % nodes.cluster.address("h2"))


def test_elastic_state_reaches_a_new_node_before_the_first_workers_are_killed(nodes,
                                                                              tmp_path):
    """(a) Nodes added, then the original node's workers killed (Horovod's "hosts added
    and removed" on Ray): epoch 1 starts once the job has grown to 4 (the newcomers get
    the committed state at the running workers' next commit); one second after epoch 1's
    record the test SIGKILLs workers 0 and 1 (h1) and the job finishes on h2's 2 workers
    with the state: epochs [(start rank 0, size 2), (0, 4), (2, 2), (2, 2)]."""
    t0 = time.monotonic()
    job, out, lines = _epochs_job(nodes, tmp_path, ["--grow-at", "1"])
    with job:
        _wait(job, lines, "epoch 0", lambda: len(_records(tmp_path)) >= 1)
        nodes.start("h2")
        _wait(job, lines, "epoch 1 at size 4", lambda: len(_records(tmp_path)) >= 2)
        time.sleep(1.0)  # into epoch 2
        _kill_workers(tmp_path, [0, 1])
        _wait(job, lines, "the end", lambda: not job.running())
        res = job.wait(timeout=10)
    sys.stderr.write("elastic (a): %.1f s\n" % (time.monotonic() - t0))
    records = _records(tmp_path)
    driver = _driver_lines(lines)
    print("\n".join(driver))  # the docs quote them (pytest -s)
    print("\n".join(json.dumps(r, sort_keys=True) for r in records))
    assert res.ok, res.describe()
    result = json.load(open(out))
    assert result["error"] is None, result["error"]
    assert [(r["epoch"], r["start_rank"], r["size"], r["hostname"]) for r in records] == [
        (0, 0, 2, "h1"), (1, 0, 4, "h1"), (2, 2, 2, "h2"), (3, 2, 2, "h2")], records
    # commits never go backwards: none lost, none repeated
    assert [r["commits"] for r in records] == [3, 7, 11, 15], records
    assert [(r["id"], r["rank"], r["size"], r["commits"]) for r in result["results"]] == [
        (2, 0, 2, 16), (3, 1, 2, 16)], result
    assert sorted(result["lost"]) == [0, 1], result  # killed together: either dies first
    h1 = nodes.cluster.address("h1")
    assert driver[0] == _ray_started_line(nodes), driver
    died = sorted(re.findall(r"^tf_hvd\.ray: worker (\d) on %s died \(.*\); (\d) worker\(s\) "
                             r"go on from their last commit, none starts on that node again$"
                             % re.escape(h1), "\n".join(driver), re.M))
    assert [i for i, _ in died] == ["0", "1"], driver
    assert sorted(left for _, left in died) == ["2", "3"], driver


def test_elastic_every_holder_killed_fails_naming_the_lost_commit(nodes, tmp_path):
    """(b) Every worker holding the state (h1's) SIGKILLed once the newcomers on a new h2
    node were started, while they still start (60 s before importing TensorFlow): ``run``
    raises HorovodInternalError saying the state was lost and at which commit; the
    newcomers never train from nothing."""
    t0 = time.monotonic()
    job, out, lines = _epochs_job(nodes, tmp_path, ["--grow-at", "1", "--slow-from", "2",
                                                    "--slow-start", "60"])
    with job:
        _wait(job, lines, "epoch 0", lambda: len(_records(tmp_path)) >= 1)
        nodes.start("h2")
        _wait(job, lines, "the newcomers' start",
              lambda: any("started worker(s) 2, 3" in l for _, l in lines))
        _kill_workers(tmp_path, [0, 1])
        _wait(job, lines, "the end", lambda: not job.running(), within=60)
        res = job.wait(timeout=10)
    sys.stderr.write("elastic (b): %.1f s\n" % (time.monotonic() - t0))
    records = _records(tmp_path)
    driver = _driver_lines(lines)
    print("\n".join(driver))
    print("\n".join(json.dumps(r, sort_keys=True) for r in records))
    assert res.ok, res.describe()
    result = json.load(open(out))
    assert [(r["epoch"], r["start_rank"], r["size"]) for r in records] == [(0, 0, 2)], records
    assert result["results"] is None, result
    h1 = re.escape(nodes.cluster.address("h1"))
    lost = (r"the job failed: its committed state was lost at commit (\d+): the worker\(s\) "
            r"that held it are gone \(worker [01] on %s died \(.*\); worker [01] on %s died "
            r"\(.*\)\), and worker\(s\) 2, 3, which joined later, had not received it; "
            r"tf_hvd does not start a job over from nothing: restart it from a checkpoint of "
            r"your own$" % (h1, h1))
    m = re.match("HorovodInternalError: " + lost, result["error"] or "")
    assert m, result["error"]
    assert int(m.group(1)) >= 4, result["error"]  # epoch 0's 4 commits, then the waits'
    assert driver[0] == _ray_started_line(nodes), driver
    assert re.match("tf_hvd.ray: " + lost, driver[-1]), driver


def test_nothing_left_after_the_nodes_stop(nodes):
    for host in ("h2", "h1"):
        nodes.stop(host)
    time.sleep(1)
    assert {h: nodes.leftovers(h) for h in ("h1", "h2")} == {"h1": [], "h2": []}
