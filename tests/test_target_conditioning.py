import math

import pytest
import torch

from nbsupport.data.vocab import EOS
from nbsupport.models import ConditioningConfig, TargetConditionedTransformer, TransformerConfig, shift_right
from nbsupport.models.target_encoder import (batch_entropy, domain_probs, lambda_for_batches, paper_objective_per_token,
                                            temperature)


def test_temperature_schedule():
    assert temperature(0.0, 0.5) == 1.0
    assert temperature(0.25, 0.5) == pytest.approx(0.5)
    assert temperature(0.5, 0.5) == 0.0 and temperature(0.9, 0.5) == 0.0
    assert temperature(0.5, 1.0) == pytest.approx(0.5)


def test_probs_are_one_hot_at_zero_temperature_and_when_hard():
    s = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 2.9]])
    one_hot = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert torch.equal(domain_probs(s, 0.0, hard=False), one_hot)
    assert torch.equal(domain_probs(s, 0.7, hard=True), one_hot)
    soft = domain_probs(s, 0.5, hard=False)
    assert torch.allclose(soft, torch.softmax(s / 0.5, -1)) and not torch.equal(soft, one_hot)


def test_regulariser_is_entropy_of_batch_mean():
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    # mean (0.75, 0.25): -(0.75 ln 0.75 + 0.25 ln 0.25)
    assert batch_entropy(p).item() == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert batch_entropy(torch.tensor([[0.0, 1.0], [0.0, 1.0]])).item() == pytest.approx(0.0, abs=1e-9)


def tiny(reads="target", p_hard=0.0):
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=16, n_heads=2, d_ff=32, enc_layers=1,
                            dec_layers=1, n_latent=3)
    return TargetConditionedTransformer(cfg, ConditioningConfig(lam=0.5, p_hard=p_hard, anneal_fraction=0.5, reads=reads))


def batch():
    src = torch.randint(4, 10, (4, 5))
    tgt = torch.randint(4, 10, (4, 6))
    tgt[:, -1] = EOS
    return src, shift_right(tgt), tgt


@pytest.mark.parametrize("progress, frozen", [(0.1, False), (0.6, True)])
def test_target_encoder_gets_no_gradient_once_frozen(progress, frozen):
    model = tiny()
    loss, z, is_frozen = model.conditioning_loss(*batch(), progress=progress)
    loss.backward()
    grads = [p.grad for p in model.target_encoder.parameters()]
    assert is_frozen == frozen and z.shape == (4,)
    if frozen:
        assert all(g is None for g in grads)
    else:
        assert any(g is not None and g.abs().sum() > 0 for g in grads)
    assert model.latent.weight.grad is not None            # the domain embeddings always learn


def test_source_input_ablation_reads_the_source():
    model = tiny(reads="source")
    src, tgt_in, tgt = batch()
    a = model.domain_scores(src, tgt)
    b = model.domain_scores(src, torch.flip(tgt, [1]))
    assert torch.equal(a, b)                                 # the target does not matter
    assert not torch.equal(a, model.domain_scores(torch.flip(src, [1]), tgt))


def test_bad_conditioning_settings():
    with pytest.raises(ValueError, match="target, source"):
        ConditioningConfig(reads="both")
    with pytest.raises(ValueError, match="K = n_latent >= 2"):
        TargetConditionedTransformer(TransformerConfig(10, 10, d_model=16, n_heads=2), ConditioningConfig())


def test_loss_is_the_papers_objective_per_token():
    """Section 3.3: L(theta) - lambda L_XE, with L the *sum* over the batch's sentences of
    -log p(y_i | ...), computed here by hand; the package divides it by the batch's target-token
    count. (Against the per-token *mean* NLL, lambda would weigh about tokens-per-batch times
    more than the paper's.)"""
    model = tiny().eval()                                   # eval: no dropout in the decoder
    model.cond = ConditioningConfig(lam=0.7, p_hard=0.0, anneal_fraction=0.5)
    src, tgt_in, tgt = batch()
    tgt[1, 3:] = 0                                          # padding: one shorter sentence (PAD = 0)
    tgt_in = shift_right(tgt)
    progress = 0.2                                          # T = 1 - 0.2 / 0.5 = 0.6
    loss, _, frozen = model.conditioning_loss(src, tgt_in, tgt, progress=progress)
    assert not frozen
    with torch.no_grad():
        s = model.domain_scores(src, tgt)
        p = torch.softmax(s / 0.6, dim=-1)
        logp = torch.log_softmax(model(src, tgt_in, p).float(), dim=-1)
        sentence_nll = [-sum(float(logp[i, t, tgt[i, t]]) for t in range(tgt.shape[1]) if tgt[i, t] != 0)
                        for i in range(tgt.shape[0])]
        p_mean = p.mean(dim=0)
        l_xe = -sum(float(q) * math.log(float(q)) for q in p_mean)
    n_tokens = int((tgt != 0).sum())
    assert n_tokens == 4 * 6 - 3
    paper = sum(sentence_nll) - 0.7 * l_xe                  # L(theta) - lambda L_XE
    assert loss.item() == pytest.approx(paper / n_tokens, rel=1e-5)
    # the old per-token reading of lambda would differ by (n_tokens - 1) * lambda * L_XE / n_tokens
    assert abs(loss.item() - (sum(sentence_nll) / n_tokens - 0.7 * l_xe)) > 0.1 * l_xe


def test_default_schedule_reaches_zero_temperature_at_half_of_training():
    """The paper: T falls linearly from 1 to 0, then the target encoder is frozen for the rest of
    training (section 3.2, when is not said); ours reaches 0 at half of training, as notebook 05 states."""
    cond = ConditioningConfig()
    assert cond.anneal_fraction == 0.5 and cond.lam == 1.0
    ts = [temperature(x / 10, cond.anneal_fraction) for x in range(11)]
    assert ts[:6] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0]) and ts[6:] == [0.0] * 5


def test_lambda_for_larger_batches_keeps_the_regulariser_weight_per_token():
    """The Bible's lambda (notebooks 05 and 10 at full) is the toy's at the same weight per token:
    in the objective the optimiser sees, L_XE weighs as much on 12k-token batches as it did on 1k."""
    lam = lambda_for_batches(100.0, 1024, 12000)
    assert lam == pytest.approx(1171.875)
    zero = torch.tensor(0.0)
    assert paper_objective_per_token(zero, 12000, lam, torch.tensor(1.0)).item() == pytest.approx(
        paper_objective_per_token(zero, 1024, 100.0, torch.tensor(1.0)).item())
