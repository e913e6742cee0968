"""Shen et al.'s mixture variants: soft EM = the marginal likelihood's gradient (eq. 3), hard
EM with K=1 = plain training, offline responsibilities once per epoch, the D1/D2 detectors."""
import pytest
import torch

from nbsupport.analysis import degeneracy, estep_flips
from nbsupport.models import Transformer, TransformerConfig, shift_right
from nbsupport.models.mixture import MixtureConfig, MixtureModel, all_variants
from nbsupport.train import Encoded, TrainConfig, train, train_or_load


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))


def cfg(k, dropout=0.0):
    return TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16, n_heads=2, d_ff=32, enc_layers=1, dec_layers=1,
                             dropout=dropout, n_latent=k)


def batch(b=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (b, 5), generator=g)
    tgt = torch.randint(4, 12, (b, 6), generator=g)
    tgt[:, -1] = 2
    tgt[0, -2:] = torch.tensor([2, 0])
    return src, shift_right(tgt), tgt


@pytest.mark.parametrize("prior,params", [("learned", "shared"), ("uniform", "independent"), ("learned", "independent")])
def test_soft_em_gradient_is_the_marginal_likelihood_gradient(prior, params):
    torch.manual_seed(0)
    m = MixtureModel(cfg(3), MixtureConfig("soft", prior, params, "online", "none"))
    src, tgt_in, tgt_out = batch()
    tokens = (tgt_out != 0).sum()
    loss, _ = m.mixture_loss(src, tgt_in, tgt_out)          # responsibilities without gradient (eq. 3)
    g_em = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
    marginal = -torch.logsumexp(m.log_joint(src, tgt_in, tgt_out), dim=1).sum() / tokens
    g_true = torch.autograd.grad(marginal, list(m.parameters()), allow_unused=True)
    for a, b in zip(g_em, g_true):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_hard_em_with_one_expert_is_plain_training():
    g = torch.Generator().manual_seed(1)
    src = [torch.randint(4, 12, (5,), generator=g).tolist() + [2] for _ in range(40)]
    data = Encoded(src, [[t - 1 for t in s[:-1]] + [2] for s in src])
    tc = TrainConfig(epochs=2, max_tokens=60, lr=3e-3, warmup=10)
    torch.manual_seed(0)
    plain = Transformer(cfg(1, dropout=0.1))
    start = {n: p.clone() for n, p in plain.state_dict().items()}
    h_plain = train(plain, data, data, tc, "cpu", progress=False)
    torch.manual_seed(0)
    mix = MixtureModel(cfg(1, dropout=0.1), MixtureConfig("hard", "uniform", "shared", "online", "M"))
    h_mix = train(mix, data, data, tc, "cpu", progress=False)
    for a, b in zip(h_plain.epochs, h_mix.epochs):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5)
        assert a["valid_nll"] == pytest.approx(b["valid_nll"], rel=1e-5)
    # and the same gradient on one batch (weights after training differ only by rounding that
    # Adam amplifies in the keys' biases, whose true gradient is 0)
    torch.manual_seed(0)
    plain, mix = Transformer(cfg(1)), MixtureModel(cfg(1), MixtureConfig("hard", "uniform", "shared", "online", "M"))
    mix.experts[0].load_state_dict(plain.state_dict())
    src, tgt_in, tgt_out, _ = next(data.batches(60, shuffle=False, seed=0, device="cpu"))
    from nbsupport.train import objective
    g1 = torch.autograd.grad(objective(plain, plain(src, tgt_in), tgt_out), list(plain.parameters()))
    g2 = torch.autograd.grad(mix.mixture_loss(src, tgt_in, tgt_out)[0], list(mix.experts[0].parameters()))
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(g1, g2))


def test_offline_responsibilities_are_refreshed_once_per_epoch():
    g = torch.Generator().manual_seed(2)
    src = [torch.randint(4, 12, (4,), generator=g).tolist() + [2] for _ in range(30)]
    data = Encoded(src, [s[::-1][1:] + [2] for s in src])
    m, hist = train_or_load("mix-offline", cfg(2), TrainConfig(epochs=3, max_tokens=50, lr=3e-3, warmup=5),
                            {"t": 1}, data, data, "cpu", progress=False,
                            mixture=MixtureConfig("soft", "uniform", "shared", "offline", "M"))
    assert m.refreshes == 3 and m.stored.shape == (30, 2)
    assert torch.allclose(m.stored.sum(1), torch.ones(30))
    # and online models never store any
    m2 = MixtureModel(cfg(2), MixtureConfig("hard", "uniform", "shared", "online", "M"))
    train(m2, data, data, TrainConfig(epochs=1, max_tokens=50), "cpu", progress=False)
    assert m2.refreshes == 0
    with pytest.raises(ValueError, match="refresh"):
        MixtureModel(cfg(2), MixtureConfig(schedule="offline")).mixture_loss(*batch())


def test_hard_responsibilities_are_one_hot_argmax_and_dropout_modes():
    torch.manual_seed(3)
    src, tgt_in, tgt_out = batch(6)
    m = MixtureModel(cfg(3, dropout=0.3), MixtureConfig("hard", "uniform", "independent", "online", "M"))
    r = m.responsibilities(src, tgt_in, tgt_out)
    m.eval()
    with torch.no_grad():
        lj = m.log_joint(src, tgt_in, tgt_out)
    assert torch.equal(r.argmax(1), lj.argmax(1)) and torch.equal(r.sum(1), torch.ones(6))
    # "M": the E-step ignores dropout (deterministic); "E&M": it does not
    assert torch.equal(r, m.responsibilities(src, tgt_in, tgt_out))
    em = MixtureModel(cfg(3, dropout=0.5), MixtureConfig("soft", "uniform", "shared", "online", "E&M"))
    assert not torch.allclose(em.responsibilities(src, tgt_in, tgt_out), em.responsibilities(src, tgt_in, tgt_out))
    assert MixtureModel(cfg(3, dropout=0.5), MixtureConfig(dropout_in="none")).config.dropout == 0.0


def test_sixteen_variants_and_names():
    names = [v.name for v in all_variants()]
    assert len(set(names)) == 16 and names[0] == "online.shared.sMlp" and names[-1] == "offline.independent.hMup"
    assert MixtureConfig.from_name("offline.independent.sMlp") == MixtureConfig("soft", "learned", "independent", "offline")
    for bad in ("online.shared", "online.shared.xMup", "online.shared.hMzz"):
        with pytest.raises(ValueError, match="online.shared.hMup"):
            MixtureConfig.from_name(bad)
    with pytest.raises(ValueError, match="E&M"):
        MixtureConfig(dropout_in="E")


def test_degeneracy_detectors_on_hand_made_vectors():
    assert degeneracy([25.7, 0.2, 0.0], 0.1) == "D1"          # Shen Table 7, online independent hMup
    assert degeneracy([26.1, 0.0, 0.0], 0.0) == "D1"
    assert degeneracy([25.8, 25.7, 25.6], 91.7) == "ok"       # pairwise below the D2 threshold
    assert degeneracy([30.1, 30.0, 29.9], 97.0) == "D2"
    assert degeneracy([25.6, 24.4, 21.3], 53.1) == "ok"
    assert degeneracy([25.5, 12.0, 13.0], 30.0) == "ok"       # one latent at least half the best: not D1
    with pytest.raises(ValueError):
        degeneracy([20.0], 50.0)


def test_estep_flips_without_dropout_is_zero():
    torch.manual_seed(4)
    m = Transformer(cfg(4, dropout=0.1))
    src, tgt_in, tgt_out = batch(8)
    assert estep_flips(m, src, tgt_in, tgt_out, 0.0)["flip_rate"] == 0.0
    big = estep_flips(m, src, tgt_in, tgt_out, 0.5)
    assert big["noise"] > 0 and big["gap"] >= 0
    assert m.decoder[0].drop.p == 0.1          # the model's own dropout is restored


def test_vnmt_kl_against_the_closed_form_and_a_monte_carlo_estimate():
    from nbsupport.models.vnmt import gaussian_kl
    mu_q, lv_q, mu_p, lv_p = torch.tensor([[0.3, -1.0]]), torch.tensor([[0.2, -0.5]]), torch.tensor([[0.0, 0.5]]), torch.tensor([[0.0, 0.4]])
    q = torch.distributions.Normal(mu_q, (0.5 * lv_q).exp())
    p = torch.distributions.Normal(mu_p, (0.5 * lv_p).exp())
    assert torch.allclose(gaussian_kl(mu_q, lv_q, mu_p, lv_p), torch.distributions.kl_divergence(q, p).sum(-1))
    torch.manual_seed(0)
    x = q.sample((200_000,))
    mc = (q.log_prob(x) - p.log_prob(x)).sum(-1).mean()
    assert abs(float(mc) - float(gaussian_kl(mu_q, lv_q, mu_p, lv_p))) < 0.01


def test_vnmt_trains_anneals_and_samples_k_hypotheses():
    from nbsupport.models.vnmt import VariationalNMT, VNMTConfig
    g = torch.Generator().manual_seed(5)
    src = [torch.randint(4, 12, (4,), generator=g).tolist() + [2] for _ in range(40)]
    data = Encoded(src, [s[::-1][1:] + [2] for s in src])
    m, hist = train_or_load("vnmt", cfg(4), TrainConfig(epochs=3, max_tokens=60, lr=3e-3, warmup=5), {"t": 1}, data, data,
                            "cpu", progress=False, vnmt=VNMTConfig(anneal_fraction=0.5))
    assert isinstance(m, VariationalNMT) and hist.epochs[-1]["train_loss"] < hist.epochs[0]["train_loss"]
    assert m.beta(0.0) == 0.0 and m.beta(0.25) == 0.5 and m.beta(0.9) == 1.0
    assert VariationalNMT(cfg(4), VNMTConfig(anneal_fraction=0)).beta(0.0) == 1.0
    hyps = m.hypotheses(torch.tensor([src[0], src[1]]), k=3)
    assert len(hyps) == 2 and all(len(h) == 3 for h in hyps)
