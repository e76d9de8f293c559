"""The launcher's run phase: the agent (agent.py) carries out what a policy decides
about a group of rank processes (processes/), and every mode's run ends in one
RunOutcome (outcome.py). The two policies live here side by side: static_policy.py (a
job of fixed size) and elastic_policy.py (an elastic one, built on it); both ask and
tell the job's Membership (elastic/membership.py) who is in the job.

The loop, its actions and RunOutcome sit below the elastic room; the policies above it
(tests/unit/test_api_imports.py's LAYERS).

    from tf_hvd.runner.agent import agent
    outcome = agent.run(plan, group, policy)
"""
