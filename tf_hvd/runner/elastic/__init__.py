"""The launcher's elastic jobs: its policy (elastic_policy: min-np, the reset limit, the
committed state), the hosts a discovery script lists (discovery), hosts that failed
(blacklist) and the launcher's side of re-forming a job (elastic_hosts). The store's
keys and which ranks hold the committed state are the job contract's
(tf_hvd/job/elastic_state.py).

    from tf_hvd.runner.elastic.discovery import HostDiscovery, wait_for_slots
"""
