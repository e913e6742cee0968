"""Models of the course."""
from .target_encoder import ConditioningConfig, TargetConditionedTransformer
from .transformer import Transformer, TransformerConfig, shift_right

__all__ = ["ConditioningConfig", "TargetConditionedTransformer", "Transformer", "TransformerConfig", "shift_right"]
