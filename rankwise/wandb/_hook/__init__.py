"""The start-up hook of ``python -m rankwise.wandb``: this directory goes on the
``PYTHONPATH`` of every process the program starts, where ``site`` imports its
``sitecustomize`` (``rankwise/wandb/_hook/sitecustomize.py``) before any user code. See
``rankwise.wandb.launch``."""
