"""A small real DDP job logging every rich kind, for the media browser tests.

Under torchrun (gloo, CPU), every rank records into one shared run and logs, at steps
0, 10, 20 (and a training step in between): a gallery of images whose size and colour
say the rank and step, a table with image cells (``--rows`` rows), a histogram of the
model's first weight's gradient, a WAV clip, an animated GIF, an html panel and a text
panel. Captions and cells carry HTML on purpose: the dashboard must show them as text.

    torchrun --nproc-per-node=2 tests/scripts/media_browser_job.py --run-ids media-a,media-b

Several run ids: one run after the other in one launch (the Compare page's test), the
second run's images a shade apart.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import rankwise

XSS_CAPTION = '<img src=x onerror="window.__xss=11">caption'
XSS_CELL = "<script>window.__xss=12</script>cell"
XSS_KEY = "debug/<img src=x onerror=window.__xss=14>"
HTML_PANEL = "<h1>panel</h1><script>parent.window.__xss=13; window.__ran=1</script>"
STEPS = (0, 10, 20)


def picture(rank: int, step: int, i: int, shade: int = 0) -> np.ndarray:
    """An (H, W, 3) uint8 image: its width says the rank, its colour the step."""
    h, w = 16, 16 + 8 * rank
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[..., 0] = 40 + 5 * step + shade
    img[..., 1] = 30 * i % 255
    img[: h // 2, :, 2] = 200
    return img


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--run-ids", required=True, help="comma-separated: one run each, in turn")
    p.add_argument("--project", default="media")
    p.add_argument("--rows", type=int, default=120)
    p.add_argument(
        "--vary-runs", action="store_true", help="each run its own data: their losses differ"
    )
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for shade, run_id in enumerate(a.run_ids.split(",")):
        one_run(a, run_id, rank, 20 * shade)
    dist.destroy_process_group()


def one_run(a: argparse.Namespace, run_id: str, rank: int, shade: int) -> None:
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    run = rankwise.init(project=a.project, id=run_id, run_mode="shared", config={"rows": a.rows})
    torch.manual_seed(rank + (1000 * shade if a.vary_runs else 0))
    for step in range(STEPS[-1] + 1):
        x = torch.randn(32, 8)
        loss = F.cross_entropy(model(x), (x[:, 0] > 0).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log({"loss": loss.detach()}, step=step)
        if step not in STEPS:
            continue
        grad = model.module[0].weight.grad.detach().flatten() * (1 + step / 10)
        gallery = [
            rankwise.Image(picture(rank, step, i, shade), caption=f"rank {rank} step {step} #{i}")
            for i in range(3)
        ]
        gallery.append(rankwise.Image(picture(rank, step, 3), caption=XSS_CAPTION))
        table = rankwise.Table(columns=["id", "image", "label", "score"])
        for i in range(a.rows):
            cell = XSS_CELL if i == 0 else f"row-{i:05d}"
            table.add_data(i, rankwise.Image(picture(rank, step, i % 4)), cell, float(i % 7) + step)
        t = np.linspace(0, 0.25, 4000, dtype=np.float32)
        frames = np.stack([picture(rank, step, i) for i in range(4)])
        run.log(
            {
                "samples": gallery,
                "predictions": table,
                "grad/fc0": rankwise.Histogram(grad.numpy()),
                "clip": rankwise.Audio(
                    np.sin(2 * np.pi * (220 + 110 * rank) * t), sample_rate=16000
                ),
                "anim": rankwise.Video(frames, fps=4),
                "report": rankwise.Html(HTML_PANEL),
                XSS_KEY: rankwise.Image(picture(rank, step, 0), caption="a key of markup"),
                "notes": rankwise.Text(f"rank {rank} at step {step}: <b>not bold</b>"),
            },
            step=step,
        )
    run.finish()


if __name__ == "__main__":
    main()
