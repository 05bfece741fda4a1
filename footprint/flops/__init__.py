"""FLOP accounting: analytical transformer FLOPs, measured FLOPs (torch), MFU and HFU.

Conventions (README "FLOPs and MFU"):
- 2 FLOPs per multiply-accumulate (the profiler's and FlopCounterMode's convention).
- Model FLOPs count the work the model needs (6N per token for training, PaLM appendix B, plus the
  attention term 12 x layers x hidden x seq_len per token); hardware FLOPs add what activation
  recomputation re-executes. MFU = model FLOPs / (time x dense peak); HFU = hardware FLOPs / (same).
- Peaks are dense, per dtype, from lca_data (never the 2x "with sparsity" datasheet figures).

Owns: analytical FLOPs (`analytical`), measured FLOPs (`counting`), MFU/HFU (`mfu`).
May import: `footprint.errors`, torch (lazily, only when measuring). Never `footprint.lca`: the dense peak of a card
is looked up there (`footprint.lca.catalogue.compute_mfu`) and passed in.
"""

from footprint.flops.analytical import RECOMPUTE, TransformerFlops, transformer_flops
from footprint.flops.counting import cpu_attention_formulas, measure_flops
from footprint.flops.mfu import MFU_WARN, Mfu, mfu_against_peak

__all__ = [
    "MFU_WARN",
    "RECOMPUTE",
    "Mfu",
    "TransformerFlops",
    "cpu_attention_formulas",
    "measure_flops",
    "mfu_against_peak",
    "transformer_flops",
]
