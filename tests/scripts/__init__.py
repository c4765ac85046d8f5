"""Programs the tests run in subprocesses (training jobs, launchers, lifecycle
scenarios) and ``health_nvml/``, a fake NVML put on such a program's path. The
modules the tests import live in ``tests/helpers/``."""
