"""The course notebook's DDP MNIST trainer, on Fashion-MNIST, offline.

Same model and training as the notebook (NN 784 -> 50 -> 10, Adam lr 1e-3, batch 64), made
to run under a launcher:
  - RANK / WORLD_SIZE / LOCAL_RANK come from the environment (drun or torchrun set them),
    MASTER_ADDR / MASTER_PORT too (init_process_group's env:// method);
  - the data comes from local files and is never downloaded, so workers cannot race on a
    download (the notebook's "the first run will most likely fail"). --data-dir may hold
    the IDX files gzipped (Debian's dataset-fashion-mnist package, the default) or
    unpacked, directly or in torchvision's <dir>/FashionMNIST/raw layout that
    prepare_fashion_mnist.py writes;
  - a DistributedSampler gives every rank its own shard of the training set;
  - --limit N trains on the first N samples of each rank's shard (short test runs).

    drun --standalone --nproc-per-node 4 examples/mnist_ddp.py --epochs 1

Rank 0 prints the loss of every epoch and, at the end,
"Accuracy on testing data: Got C/10000 with accuracy XX.XX".
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class NN(nn.Module):
    def __init__(self, input_size, num_classes):  # input size = 28x28 = 784 for mnist
        super(NN, self).__init__()
        self.fc1 = nn.Linear(input_size, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return x


def find_file(data_dir, name):
    for folder in (data_dir, os.path.join(data_dir, "FashionMNIST", "raw")):
        for candidate in (name, name + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    raise SystemExit(f"mnist_ddp.py: {name}[.gz] not found in {data_dir} "
                     f"(nor in {data_dir}/FashionMNIST/raw); this program never downloads")


def read_idx(path):
    """Reads an IDX file (optionally gzipped) into a uint8 tensor of its declared shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise SystemExit(f"mnist_ddp.py: {path} is not an unsigned-byte IDX file")
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def load_split(data_dir, split):
    images_name, labels_name = FILES[split]
    images = read_idx(find_file(data_dir, images_name))
    labels = read_idx(find_file(data_dir, labels_name))
    # Kept as bytes (a float copy of the training set is 188 MB per worker); to_input()
    # scales each batch the way the notebook's transforms.ToTensor() did.
    return TensorDataset(images, labels.long())


def to_input(images, device):
    """uint8 [B, 28, 28] -> float [B, 784] in [0, 1]."""
    return images.to(device).reshape(images.shape[0], -1).float().div_(255)


def check_accuracy(dataset, model, name):
    loader = DataLoader(dataset, batch_size=1000)
    num_correct = 0
    num_samples = 0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            x = to_input(x, torch.device("cpu"))
            scores = model(x)
            _, predictions = scores.max(1)
            num_correct += int((predictions == y).sum())
            num_samples += predictions.size(0)
    model.train()
    print(f"Accuracy on {name} data: Got {num_correct}/{num_samples} "
          f"with accuracy {num_correct / num_samples * 100:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0,
                        help="train on the first N samples of each rank's shard (0: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(args.seed)
    device = torch.device("cpu")  # for this model the CPU is enough

    train_dataset = load_split(args.data_dir, "train")
    sampler = DistributedSampler(train_dataset, num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=args.seed)

    model = DDP(NN(input_size=784, num_classes=10).to(device))
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    print(f"Rank {rank} (local rank {local_rank}) of {world_size}: ready")
    if rank == 0:
        shard = len(sampler) if args.limit <= 0 else min(args.limit, len(sampler))
        print(f"Training on {world_size} workers, {shard} samples per worker per epoch, "
              f"{args.epochs} epoch(s)")
    start_time = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        indices = list(sampler)
        if args.limit > 0:
            indices = indices[:args.limit]  # every shard has the same length: DDP stays in step
        loader = DataLoader(Subset(train_dataset, indices), batch_size=args.batch_size)
        total = torch.zeros(2, dtype=torch.float64)  # sum of losses, number of samples
        for data, targets in loader:
            data = to_input(data, device)  # flatten, scale to [0, 1]
            targets = targets.to(device)
            scores = model(data)
            loss = criterion(scores, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(targets), len(targets)], dtype=torch.float64)
        dist.all_reduce(total)
        if rank == 0:
            print(f"Epoch: {epoch} loss {total[0].item() / max(total[1].item(), 1):.4f}")
    if rank == 0:
        print(f"Learning took {time.time() - start_time:.2f}s")
        # Every replica holds the same weights after DDP's synchronised steps: rank 0 alone
        # evaluates on the whole test set.
        check_accuracy(load_split(args.data_dir, "test"), model.module, "testing")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
