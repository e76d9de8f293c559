# A stand-in seen by test jobs only (tests/jobrunner.py base_env): "pandas" is not installed.
raise ModuleNotFoundError("No module named 'pandas' (hidden from this test job by "
                          "tests/optional_hidden; see tests/jobrunner.py)", name="pandas")
