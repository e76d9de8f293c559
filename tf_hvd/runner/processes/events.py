"""What a group of processes reports to the agent (runner/agent/agent.py) at each poll.

    for event in group.events():    # Signalled..., RankExited..., then one Tick
        policy.answer(event)
"""

import collections

# The launcher received ``signum`` (SIGINT/SIGTERM/SIGHUP: signals.py).
Signalled = collections.namedtuple("Signalled", ["signum"])
# ``rank`` (the group's Rank, or a failures.Outcome for a rank it did not start itself)
# ended; its ``returncode`` is set.
RankExited = collections.namedtuple("RankExited", ["rank"])
# One poll of the group is over (every poll_interval seconds while the job runs).
Tick = collections.namedtuple("Tick", [])
