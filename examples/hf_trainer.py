"""A tiny GPT-2 (built from a config, no download) trained by transformers.Trainer with footprint's callback.

    FOOTPRINT_FAKE_NVML=1xA100-SXM4-40GB python examples/hf_trainer.py     # fake GPU: runs anywhere
    footprint assess runs/gpt2-hf

The footprint lines are the import and `callbacks=[FootprintCallback(...)]`.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from footprint.integrations.huggingface import FootprintCallback

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=256, bos_token_id=0, eos_token_id=0)
data = [{"input_ids": (x := torch.randint(0, 256, (64,))), "labels": x} for _ in range(512)]
args = TrainingArguments(
    output_dir="runs/gpt2-hf-checkpoints",
    per_device_train_batch_size=8,
    gradient_accumulation_steps=2,
    max_steps=30,
    logging_steps=10,
    eval_strategy="steps",
    eval_steps=10,
    save_strategy="steps",
    save_steps=15,
    report_to=[],  # e.g. ["mlflow"] or ["tensorboard"]: the footprint/* metrics go there too
    use_cpu=True,
    disable_tqdm=True,
)
trainer = Trainer(
    model=GPT2LMHeadModel(config),
    args=args,
    train_dataset=data,
    eval_dataset=data[:64],
    callbacks=[FootprintCallback(name="gpt2-hf", site={"grid": "FRA", "pue": 1.2}, report=True)],
)
trainer.train()
