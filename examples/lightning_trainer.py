"""The same tiny GPT-2 under a Lightning Trainer with footprint's callback (and Lightning's CSV logger).

FOOTPRINT_FAKE_NVML=1xA100-SXM4-40GB python examples/lightning_trainer.py
footprint assess runs/gpt2-lightning
"""

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from transformers import GPT2Config, GPT2LMHeadModel

from footprint.integrations.lightning import FootprintCallback


class GPT2(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=256, bos_token_id=0, eos_token_id=0)
        self.model = GPT2LMHeadModel(config)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        return self.model(input_ids=batch, labels=batch).loss

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self.log("val_loss", self.model(input_ids=batch, labels=batch).loss)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


torch.manual_seed(0)
loader = torch.utils.data.DataLoader(torch.randint(0, 256, (512, 64)), batch_size=8)
trainer = pl.Trainer(
    max_steps=30,
    accumulate_grad_batches=2,
    log_every_n_steps=10,
    val_check_interval=20,
    limit_val_batches=4,
    logger=CSVLogger("runs/gpt2-lightning-logs"),
    callbacks=[FootprintCallback(name="gpt2-lightning", site={"grid": "FRA", "pue": 1.2}, report=True)],
    accelerator="cpu",
    enable_progress_bar=False,
)
trainer.fit(GPT2(), loader, loader)
