"""tfhvdrun's command line, from argv to a Plan: the parser (flags, Horovod's names),
the --config-file, Horovod parity notices, the checks, the tuning flags as knobs
(knob_flags), one frozen LaunchConfig (launch_config) and the Plan built from it.

    from tf_hvd.runner.command_line.plan import read_command_line
    config, plan = read_command_line(["-np", "2", "python", "train.py"])
"""
