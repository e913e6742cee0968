"""Mixed precision chosen by what the GPU computes natively, checked on the CPU with the capability mocked."""
import pytest
import torch

from nbsupport.data.batching import shift_right
from nbsupport.models import Transformer, TransformerConfig
from nbsupport.models.protocol import Batch
from nbsupport.train import TrainConfig, autocast_dtype, grad_scaler, make_optimizer, training_step


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled")     # no CUDA here: a disabled scaler
@pytest.mark.parametrize("native_bf16, dtype", [(True, torch.bfloat16), (False, torch.float16)])
def test_a_gpu_without_native_bf16_trains_in_fp16_with_a_scaler(monkeypatch, native_bf16, dtype):
    asked = []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: asked.append(including_emulation) or native_bf16)
    assert autocast_dtype(torch.device("cuda")) is dtype
    assert asked == [False]                    # emulated bf16 (a T4's) does not count
    assert (grad_scaler("cuda") is not None) == (dtype is torch.float16)
    assert autocast_dtype("cpu") is None and grad_scaler("cpu") is None


def test_a_scaled_step_is_the_plain_step():
    """Scaling the loss by a power of two, then unscaling before clipping, changes no update."""
    def step(scaler):
        torch.manual_seed(0)
        model = Transformer(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16, n_heads=2, d_ff=32,
                                              enc_layers=1, dec_layers=1, dropout=0.0))
        cfg = TrainConfig(lr=1e-2, warmup=1, clip_norm=0.1)          # a clip that binds
        opt, sched = make_optimizer(model, cfg)
        tgt = torch.randint(4, 12, (3, 5))
        training_step(model, opt, sched, Batch(torch.randint(4, 12, (3, 4)), shift_right(tgt), tgt, None), cfg, 0.0,
                      scaler)
        return torch.cat([p.detach().flatten() for p in model.parameters()])
    plain, scaled = step(None), step(torch.amp.GradScaler("cpu", init_scale=2.0 ** 12))
    assert torch.allclose(plain, scaled, rtol=1e-5, atol=1e-7)
