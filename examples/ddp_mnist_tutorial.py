"""The MNIST DDP tutorial, tracked by rankwise on every rank, on scikit-learn's digits.

The flow of the usual "MNIST with DistributedDataParallel" tutorial (and of W&B's
PyTorch integration notebook), on the 8x8 digits that ship with scikit-learn (nothing is
downloaded). Run it with torchrun::

    torchrun --nproc-per-node=2 examples/ddp_mnist_tutorial.py --epochs 5
    rankwise ui          # then open the run: Charts, Media, Tables, Histograms, Logs

``make demo`` runs it (5 epochs, about a minute on 2 CPU cores) and serves the result.

Every rank records into one shared run (``run_mode="shared"``):

* a small CNN trained with a ``DistributedSampler`` (each rank its shard), DDP averaging
  the gradients;
* ``run.watch(model)``: 64-bin histograms of each parameter's gradients every
  ``--watch-freq`` steps (the Histograms tab) and each layer's gradient norm as plain
  scalars (a cross-rank band on the Charts tab);
* ``train/loss`` per logged step, weighted by the batch size;
* per epoch, on the rank's shard of the test set: ``test_loss`` and ``accuracy``
  (weighted by the samples seen, so the cross-rank mean is the true one), a gallery of
  the first test images with their guesses, and the predictions table
  ``(id, image, guess, truth, score_0 ... score_9)`` for the first ``--table-batches``
  test batches, with the images as table cells;
* a console line per epoch on every rank (the Logs tab);
* at the end, on the primary rank, two artifacts: the trained weights
  (``run.log_model``, artifact ``mnist-cnn``, alias ``final``) and the per-epoch
  accuracies over the whole test set (``run.log_artifact``, ``mnist-accuracies``).
  ``examples/ddp_mnist_eval.py`` then evaluates the model it gets with ``use_model``.

gloo is used on CPU and nccl on GPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import rankwise

CLASSES = 10


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--test-batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1.0, help="Adadelta's, as in the tutorial")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-interval", type=int, default=5, help="steps between train/loss logs")
    p.add_argument("--watch-freq", type=int, default=10, help="run.watch's log_freq")
    p.add_argument("--table-batches", type=int, default=2, help="test batches in the table")
    p.add_argument("--gallery", type=int, default=16, help="test images in the gallery")
    p.add_argument("--project", default="mnist-tutorial")
    p.add_argument("--run-id", default=None)
    p.add_argument("--out", default="mnist-out", help="where the model and accuracies go")
    return p.parse_args()


class Net(nn.Module):
    """The tutorial's CNN, sized for 8x8 images: two conv layers, dropout, two linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return self.fc2(F.relu(self.fc1(x)))


def datasets(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Digits as (N, 1, 8, 8) floats in [0, 1], with each test image's index as its id."""
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 1, 8, 8)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    train = TensorDataset(torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train))
    ids = torch.arange(len(y_test))
    test = TensorDataset(torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test), ids)
    return train, test


def predictions_table() -> rankwise.Table:
    return rankwise.Table(
        columns=["id", "image", "guess", "truth", *[f"score_{i}" for i in range(CLASSES)]]
    )


def evaluate(
    model: nn.Module, loader: DataLoader, device: torch.device, args: argparse.Namespace
) -> tuple[float, int, int, rankwise.Table, list[rankwise.Image]]:
    """Summed loss, correct, total on this rank's shard; the table and gallery of its
    first batches (the tutorial's ``log_test_predictions``)."""
    model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    table = predictions_table()
    gallery: list[rankwise.Image] = []
    with torch.no_grad():
        for batch, (xb, yb, ids) in enumerate(loader):
            xb, yb = xb.to(device), yb.to(device)
            out = model(xb)
            loss_sum += float(F.cross_entropy(out, yb, reduction="sum"))
            guess = out.argmax(dim=1)
            correct += int((guess == yb).sum())
            total += len(yb)
            if batch < args.table_batches:
                scores = F.softmax(out, dim=1).cpu().numpy()
                images = xb.cpu().numpy()[:, 0]  # (B, 8, 8) floats in [0, 1]
                for i in range(len(yb)):
                    image = rankwise.Image(images[i])
                    table.add_data(
                        int(ids[i]), image, int(guess[i]), int(yb[i]), *map(float, scores[i])
                    )
                    if len(gallery) < args.gallery:
                        caption = f"id {int(ids[i])}: guess {int(guess[i])}, truth {int(yb[i])}"
                        gallery.append(rankwise.Image(images[i], caption=caption))
    return loss_sum, correct, total, table, gallery


def save_artifacts(
    run: rankwise.Run, model: nn.Module, accuracies: list[float], args: argparse.Namespace
) -> None:
    """The primary rank's files, logged as artifacts: they are hashed and stored in the
    background; finish() waits for them."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.module.state_dict(), out / "model.pt")
    (out / "accuracies.json").write_text(json.dumps({"epoch_accuracy": accuracies}))
    run.log_model(out / "model.pt", name="mnist-cnn", aliases=["final"])
    results = rankwise.Artifact(
        "mnist-accuracies", type="results", metadata={"epochs": args.epochs}
    )
    results.add_file(out / "accuracies.json")
    run.log_artifact(results)


def main() -> None:
    args = parse_args()
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)

    run = rankwise.init(
        project=args.project,
        id=args.run_id,
        run_mode="shared",
        job_type="train",
        tags=["digits", "ddp", "tutorial"],
        config={**vars(args), "world_size": world, "backend": dist.get_backend()},
    )

    train, test = datasets(args.seed)
    train_sampler = DistributedSampler(train, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(test, shuffle=False)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=args.test_batch_size, sampler=test_sampler)

    model = DDP(Net().to(device), device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    # Every rank's own gradients (before DDP's all-reduce): a rank whose data differs shows.
    run.watch(model, log="gradients", log_freq=args.watch_freq, ranks="all")

    step = 0
    accuracies: list[float] = []  # over the whole test set, per epoch
    for epoch in range(args.epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % args.log_interval == 0:
                run.log({"train/loss": loss.detach(), "epoch": epoch}, step=step, weight=len(xb))
            step += 1

        loss_sum, correct, total, table, gallery = evaluate(model, test_loader, device, args)
        seen = max(total, 1)
        run.log(
            {"test_loss": loss_sum / seen, "accuracy": correct / seen},
            step=step,
            weight=total,
        )
        run.log({"predictions": table, "examples": gallery}, step=step)
        counts = torch.tensor([correct, total], dtype=torch.float64, device=device)
        dist.all_reduce(counts)
        accuracies.append(float(counts[0] / counts[1].clamp(min=1)))
        # Console lines: every rank's, in the run's Logs tab.
        print(
            f"epoch {epoch}: rank {rank} test loss {loss_sum / seen:.4f}, accuracy "
            f"{correct}/{total} on its shard; job accuracy {accuracies[-1]:.3f}",
            flush=True,
        )

    run.summary["final_step"] = step
    if rank == 0:
        save_artifacts(run, model, accuracies, args)
    run.finish()
    # Drop what holds the gloo process group (the DDP wrapper, the optimizer) and end the
    # group while the interpreter is alive: left to its teardown, gloo's threads can abort
    # the process ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()
    if rank == 0:
        print(f"run {run.project}/{run.id}: {step} steps on {world} ranks, dir {run.dir}")


if __name__ == "__main__":
    main()
