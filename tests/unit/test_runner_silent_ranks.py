"""The launcher and ranks that stopped answering (tf_hvd/job/silent_ranks.py,
the static policy's _kill_silent): named from the others' "silent" fault records, killed
at once with SIGKILL (no SIGTERM, no grace), not waited for under mpiexec."""

from tf_hvd.runner.agent import static_policy
from tf_hvd.runner.agent.agent import Stop
from tf_hvd.job import silent_ranks
from tf_hvd.runner.processes import failures
from tf_hvd.runner.processes.events import Tick
from tf_hvd.runner.processes.failures import Outcome

MESSAGE = ("rank 1 (on h2) stopped answering: its core sent no liveness proof for 20 s "
           "(HOROVOD_PEER_TIMEOUT_SECONDS=20); its process is frozen (stopped, hung or "
           "swapped out) or its host is cut off from this one")


def _silent(culprit=1, message=MESSAGE):
    return failures.FaultRecord(culprit, "silent", message)


def test_silent_ranks_come_from_the_lowest_reporter_and_never_name_themselves():
    other = _silent(1, MESSAGE.replace("20 s", "21 s"))
    records = {2: other, 0: _silent(), 1: _silent(1), 3: failures.FaultRecord(1, "lost", "")}
    assert silent_ranks.silent(records) == {1: _silent()}
    assert silent_ranks.silent({0: failures.FaultRecord(1, "lost", "x")}) == {}


def test_a_killed_silent_rank_is_named_with_its_host_and_bound():
    outcomes = [Outcome(0, "h1", 1, 1.5, 1.4), Outcome(1, "h2", -9, 1.0, None),
                Outcome(2, "h1", 1, 1.6, 1.45)]
    records = {0: _silent(), 2: failures.FaultRecord(0, "lost", "closed")}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert root.rank == 1 and consequences == [0, 2]
    assert failures.describe_blame(root, consequences, first_exit, records) == (
        "rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s) and was "
        "killed (SIGKILL); ranks 0, 2 stopped in consequence")
    assert failures.exit_code_of(root, -9, first_exit, records) == 128 + 9


def test_a_silent_rank_that_never_ended_is_named_under_mpiexec():
    # mpiexec: rank 1's host is cut off, its status never comes; rank 0 failed because of it
    outcomes = [Outcome(0, None, 1, 1.5, 1.4)]
    records = {0: _silent()}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert (root.rank, root.returncode, consequences) == (1, None, [0])
    assert failures.describe_blame(root, consequences, first_exit, records) == (
        "rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s); "
        "rank 0 stopped in consequence")
    assert failures.exit_code_of(root, 1, first_exit, records) == 1


class _Rank(object):
    def __init__(self, rank):
        self.rank, self.returncode, self.host = rank, None, "h"


class _Job(object):
    launcher = None
    size = 3

    def __init__(self):
        self.records = {}

    def fault_records(self):
        return dict(self.records)


def test_the_policy_sigkills_a_silent_rank_once_at_the_first_record():
    job = _Job()
    policy = static_policy.StaticPolicy(job)
    for rank in (_Rank(0), _Rank(1), _Rank(2)):
        policy.members.started(rank)
    assert list(policy.answer(Tick())) == []
    job.records = {0: _silent()}
    policy.silence_read = 0.0
    actions = list(policy.answer(Tick()))
    assert actions == [Stop([policy.ranks[1]], term_in=static_policy.NEVER_S, kill_in=0.0)]
    job.records[2] = _silent()
    policy.silence_read = 0.0
    assert list(policy.answer(Tick())) == []  # killed once
    policy.ranks[1].returncode = -9
    assert policy._describe_lost(policy.ranks[1]) == (
        "rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s) and was "
        "killed (SIGKILL)")


def test_under_mpiexec_no_rank_is_killed_alone():
    job = _Job()
    job.launcher = "mpiexec"
    policy = static_policy.StaticPolicy(job)
    policy.members.started(_Rank(None))
    job.records = {0: _silent()}
    assert list(policy.answer(Tick())) == []


def test_a_partition_seen_from_both_sides_names_the_side_away_from_the_launcher():
    # np=2 under mpiexec, h2 cut off: both ranks declared each other silent and both
    # records reached the launcher (a shared status directory); rank 1 exited first
    theirs = _silent(0, MESSAGE.replace("rank 1 (on h2)", "rank 0 (on h1)"))
    records = {0: _silent(), 1: theirs}
    assert silent_ranks.silent(records, here={"h1"}) == {1: _silent()}
    assert silent_ranks.silent(records, here={"elsewhere"}) == {1: _silent()}  # higher rank
    # a third rank that also lost rank 1 outweighs the launcher's side
    records3 = {0: _silent(), 1: theirs, 2: _silent()}
    assert silent_ranks.silent(records3, here={"h2"}) == {1: _silent()}
    outcomes = [Outcome(0, None, 1, 1.5, 1.4), Outcome(1, None, 1, 1.2, 1.1)]
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert root.rank == 1 and consequences == [0]
    assert failures.describe_blame(root, consequences, first_exit, records).startswith(
        "rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s)")


def test_one_way_loss_is_named_as_such():
    rec = _silent(1, "rank 1 (on h2) stopped answering: it has received no liveness proof "
                     "from this rank for 20 s (HOROVOD_PEER_TIMEOUT_SECONDS) although its own "
                     "arrive: the network drops what goes from this host to its host "
                     "(one-way loss)")
    assert silent_ranks.describe(1, -9, rec) == (
        "rank 1 (on h2) stopped answering (it received no liveness proof from the others for "
        "20 s: one-way loss) and was killed (SIGKILL)")


def test_an_elastic_job_maps_the_cores_ranks_to_its_processes_after_a_re_form():
    from tf_hvd.runner.agent.elastic_policy import ElasticPolicy
    from tf_hvd.job import elastic_state

    class Store(dict):
        def get(self, key):
            return dict.get(self, key)

    job = _Job()
    job.server = type("Server", (), {"store": Store()})()
    policy = ElasticPolicy.__new__(ElasticPolicy)
    policy.job = job
    assert policy._launcher_ranks({1: None}) == {1: 1}  # as started
    # process 0 was lost: the job re-formed as processes 1 and 2, now core ranks 0 and 1
    job.server.store[elastic_state.ROUND_KEY] = b"1"
    job.server.store[elastic_state.round_key(1, "members")] = b"1,2"
    assert policy._launcher_ranks({1: None, 5: None}) == {1: 2}
