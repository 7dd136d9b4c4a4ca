"""Lightning's Trainer(strategy="ddp") fitting a tiny model, launched by drun
(tests/gpu/run_gpu_checks.sh, check 4). Lightning sees torchrun's variables
(TorchElasticEnvironment) and joins the processes drun started instead of starting its own.

    lightning_fit.py --accelerator gpu|cpu --devices N

devices × 1 node must equal WORLD_SIZE. Prints `GPUCHECK {json}` on every rank.
"""
import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning as L
except ImportError:  # the older package name
    import pytorch_lightning as L


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accelerator", default="cpu")
    p.add_argument("--devices", type=int, default=2)
    args = p.parse_args()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    trainer = L.Trainer(strategy="ddp", accelerator=args.accelerator, devices=args.devices,
                        num_nodes=1, max_epochs=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    model = Tiny()
    trainer.fit(model, loader)
    env = trainer.strategy.cluster_environment
    print("GPUCHECK " + json.dumps({
        "rank": trainer.global_rank, "world": trainer.world_size,
        "cluster_environment": type(env).__name__,
        "root_device": str(trainer.strategy.root_device),
        "backend": getattr(trainer.strategy, "_process_group_backend", None),
        "loss": float(trainer.callback_metrics["loss"]),
        "drun_rank": int(os.environ["RANK"]), "lightning": L.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
