"""Evaluate the model ``ddp_mnist_tutorial.py`` logged, as a run of its own.

``run.use_model("mnist-cnn:final")`` downloads the weights (checked against their
digests) and records that this run used that version (its lineage: the Artifacts page
shows which run logged it and which runs used it). Run it after the tutorial::

    python examples/ddp_mnist_eval.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from ddp_mnist_tutorial import Net, datasets
from torch.utils.data import DataLoader

import rankwise


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--project", default="mnist-tutorial")
    p.add_argument("--model", default="mnist-cnn:final")
    p.add_argument("--seed", type=int, default=0, help="the tutorial's (same test split)")
    args = p.parse_args()

    run = rankwise.init(project=args.project, job_type="eval", config=vars(args))
    model = Net()
    model.load_state_dict(torch.load(run.use_model(args.model), weights_only=True))
    model.eval()
    trained = run.use_artifact("mnist-accuracies:latest")
    reported = json.loads(Path(trained.download(), "accuracies.json").read_text())

    _, test = datasets(args.seed)
    correct = total = 0
    with torch.no_grad():
        for xb, yb, _ids in DataLoader(test, batch_size=256):
            correct += int((model(xb).argmax(dim=1) == yb).sum())
            total += len(yb)
    accuracy = correct / max(total, 1)
    run.summary["eval/accuracy"] = accuracy
    run.summary["train/reported_accuracy"] = reported["epoch_accuracy"][-1]
    run.finish()
    print(f"eval run {run.project}/{run.id}: accuracy {accuracy:.4f} on {total} test digits")


if __name__ == "__main__":
    main()
