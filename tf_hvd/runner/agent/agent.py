"""The run phase: one agent carries out what a policy decides about a group of ranks.

    outcome = agent.run(plan, group, policy)    # a RunOutcome, in every mode

The group (processes/rank_group.py: one process per rank, started here, over ssh or by
srun; processes/mpiexec_group.py: one mpiexec) starts, polls, signals and stops processes
and decides nothing. At each poll it reports events (processes/events.py):
``Signalled(signum)``, then ``Tick()``, then ``RankExited(rank)`` per rank that ended.
The policy decides everything (static_policy.py: failures, the launcher's signals,
--max-restarts; elastic_policy.py: an elastic job's hosts, min-np, reset limit
and committed state); the agent carries out its actions on the group, and nothing else.

A policy has three methods:

* ``begin(plan)``: a generator of the run's first actions (Start...); returns a
  RunOutcome when the run ends before it began (a rank could not start), else None;
* ``answer(event)``: a generator of the actions answering one event;
* ``end(outcomes, ended)``: once no rank runs (``outcomes``: the group's
  failures.Outcome list; ``ended``: what ``begin`` returned), the run's RunOutcome, or
  RESTART to begin again with a fresh group.

Inside a generator each ``yield ACTION`` evaluates to the action's result (the Rank a
Start started, None when a signal came first) or raises the OSError it raised.
Actions: Start (one rank), Stop (SIGTERM ``term_in`` s from now, SIGKILL at ``kill_in``),
Forward (the launcher's signal to every rank), Kill (SIGKILL now) and Abort (stop the
ranks started so far, wait for them).

A new kind of event (a rank whose core stopped answering, say) is reported by the group
or read by the policy at Tick, answered by the policy with these actions (Stop the job),
and named by ``end`` in the RunOutcome's report.
"""

import collections

RESTART = "restart"


class Start(collections.namedtuple("Start", ["rank", "host", "argv", "env", "cwd",
                                             "output_dir", "stdin_data", "redact"])):
    """Start one rank (the Rank, or None: a signal came, no more ranks start)."""

    def apply(self, group):
        return None if group.signals.pending() else group.start(*self)


class Stop(collections.namedtuple("Stop", ["ranks", "term_in", "kill_in"])):
    """SIGTERM ``ranks`` ``term_in`` s from now; SIGKILL ``kill_in`` s from now (None:
    the group's grace after the SIGTERM) if they still run."""

    def __new__(cls, ranks, term_in=0.0, kill_in=None):
        return super(Stop, cls).__new__(cls, list(ranks), term_in, kill_in)

    def apply(self, group):
        group.stop(self.ranks, self.term_in, self.kill_in)


class Forward(collections.namedtuple("Forward", ["signum"])):
    """The launcher's signal to every running rank; SIGKILL the group's grace later."""

    def apply(self, group):
        group.forward(self.signum)


class Kill(collections.namedtuple("Kill", [])):
    def apply(self, group):
        group.kill()


class Abort(collections.namedtuple("Abort", [])):
    """Stop the ranks started so far and wait for them (a later one cannot start)."""

    def apply(self, group):
        group.abort()


def carry_out(group, answer):
    """Carry out the actions the generator ``answer`` yields, sending each one's result
    back into it; return what it returns."""
    result, error = None, None
    while True:
        try:
            action = answer.send(result) if error is None else answer.throw(error)
        except StopIteration as stop:
            return stop.value
        result, error = None, None
        try:
            result = action.apply(group)
        except OSError as e:
            error = e


def run(plan, group, policy):
    """Run the job of ``plan`` on ``group`` as ``policy`` decides; return its RunOutcome.
    ``group`` is a RankGroup or an MpiexecGroup; it is cleaned up before each end."""
    while True:
        ended = carry_out(group, policy.begin(plan))
        while ended is None:
            for event in group.events():
                carry_out(group, policy.answer(event))
            if not group.running():
                break
        group.cleanup()
        outcome = policy.end(group.outcomes(), ended)
        if outcome is not RESTART:
            return outcome
        group.clear()
