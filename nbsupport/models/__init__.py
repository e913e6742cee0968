"""Models of the course."""
from .lstm import LSTMConfig, LSTMStepper, MultiSourceLSTM
from .target_encoder import ConditioningConfig, TargetConditionedTransformer
from .transformer import Transformer, TransformerConfig, shift_right

__all__ = ["ConditioningConfig", "LSTMConfig", "LSTMStepper", "MultiSourceLSTM", "TargetConditionedTransformer",
           "Transformer", "TransformerConfig", "shift_right"]
