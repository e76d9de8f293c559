"""The launcher's run phase: the agent (agent.py) carries out what a policy decides
(static_policy.py; the elastic one is elastic/elastic_policy.py) about a group of rank
processes (processes/), and every mode's run ends in one RunOutcome (outcome.py).

    from tf_hvd.runner.agent import agent
    outcome = agent.run(plan, group, policy)
"""
