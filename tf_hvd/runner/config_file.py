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

An entry whose flag this build of tfhvdrun does not have (``num_nccl_streams`` without
the GPU flags, ``ccl_bgt_affinity``: tf_hvd has no oneCCL) is reported as a usage error,
as are unknown sections, unknown keys and values of the wrong type: a mistyped file
never passes silently.
"""

import argparse

from .args import UsageError

# section -> {key: dest of the flag it sets}; None: the section is one value.
_SCHEMA = {
    "controller": None,
    "params": {
        "fusion_threshold_mb": "fusion_threshold_mb",
        "cycle_time_ms": "cycle_time_ms",
        "cache_capacity": "cache_capacity",
        "hierarchical_allreduce": "hierarchical_allreduce",
        "hierarchical_allgather": "hierarchical_allgather",
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


def _actions_by_dest(parser):
    return {a.dest: a for a in parser._actions if a.option_strings}


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


def apply(args, path, given):
    """Set ``args``' attributes from the file at ``path``, except the dests in ``given``
    (flags given on the command line). Raises UsageError."""
    from .args import build_parser
    data = _load(path)
    actions = _actions_by_dest(build_parser())
    for section, body in data.items():
        if section not in _SCHEMA:
            raise UsageError("--config-file %s: unknown section %r (known: %s)"
                             % (path, section, ", ".join(sorted(_SCHEMA))))
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
            if dest is None:
                raise UsageError("%s: unknown key (known in %s: %s)"
                                 % (where, section, ", ".join(sorted(_SCHEMA[section]))))
            if dest in given:
                continue  # the command line wins
            action = actions.get(dest)
            if action is None:
                raise UsageError("%s: not supported by this tfhvdrun" % where)
            if value is None:
                continue
            converted = _convert(action, value, where)
            if (section, key) in _INVERTED:
                converted = not converted
            setattr(args, dest, converted)
