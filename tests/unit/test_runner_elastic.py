"""The launcher's elastic command line and machinery without a job: horovodrun's elastic
spellings and defaults, waiting for the discovery script's slots, how many ranks start,
hosts keyed by the name given, a newcomer inside a Slurm allocation started by srun, and
the elastic policy stopping a failed host's other ranks or ending a job whose every rank
failed (the agent and a rank group of real processes: sh and sleep)."""

import argparse

import pytest

from tf_hvd.runner.command_line import parser as cli
from tf_hvd.job import auth
from tf_hvd.runner.command_line import launch_config
from tf_hvd.job import slurm_allocation as slurm
from tf_hvd.runner.elastic.discovery import HostDiscovery, wait_for_slots
from tf_hvd.job.rank_env import RankEnv
from tf_hvd.runner.elastic.elastic_hosts import ElasticHosts
from tf_hvd.runner.elastic.membership import Membership
from tf_hvd.runner.modes.gloo_run import GlooJob, elastic_fields
from tf_hvd.job.host_spec import HostSpecError
from tf_hvd.runner.command_line.plan import Plan
from tf_hvd.job.rendezvous import RendezvousServer
from tf_hvd.runner.agent import agent
from tf_hvd.runner.agent.elastic_policy import ElasticPolicy
from tf_hvd.runner.processes.rank_group import RankGroup


def _parse(*flags):
    return cli.parse(["-np", "2"] + list(flags) + ["python", "x.py"])


def test_horovodrun_elastic_spellings_and_defaults(monkeypatch):
    monkeypatch.delenv("HOROVOD_ELASTIC_TIMEOUT", raising=False)
    a = _parse("--min-num-proc", "1", "--max-num-proc", "5")
    assert (a.min_np, a.max_np, a.elastic_timeout) == (1, 5, 600.0)
    a = _parse("--host-discovery-script", "./d.sh")  # elastic: min-np = -np, no max
    assert (a.min_np, a.max_np) == (2, None)
    monkeypatch.setenv("HOROVOD_ELASTIC_TIMEOUT", "42")
    assert _parse("--min-np", "1").elastic_timeout == 42.0
    assert _parse("--min-np", "1", "--elastic-timeout", "7").elastic_timeout == 7.0
    monkeypatch.setenv("HOROVOD_ELASTIC_TIMEOUT", "soon")
    with pytest.raises(cli.UsageError) as info:
        _parse("--min-np", "1")
    assert str(info.value) == ("HOROVOD_ELASTIC_TIMEOUT='soon' is not a valid value: expected "
                               "a non-negative number of seconds up to 1000000")
    monkeypatch.delenv("HOROVOD_ELASTIC_TIMEOUT")
    with pytest.raises(cli.UsageError) as info:
        _parse("--max-np", "4")
    assert str(info.value) == ("--max-np and --reset-limit need --min-np or "
                               "--host-discovery-script (an elastic run)")
    assert RankEnv(**elastic_fields(30, 2)).to_environ() == {
        "HOROVOD_ELASTIC": "1", "TF_HVD_ELASTIC_TIMEOUT": "30", "TF_HVD_ELASTIC_MIN_NP": "2"}


def _script(tmp_path, text, name="discover.sh"):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def test_discovered_hosts_are_keyed_by_the_name_given(tmp_path):
    d = HostDiscovery(_script(tmp_path, "echo localhost:2\necho 127.0.0.1:2\necho h3\n"
                                        "echo h3:2\n"), slots_per_host=3)
    assert d.run() == [("localhost", 2), ("127.0.0.1", 2), ("h3", 5)]


def test_waiting_for_slots_polls_until_enough_then_times_out_naming_what_it_found(tmp_path):
    outputs = iter([[("a", 1)], [("a", 1)], [("a", 1), ("b", 2)]])
    fake = argparse.Namespace(run=lambda: next(outputs), interval=0.5, script="./d.sh")
    now = [0.0]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    assert wait_for_slots(fake, 3, 10, sleep=sleep, clock=lambda: now[0]) == \
        [("a", 1), ("b", 2)]
    assert sleeps == [0.5, 0.5]
    fake.run = lambda: [("a", 1)]
    with pytest.raises(HostSpecError) as info:
        wait_for_slots(fake, 3, 2, sleep=sleep, clock=lambda: now[0])
    assert str(info.value) == ("host discovery: waited 2 s (--elastic-timeout) for 3 "
                               "slot(s), the script ./d.sh lists 1 (a:1)")
    failing = HostDiscovery(_script(tmp_path, "echo oops >&2\nexit 3\n", "bad.sh"))
    with pytest.raises(HostSpecError) as info:
        wait_for_slots(failing, 1, 10)
    assert str(info.value).startswith("host discovery script %s failed: " % failing.script)
    assert str(info.value).endswith("returned non-zero exit status 3.: oops")


def test_a_job_placed_by_its_script_starts_as_many_ranks_as_slots_allow(monkeypatch):
    monkeypatch.delenv("HOROVOD_ELASTIC_TIMEOUT", raising=False)
    for max_np, expected in ((None, 5), ("4", 4), ("2", 2)):
        flags = ["--host-discovery-script", "./d.sh"] + (["--max-np", max_np] if max_np
                                                          else [])
        plan = Plan(launch_config.freeze(_parse(*flags), {}, [("localhost", 2),
                                                               ("127.0.0.1", 3)]),
                    check_command=None)
        assert len(plan.slots) == expected
        assert [(s.hostname, s.local_rank, s.local_size) for s in plan.slots][:3] == \
            [("localhost", 0, 2), ("localhost", 1, 2), ("127.0.0.1", 0, min(3, expected - 2))
             ][:expected]


class _Job(object):
    """The mode's side of a run (static_policy.py), without a rendezvous."""

    launcher = start_timeout = server = None

    def __init__(self, starts, config):
        self._starts, self.size, self.config = starts, len(starts), config

    def prepare(self, restart):
        return None

    def starts(self, restart):
        return iter(self._starts)

    def fault_records(self):
        return {}

    def ended(self, outcome):
        pass

    def close(self):
        pass


class _Hosts(object):
    """ElasticHosts' part when a rank is lost: with ``stop_host``, stop its host's other
    ranks (as blacklisting it does); no discovery, no committed state to lose."""

    def __init__(self, policy, stop_host):
        self.policy, self.stop_host = policy, stop_host

    def rank_lost(self, proc):
        if not self.stop_host:
            return []
        members = self.policy.members
        others = members.retire([p for p in members.ranks if p.host == proc.host
                                 and p is not proc])
        yield agent.Stop(others)
        return ["blacklisting %s" % proc.host]

    def state_lost(self):
        return None

    def tick(self):
        return None
        yield


def _elastic_run(min_np, ranks, stop_host):
    """Run ``ranks`` ((rank, host, shell code)) under the elastic policy: (RunOutcome,
    the ranks' return codes, the lines logged)."""
    config = launch_config.LaunchConfig(
        elastic=launch_config.ElasticSettings(min_np, timeout=600))
    starts = [agent.Start(r, h, ["sh", "-c", code], {"PATH": "/usr/bin:/bin"}, None, None,
                          None, None) for r, h, code in ranks]
    logged = []
    policy = ElasticPolicy(_Job(starts, config), grace=2.0, log=logged.append)
    policy._prepared = lambda: setattr(policy, "hosts", _Hosts(policy, stop_host))
    group = RankGroup(argparse.Namespace(pop_all=lambda: [], pending=lambda: False), 2.0)
    outcome = agent.run(None, group, policy)
    return outcome, [p.returncode for p in group.ranks], logged


def test_a_failed_rank_s_host_has_its_other_ranks_stopped_and_the_job_goes_on():
    outcome, codes, logged = _elastic_run(1, [(0, "a", "sleep 0.3; exit 3"),
                                              (1, "a", "exec sleep 30"),
                                              (2, "b", "sleep 2")], stop_host=True)
    assert outcome.code == 0
    assert codes == [3, -15, 0]
    assert logged == ["rank 0 (on a) exited with code 3; the job goes on with the 1 rank(s) "
                      "left (elastic reset 1)", "blacklisting a"]


def test_an_elastic_job_whose_every_rank_failed_ends_at_once_naming_each():
    outcome, codes, logged = _elastic_run(2, [(0, "a", "sleep 0.2; exit 3"),
                                              (1, "b", "sleep 1; exit 4")], stop_host=False)
    # not after --elastic-timeout (600 s): the test would time out
    assert (outcome.code, codes) == (3, [3, 4])
    assert logged == [
        "rank 0 (on a) exited with code 3; 1 rank(s) left, fewer than --min-np 2: waiting "
        "up to 600 s (--elastic-timeout)",
        "rank 1 (on b) exited with code 4; no rank is left: stopping the job (every rank "
        "failed or was stopped)",
        "the job failed: every rank failed or was stopped: rank 0 (on a) exited with code 3; "
        "rank 1 (on b) exited with code 4"]
    assert outcome.why == logged[-1]


def test_a_newcomer_inside_a_slurm_allocation_is_started_by_srun_with_its_environment(
        monkeypatch, tmp_path):
    """tfhvdrun --host-discovery-script inside sbatch: a rank the script adds on another
    node starts with srun (as the job's first ranks do), its variables and the secret in
    srun's environment (srun carries them to the node), nothing on its stdin."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "h[1-2]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x2)")
    for name in ("SLURM_STEP_ID", "SLURM_STEPID", "TF_HVD_SLURM_LAUNCH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(slurm, "srun_path", lambda: "/usr/bin/srun")
    a = launch_config.freeze(_parse("--min-np", "2", "--host-discovery-script", "./d.sh"),
                             {}, [("h1", 2)])
    plan = Plan(a, is_local=lambda h: h == "h1", check_command=None)
    assert plan.remote_launcher == "srun"
    server = RendezvousServer(secret=auth.new_secret())
    spawned = []
    group = argparse.Namespace(
        signals=argparse.Namespace(pending=lambda: False),
        start=lambda rank, host, argv, env, cwd, out, stdin_data=None, redact=None:
        spawned.append((rank, host, argv, env, stdin_data)) or rank)
    job = GlooJob(plan)
    job.server, job.secret = server, server.secret  # as its prepare() leaves them
    assert agent.carry_out(group, ElasticHosts(job, Membership())._start(2, "h2"))
    ((rank, host, argv, env, stdin_data),) = spawned
    assert (rank, host, stdin_data) == (2, "h2", None)
    assert argv[:4] == ["/usr/bin/srun", "--nodes=1", "--ntasks=1", "--nodelist=h2"]
    assert argv[-2:] == ["python", "x.py"]
    assert env[auth.SECRET_ENV] == server.secret
    assert (env["HOROVOD_RANK"], env["TF_HVD_ELASTIC_ID"], env["TF_HVD_ELASTIC_JOIN"],
            env["HOROVOD_HOSTNAME"], env["TF_HVD_ELASTIC_HOST"]) == ("2", "2", "1", "h2", "h2")
