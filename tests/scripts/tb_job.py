"""A 2-rank job that logs only through TensorBoard writers, recorded by
``rankwise.init(tensorboard=True)``: a ``torch.utils.tensorboard.SummaryWriter`` (scalars,
tensors, ``add_scalars``, a histogram, an image, text, hparams) and a
``tensorboardX.SummaryWriter`` (scalars), each in its own per-rank log directory under
``--tb``. Values are exact in float32, so the event files hold them exactly too."""

import argparse
import os

import numpy as np
import tensorboardX
import torch
import torch.distributed as dist
from torch.utils.tensorboard import SummaryWriter

import rankwise

STEPS = 6


def value(rank: int, step: int) -> float:
    return rank * 100 + step / 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--tb", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run = rankwise.init(project="tb", dir=args.dir, run_mode="shared", tensorboard=True)
    base = os.path.join(args.tb, f"rank_{rank}")
    tw = SummaryWriter(log_dir=os.path.join(base, "torch"))
    xw = tensorboardX.SummaryWriter(logdir=os.path.join(base, "tbx"))
    for step in range(STEPS):
        tw.add_scalar("train/loss", value(rank, step), step)
        tw.add_scalar("train/tensor", torch.tensor(value(rank, step) + 1), global_step=step)
        tw.add_scalars("lr", {"a": float(step), "b": float(rank)}, step)
        xw.add_scalar("acc", value(rank, step) + 2, step)
        dist.barrier()
    tw.add_histogram("weights", torch.arange(10, dtype=torch.float32) + rank, STEPS)
    tw.add_image("sample", torch.zeros(3, 4, 5) + rank / 2, STEPS)
    tw.add_text("note", f"rank {rank}", STEPS)
    tw.add_hparams({"lr": 0.5, "opt": "sgd"}, {"hp/final": value(rank, STEPS)})
    xw.add_image("hwc", np.full((4, 5, 3), 0.25, dtype=np.float32), STEPS, dataformats="HWC")
    tw.close()
    xw.close()
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
