"""FLOP accounting: analytical transformer FLOPs, measured FLOPs (torch), MFU and HFU.

Conventions (README "FLOPs and MFU"):
- 2 FLOPs per multiply-accumulate (the profiler's and FlopCounterMode's convention).
- Model FLOPs count the work the model needs (6N per token for training, PaLM appendix B, plus the
  attention term 12 x layers x hidden x seq_len per token); hardware FLOPs add what activation
  recomputation re-executes. MFU = model FLOPs / (time x dense peak); HFU = hardware FLOPs / (same).
- Peaks are dense, per dtype, from lca_data (never the 2x "with sparsity" datasheet figures).

Owns: analytical FLOPs (`analytical`), measured FLOPs (`counting`), MFU/HFU (`mfu`).
May import: `footprint.errors`, `footprint.lca.database` (dense peaks), torch (lazily, only when measuring).
"""

from footprint.flops.analytical import RECOMPUTE, TransformerFlops, transformer_flops
from footprint.flops.counting import cpu_attention_formulas, measure_flops
from footprint.flops.mfu import MFU_WARN, Mfu, compute_mfu

__all__ = [
    "MFU_WARN",
    "RECOMPUTE",
    "Mfu",
    "TransformerFlops",
    "compute_mfu",
    "cpu_attention_formulas",
    "measure_flops",
    "transformer_flops",
]
