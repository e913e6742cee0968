"""Lesson helpers behind the live widgets of notebooks 03 and 06-09: one E-step with
and without dropout (03's flip view), the slider control."""
import pytest
import torch

from nbsupport.lessons.analysis import estep_flips, estep_with_dropout
from nbsupport.views.widgets import slider
from nbsupport.models import Transformer, TransformerConfig, shift_right


def _model(dropout=0.1, k=3):
    torch.manual_seed(4)
    return Transformer(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16, n_heads=2, d_ff=32, enc_layers=1,
                                         dec_layers=1, dropout=dropout, n_latent=k))


def _batch(b=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (b, 5), generator=g)
    tgt = torch.randint(4, 12, (b, 6), generator=g)
    tgt[:, -1] = 2
    return src, shift_right(tgt), tgt


def test_estep_with_dropout_is_the_eval_estep_and_one_seeded_noisy_estep():
    m = _model()
    src, tgt_in, tgt_out = _batch()
    clean, noisy = estep_with_dropout(m, src, tgt_in, tgt_out, 0.5, seed=3)
    with torch.no_grad():                                   # the E-step without dropout, computed directly
        memory, mask = m.eval().encode(src)
        direct = m.latent_nll(memory, mask, tgt_in, tgt_out)
    assert clean.shape == (16, 3) and torch.allclose(clean, direct, atol=1e-5)
    assert not torch.allclose(noisy, clean)                 # dropout 0.5 changes the NLLs ...
    again = estep_with_dropout(m, src, tgt_in, tgt_out, 0.5, seed=3)[1]
    assert torch.equal(noisy, again)                        # ... the same way for the same seed
    assert m.decoder[0].drop.p == 0.1 and not m.training    # the model's own dropout and mode restored
    # the flips the view lists are those estep_flips counts
    flips = float((clean.argmin(1) != noisy.argmin(1)).float().mean())
    assert flips == estep_flips(m, src, tgt_in, tgt_out, 0.5, seed=3)["flip_rate"]
    c0, n0 = estep_with_dropout(m, src, tgt_in, tgt_out, 0.0)
    assert torch.allclose(c0, n0, atol=1e-5)                # no dropout: the same E-step twice
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        estep_with_dropout(m, src, tgt_in, tgt_out, 1.0)


def test_slider_starts_at_its_value_and_rejects_one_outside():
    w = slider(0.0, 0.5, 0.1, 0.05, "p")
    assert getattr(w, "value", w) == pytest.approx(0.1)
    b = slider(1, 64, 16)
    assert getattr(b, "value", b) == 16 and getattr(b, "max", 64) == 64 and type(b).__name__ in ("IntSlider", "int")
    with pytest.raises(ValueError, match="outside 1..64"):
        slider(1, 64, 65)
