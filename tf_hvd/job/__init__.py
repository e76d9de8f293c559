"""The job contract: what a launcher and the ranks it starts agree on.

Below both the launchers (tfhvdrun in tf_hvd.runner, Ray in tf_hvd.ray) and the library
(tf_hvd.elastic, the scheduler resolver, the data service); free of TensorFlow, and
importing nothing else of tf_hvd.

* rank_env: one rank's environment as one value (RankEnv) and every variable's name;
* knob_rules: the knob table's rules for the few knobs read outside the core;
* rendezvous, auth, secret: the key-value store where ranks meet, its signed requests,
  and the secret of a job no launcher started;
* job_server: that store served by a driver for the ranks it starts (Ray, Spark);
* network, placement, slurm_hostlist: which host is this one and how to reach others,
  which rank goes where, Slurm's host lists;
* the rank side every launcher shares: fault_record and silent_ranks (what the cores
  report), failure_report (the root cause first, with host and pid), rank_function (a
  rank's function run once for all), parent_death, output_prefix, rank_names.

    >>> from tf_hvd.job.rank_env import RankEnv
    >>> RankEnv(rank=0, size=2).to_environ()
    {'HOROVOD_RANK': '0', 'HOROVOD_SIZE': '2'}
"""
