"""Who is in the launcher's elastic jobs: the membership (membership.py: the ranks, the
retired and lost ones, the blacklist, the holders of the committed state), the hosts a
discovery script lists (discovery), hosts that failed (blacklist) and the launcher's
side of re-forming a job (elastic_hosts). The elastic policy that asks them lives beside
the static one (runner/agent/elastic_policy.py). The store's keys and which ranks hold
the committed state are the job contract's (tf_hvd/job/elastic_state.py).

    from tf_hvd.runner.elastic.membership import Membership
    members = Membership(range(2))
"""
