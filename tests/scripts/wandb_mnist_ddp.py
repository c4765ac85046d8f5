"""The MNIST DDP tutorial's W&B flow (flytesnacks ``pytorch_single_node_multi_gpu.py``
with ``log_test_predictions``), only the import changed, on scikit-learn's 8x8 digits
(no download): ``wandb.login()``, ``wandb.init(project=, entity=)`` on rank 0,
``wandb.config.update``, ``wandb.watch(model)`` every epoch, ``wandb.log({"loss": tensor,
"epoch": e})`` from every rank (a no-op on ranks that did not call ``init``), and the
``test_loss``/``accuracy``/``mnist_predictions`` table of ``wandb.Image`` rows."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import rankwise.wandb as wandb

BATCH_SIZE = 8
NUM_BATCHES_TO_LOG = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return F.log_softmax(self.fc1(torch.flatten(x, 1)), dim=1)


def train(model, device, train_loader, optimizer, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            wandb.log({"loss": loss, "epoch": epoch})


def log_test_predictions(images, labels, outputs, predicted, my_table, log_counter):
    scores = F.softmax(outputs.data, dim=1)
    log_scores = scores.cpu().numpy()
    log_images = images.cpu().numpy()
    log_labels = labels.cpu().numpy()
    log_preds = predicted.cpu().numpy()
    _id = 0  # the tutorial's code, as it is
    for i, l, p, s in zip(log_images, log_labels, log_preds, log_scores):  # noqa: E741
        img_id = str(_id) + "_" + str(log_counter)
        my_table.add_data(img_id, wandb.Image(i), p, l, *s)
        _id += 1  # noqa: SIM113
        if _id == BATCH_SIZE:
            break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0.0
    correct = 0
    columns = ["id", "image", "guess", "truth"]
    for digit in range(10):
        columns.append("score_" + str(digit))
    my_table = wandb.Table(columns=columns)
    with torch.no_grad():
        log_counter = 0
        for images, targets in test_loader:
            images, targets = images.to(device), targets.to(device)
            output = model(images)
            test_loss += F.nll_loss(output, targets, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(targets.view_as(pred)).sum().item()
            if log_counter < NUM_BATCHES_TO_LOG:
                log_test_predictions(
                    images, targets, output, pred.squeeze(1), my_table, log_counter
                )
                log_counter += 1
    test_loss /= len(test_loader.dataset)
    accuracy = float(correct) / len(test_loader.dataset)
    wandb.log({"test_loss": test_loss, "accuracy": accuracy, "mnist_predictions": my_table})
    return accuracy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--project", default="mnist-ddp")
    args = parser.parse_args()
    hp = {"epochs": args.epochs, "batch_size": 16, "lr": 1.0, "log_interval": 10}

    wandb.login()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        wandb.init(project=args.project, entity="flyte")
        wandb.config.update(hp)

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    x = (x - 0.1307) / 0.3081  # the tutorial's transforms.Normalize((0.1307,), (0.3081,))
    y = torch.tensor(y)
    train_set = TensorDataset(x[:1200], y[:1200])
    test_set = TensorDataset(x[1200:1264], y[1200:1264])
    sampler: DistributedSampler = DistributedSampler(train_set, shuffle=True, seed=0)
    train_loader = DataLoader(train_set, batch_size=hp["batch_size"], sampler=sampler)
    test_loader = DataLoader(test_set, batch_size=BATCH_SIZE)

    torch.manual_seed(0)
    device = torch.device("cpu")
    model = DDP(Net())
    optimizer = torch.optim.Adadelta(model.parameters(), lr=hp["lr"])
    accuracy = 0.0
    for epoch in range(1, hp["epochs"] + 1):
        sampler.set_epoch(epoch)
        if rank == 0:
            wandb.watch(model)
        train(model, device, train_loader, optimizer, epoch, hp["log_interval"])
        if rank == 0:
            accuracy = test(model, device, test_loader)

    if rank == 0:
        print(f"RUN {wandb.run.id} {accuracy}", flush=True)
        wandb.finish()
    # Drop what holds the gloo process group (the DDP wrapper, the optimizer) and end the
    # group while the interpreter is alive: left to its teardown, gloo's threads can abort
    # the process ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
