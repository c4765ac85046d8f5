"""Framework integrations: each records every rank, where the W&B ones record rank 0 only.

* ``rankwise.integrations.lightning.RankwiseLogger``: a PyTorch Lightning ``Logger``
  (extra ``rankwise[lightning]``).
* ``rankwise.integrations.transformers.RankwiseCallback``: a Hugging Face ``Trainer``
  callback (extra ``rankwise[transformers]``).
* ``rankwise.integrations.accelerate.RankwiseTracker``: a Hugging Face Accelerate tracker
  (extra ``rankwise[accelerate]``).

Each module imports its framework when it is imported, and nothing here imports any of
them: ``import rankwise`` stays light.
"""
