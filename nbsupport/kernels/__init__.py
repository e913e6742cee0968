"""Fast paths for the output layer: a fused SCONES loss (Triton on CUDA, torch elsewhere) and a
chunked linear + loss that never holds all logits. Not imported by ``import nbsupport``."""
from .chunked import chunked_linear_loss
from .scones_fused import HAVE_TRITON, fused_scones_loss, use_triton

__all__ = ["HAVE_TRITON", "chunked_linear_loss", "fused_scones_loss", "use_triton"]
