"""Models of the course."""
from .transformer import Transformer, TransformerConfig, shift_right

__all__ = ["Transformer", "TransformerConfig", "shift_right"]
