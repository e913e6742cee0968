"""Models of the course: one module per family, each speaking :mod:`.protocol` (the registry of
families and methods is :mod:`nbsupport.registry`); :mod:`.hard_em` is Hard-MoE's E-step."""
from . import hard_em, protocol
from .lstm import LSTMConfig, LSTMStepper, MultiSourceLSTM
from .mixture import MixtureConfig, MixtureModel
from .protocol import Batch, Family
from .target_encoder import LAMBDA_CANDIDATES, ConditioningConfig, TargetConditionedTransformer, lambda_for_batches
from .transformer import Transformer, TransformerConfig, TransformerStepper, shift_right
from .vnmt import VariationalNMT, VNMTConfig

__all__ = ["Batch", "ConditioningConfig", "Family", "LAMBDA_CANDIDATES", "LSTMConfig", "LSTMStepper", "MixtureConfig", "MixtureModel",
           "MultiSourceLSTM", "TargetConditionedTransformer", "Transformer", "TransformerConfig", "TransformerStepper",
           "VNMTConfig", "VariationalNMT", "hard_em", "lambda_for_batches", "protocol", "shift_right"]
