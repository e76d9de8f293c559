"""``tfhvdrun --config-file FILE``: horovodrun's YAML parameter file.

The schema is horovodrun's; each entry sets the flag of the same meaning, unless that
flag was given on the command line (the command line wins)::

    controller: gloo                 # or mpi (like --gloo / --mpi)
    params:
      fusion_threshold_mb: 32        # --fusion-threshold-mb
      cycle_time_ms: 2               # --cycle-time-ms
      cache_capacity: 512            # --cache-capacity
    autotune:
      enabled: true                  # --autotune
      log_file: /tmp/autotune.csv    # --autotune-log-file
      warmup_samples: 3              # --autotune-warmup-samples
      steps_per_sample: 10           # --autotune-steps-per-sample
      bayes_opt_max_samples: 20      # --autotune-bayes-opt-max-samples
      gaussian_process_noise: 0.8    # --autotune-gaussian-process-noise
    timeline:
      filename: /tmp/timeline.json   # --timeline-filename
      mark_cycles: true              # --timeline-mark-cycles
    stall_check:
      enabled: true                  # false: --no-stall-check
      warning_time_seconds: 60       # --stall-check-warning-time-seconds
      shutdown_time_seconds: 0       # --stall-check-shutdown-time-seconds
    library_options:
      mpi_threads_disable: false     # --mpi-threads-disable
      gloo_timeout_seconds: 30       # --gloo-timeout-seconds
      thread_affinity: 0             # --thread-affinity
    logging:
      level: WARNING                 # --log-level
      with_timestamp: true           # --log-with-timestamp / --log-without-timestamp

As horovodrun, tfhvdrun ignores sections and keys it does not know, but it names each
in a warning (``tfhvdrun: warning: --config-file F: unknown key params.fusion_treshold``)
so that a typo does not pass silently; ``ccl_bgt_affinity`` (tf_hvd has no oneCCL) is
ignored the same way. A known key with a value of the wrong type is a usage error.
"""

import argparse

from .usage import UsageError

# section -> {key: dest of the flag it sets}; None: the section is one value.
_SCHEMA = {
    "controller": None,
    "params": {
        "fusion_threshold_mb": "fusion_threshold_mb",
        "cycle_time_ms": "cycle_time_ms",
        "cache_capacity": "cache_capacity",
        "hierarchical_allreduce": "hierarchical_allreduce",
        "hierarchical_allgather": "hierarchical_allgather",
        "torus_allreduce": "torus_allreduce",
    },
    "autotune": {
        "enabled": "autotune",
        "log_file": "autotune_log_file",
        "warmup_samples": "autotune_warmup_samples",
        "steps_per_sample": "autotune_steps_per_sample",
        "bayes_opt_max_samples": "autotune_bayes_opt_max_samples",
        "gaussian_process_noise": "autotune_gaussian_process_noise",
    },
    "timeline": {
        "filename": "timeline_filename",
        "mark_cycles": "timeline_mark_cycles",
    },
    "stall_check": {
        "enabled": "no_stall_check",  # inverted below
        "warning_time_seconds": "stall_check_warning_time_seconds",
        "shutdown_time_seconds": "stall_check_shutdown_time_seconds",
    },
    "library_options": {
        "mpi_threads_disable": "mpi_threads_disable",
        "num_nccl_streams": "num_nccl_streams",
        "ccl_bgt_affinity": "ccl_bgt_affinity",
        "gloo_timeout_seconds": "gloo_timeout_seconds",
        "thread_affinity": "thread_affinity",
    },
    "logging": {
        "level": "log_level",
        "with_timestamp": "log_with_timestamp",
    },
}

_INVERTED = {("stall_check", "enabled")}


def _load(path):
    try:
        import yaml
    except ImportError:
        raise UsageError("--config-file needs PyYAML (pip install pyyaml)")
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise UsageError("--config-file %s: %s" % (path, e.strerror or e))
    except yaml.YAMLError as e:
        raise UsageError("--config-file %s: not valid YAML: %s" % (path, " ".join(str(e).split())))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError("--config-file %s: expected a mapping of sections, got %s"
                         % (path, type(data).__name__))
    return data


def _convert(action, value, where):
    """The value a flag would hold: bool flags take YAML booleans, others their type."""
    if action.nargs == 0:  # store_true / store_const flags
        if not isinstance(value, bool):
            raise UsageError("%s: expected true or false, got %r" % (where, value))
        return value
    if isinstance(value, (dict, list)) or value is None:
        raise UsageError("%s: expected a single value, got %r" % (where, value))
    text = str(value)
    try:
        converted = action.type(text) if action.type else text
    except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
        raise UsageError("%s: %s" % (where, e))
    if action.choices is not None and converted not in action.choices:
        raise UsageError("%s: %r is not one of %s" % (where, value, ", ".join(action.choices)))
    return converted


def apply(args, path, given, actions):
    """Set ``args``' attributes from the file at ``path``, except the dests in ``given``
    (flags given on the command line); ``actions`` maps a dest to its flag's argparse
    action. Returns the warnings (lines) for what it ignored. Raises UsageError."""
    data = _load(path)
    warnings = []
    for section, body in data.items():
        if section not in _SCHEMA:
            warnings.append("warning: --config-file %s: unknown section %r ignored (known: "
                            "%s)" % (path, section, ", ".join(sorted(_SCHEMA))))
            continue
        if section == "controller":
            if "mode" in given or body is None:
                continue
            if str(body).lower() not in ("gloo", "mpi"):
                raise UsageError("--config-file %s: controller %r: expected gloo or mpi"
                                 % (path, body))
            args.mode = str(body).lower()
            continue
        if body is None:
            continue
        if not isinstance(body, dict):
            raise UsageError("--config-file %s: section %r must be a mapping"
                             % (path, section))
        for key, value in body.items():
            where = "--config-file %s: %s.%s" % (path, section, key)
            dest = _SCHEMA[section].get(key)
            action = actions.get(dest)
            if action is None:
                warnings.append("warning: %s: %s ignored (known in %s: %s)" % (
                    where, "unknown key" if dest is None else "not supported by tf_hvd",
                    section, ", ".join(sorted(k for k, d in _SCHEMA[section].items()
                                              if d in actions))))
                continue
            if dest in given:
                continue  # the command line wins
            if value is None:
                continue
            converted = _convert(action, value, where)
            if (section, key) in _INVERTED:
                converted = not converted
            setattr(args, dest, converted)
    return warnings
