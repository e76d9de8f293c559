"""The launcher's elastic jobs: the hosts a discovery script lists (discovery), hosts
that failed (blacklist), which ranks hold the committed state (state_holders), and the
launcher's side of re-forming a job (elastic_hosts).

    from tf_hvd.runner.elastic.discovery import HostDiscovery, wait_for_slots
"""
