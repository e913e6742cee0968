"""Shen et al.'s mixture variants: soft EM = the marginal likelihood's gradient (eq. 3), hard
EM with K=1 = plain training, offline responsibilities once per epoch, the D1/D2 detectors
against the papers' own labelled rows, per-latent BLEU against one reference, the E-step in
fp32, the flip-rate sample."""
import pytest
import torch
from sacrebleu.metrics import BLEU

import nbsupport as nbs
import nbsupport.train as train_mod
from nbsupport.lessons.analysis import (D1_RATIO, D2_PAIRWISE, degeneracy, estep_flips, is_d1, is_d2, per_latent_bleu_one_ref,
                                sample_sentences, seed_label)
from nbsupport.lessons.mixture_runs import over_seeds
from nbsupport.models import Transformer, TransformerConfig, shift_right
from nbsupport.models.mixture import MixtureConfig, MixtureModel, all_variants
from nbsupport.models.hard_em import estep_nll
from nbsupport.models.protocol import Batch
from nbsupport.pipeline import train_or_load
from nbsupport.train import Encoded, TrainConfig, train


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


@pytest.mark.parametrize("assign", [[1, 0, 2, 1, 0, 2], [1, 1, 0, 0, 1, 0]])   # the second leaves expert 2 idle
def test_hard_em_routing_gives_the_one_hot_weighted_gradient_of_all_k_experts(assign):
    """Hard EM with independent experts decodes each sentence with its chosen expert only; the
    gradient must be eq. 3's -sum_z r_z log p(y, z | x) with one-hot r over all K experts' passes,
    and an idle expert must get a zero gradient (not None: Adam steps it on its momentum)."""
    torch.manual_seed(0)
    m = MixtureModel(cfg(3), MixtureConfig("hard", "learned", "independent", "offline", "none"))
    src, tgt_in, tgt_out = batch(6)
    m.stored = torch.nn.functional.one_hot(torch.tensor(assign), 3).float()
    idx = list(range(6))
    loss, z = m.mixture_loss(src, tgt_in, tgt_out, idx)
    assert z.tolist() == assign
    g_routed = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
    memory, mask = m.encode(src)
    lj = m.log_prior(memory, mask) - m.expert_nll(memory, mask, tgt_in, tgt_out)
    weighted = -(m.stored * lj).sum() / (tgt_out != 0).sum()
    assert loss.item() == pytest.approx(weighted.item(), rel=1e-6)
    g_all = torch.autograd.grad(weighted, list(m.parameters()), allow_unused=True)
    for a, b in zip(g_routed, g_all):
        assert a is not None and b is not None
        assert torch.allclose(a, b, atol=1e-6)
    idle = [p for p in m.experts[2].decoder.parameters()]
    if 2 not in assign:
        assert all(not g.any() for g, p in zip(g_routed, m.parameters()) if any(p is q for q in idle))


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
    from nbsupport.losses import model_objective
    g1 = torch.autograd.grad(model_objective(plain, plain(src, tgt_in), tgt_out), list(plain.parameters()))
    g2 = torch.autograd.grad(mix.mixture_loss(src, tgt_in, tgt_out)[0], list(mix.experts[0].parameters()))
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(g1, g2))


def test_offline_responsibilities_are_refreshed_once_per_epoch():
    g = torch.Generator().manual_seed(2)
    src = [torch.randint(4, 12, (4,), generator=g).tolist() + [2] for _ in range(30)]
    data = Encoded(src, [s[::-1][1:] + [2] for s in src])
    m, hist = train_or_load("mix-offline", cfg(2), TrainConfig(epochs=3, max_tokens=50, lr=3e-3, warmup=5),
                            {"t": 1}, data, data, "cpu", progress=False,
                            options=MixtureConfig("soft", "uniform", "shared", "offline", "M"))
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


# Shen et al. 2019 Table 7 (WMT'17 En-De, K = 3): BLEU per latent z = 1, 2, 3 (one reference), pairwise
# BLEU, and the label the paper gives in section 5.1 / Fig. 2 (online + independent: D1; offline +
# shared + soft: D2; the others are not degenerate).
SHEN_TABLE7 = [
    ("online.shared.sMlp", [25.9, 24.9, 22.6], 57.8, "ok"), ("online.shared.sMup", [25.8, 25.2, 22.8], 61.6, "ok"),
    ("online.shared.hMlp", [25.5, 22.6, 21.5], 47.8, "ok"), ("online.shared.hMup", [25.6, 24.4, 21.3], 53.1, "ok"),
    ("online.independent.sMlp", [25.5, 0.0, 0.0], 23.8, "D1"), ("online.independent.sMup", [25.8, 0.6, 0.0], 3.5, "D1"),
    ("online.independent.hMlp", [26.1, 0.0, 0.0], 0.0, "D1"), ("online.independent.hMup", [25.7, 0.2, 0.0], 0.1, "D1"),
    ("offline.shared.sMlp", [25.8, 25.7, 25.6], 91.7, "D2"), ("offline.shared.sMup", [25.7, 25.5, 25.3], 91.7, "D2"),
    ("offline.shared.hMlp", [25.6, 21.2, 19.4], 49.2, "ok"), ("offline.shared.hMup", [25.3, 24.4, 23.6], 58.2, "ok"),
    ("offline.independent.sMlp", [25.7, 19.4, 16.4], 34.4, "ok"), ("offline.independent.sMup", [25.3, 23.5, 22.9], 48.0, "ok"),
    ("offline.independent.hMlp", [25.7, 15.8, 13.0], 26.4, "ok"), ("offline.independent.hMup", [25.5, 22.5, 19.8], 42.5, "ok"),
]
# Seed 000 Table 2 (IWSLT'14 De-En, K = 2, BLEU of each hypothesis against the one reference).
SEED_TABLE2 = [
    ("Variational NMT", [32.5, 32.5], 99.2, "D2"),               # "latent is ignored"
    ("Soft-MoE (no dropout, shared decoder)", [21.1, 20.6], 57.2, "ok"),   # low quality, no degeneracy
    ("Soft-MoE (dropout, shared decoder)", [32.6, 32.5], 99.0, "D2"),
    ("Hard-MoE (dropout during minimization)", [32.8, 32.7], 99.1, "D2"),
    ("Hard-MoE", [32.1, 32.7], 72.5, "ok"),                      # "success"
]


@pytest.mark.parametrize("name,bleus,pairwise,label", SHEN_TABLE7 + SEED_TABLE2, ids=[r[0] for r in SHEN_TABLE7 + SEED_TABLE2])
def test_degeneracy_labels_the_papers_rows_as_the_papers_do(name, bleus, pairwise, label):
    assert degeneracy(bleus, pairwise) == label


def test_d1_and_d2_thresholds_agree_with_every_labelled_row_without_per_latent_bleu():
    # Shen Table 1 (K = 3): dropout in E&M ignores the latent (D2) for all four losses; "no" dropout and
    # dropout in the M-step only do not (the "no" models overfit: low BLEU, but no degeneracy)
    for pairwise in (98.5, 98.5, 89.3, 87.6):
        assert is_d2(pairwise)
    for pairwise in (53.9, 55.4, 45.9, 41.0, 57.8, 61.6, 47.8, 53.1):
        assert not is_d2(pairwise)
    # Shen Table 5: hMup and sMup "well performing" on en-de, en-fr, zh-en; seed 000 Table 2: beam search,
    # no failure type
    for pairwise in (50.2, 64.0, 51.6, 68.9, 80.4, 60.9, 84.8):
        assert not is_d2(pairwise)
    # seed 000 Table 2: Soft-MoE with separate decoders "collapse to single expert" (no pairwise BLEU given)
    assert is_d1([32.7, 0.0])
    assert 84.8 < D2_PAIRWISE <= 87.6 and 0.023 < D1_RATIO <= 0.61


def test_degeneracy_edge_cases():
    assert degeneracy([30.0, 5.0, 5.0], 40.0) == "D1"             # both others under 0.2 x the best
    assert degeneracy([30.0, 7.0, 0.0], 40.0) == "ok"             # one other latent above 0.2 x: partly trained
    assert degeneracy([0.0, 0.0, 0.0], 100.0) == "D2"             # nothing decodes: no latent stands out
    with pytest.raises(ValueError, match="K >= 2"):
        degeneracy([20.0], 50.0)


def test_seed_label_is_the_strict_majority_else_mixed():
    assert seed_label(["D1"]) == "D1"
    assert seed_label(["ok", "D2", "D2"]) == "D2"
    assert seed_label(["ok", "D2"]) == "mixed" and seed_label(["ok", "D1", "D2"]) == "mixed"
    with pytest.raises(ValueError):
        seed_label([])


def test_over_seeds_sorts_each_seed_before_averaging():
    # a D1 model whose trained expert is latent 0 with one seed and latent 2 with the other: averaging
    # by index would give [25, 0, 25], a healthy-looking row
    seeds = [{"per_latent_bleu_1ref": [50.0, 0.0, 0.2], "pairwise_bleu": 1.0, "multi_ref_bleu": 20.0, "label": "D1"},
             {"per_latent_bleu_1ref": [0.0, 0.4, 48.0], "pairwise_bleu": 3.0, "multi_ref_bleu": 22.0, "label": "D1"}]
    row = over_seeds(seeds)
    assert row["per_latent_bleu_1ref"] == pytest.approx([49.0, 0.3, 0.0])
    assert row["pairwise_bleu"] == pytest.approx(2.0) and row["multi_ref_bleu"] == pytest.approx(21.0)
    assert row["label"] == "D1" and row["labels_per_seed"] == ["D1", "D1"]
    assert degeneracy(row["per_latent_bleu_1ref"], row["pairwise_bleu"]) == "D1"
    assert over_seeds(seeds[:1] + [{**seeds[1], "label": "ok"}])["label"] == "mixed"


def test_per_latent_bleu_uses_one_reference_per_source_shared_by_the_latents():
    import random
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = random.Random(7)
    refs = [[" ".join(rng.sample(words, 8)) for _ in range(3)] for _ in range(30)]
    # latent k writes reference k exactly: against all M references (metrics.per_latent_bleu) every
    # latent scores 100; against one reference per source (Table 7) none does
    hyps = [[rs[0], rs[1], rs[2]] for rs in refs]
    one = per_latent_bleu_one_ref(hyps, refs, seed=0)
    assert all(b < 100 for b in one) and one == per_latent_bleu_one_ref(hyps, refs, seed=0)
    from nbsupport.metrics import per_latent_bleu
    assert per_latent_bleu(hyps, refs) == pytest.approx([100, 100, 100])
    # the same reference for every latent: identical latents score the same
    same = per_latent_bleu_one_ref([[rs[1]] * 3 for rs in refs], refs, seed=3)
    assert same[0] == same[1] == same[2]
    # with a single reference per source it is plain corpus BLEU against it (sacrebleu directly)
    single = [[rs[0]] for rs in refs]
    hyps2 = [[rs[1], rs[0]] for rs in refs]
    expected = [BLEU().corpus_score([h[k] for h in hyps2], [[r[0] for r in single]]).score for k in range(2)]
    assert per_latent_bleu_one_ref(hyps2, single, seed=5) == pytest.approx(expected)
    assert expected[1] == pytest.approx(100)


def test_estep_runs_in_fp32_while_the_m_step_keeps_autocast(monkeypatch):
    """On a GPU a training step runs under bf16 autocast; the E-step must not (its argmin over
    experts a fraction of a nat apart would depend on rounding). Simulated on the CPU: the
    training step's autocast is made CPU bf16."""
    monkeypatch.setattr(train_mod, "_autocast", lambda device: torch.autocast("cpu", dtype=torch.bfloat16))
    src, tgt_in, tgt_out = batch(6)
    tc = TrainConfig(epochs=1, max_tokens=100, warmup=5)
    # Hard-MoE (seed 000 Algorithm 1): latent_nll is only called by the E-step
    torch.manual_seed(5)
    m = Transformer(cfg(3, dropout=0.1))
    seen = {"latent_nll": [], "decode": []}
    for name in seen:
        fn = getattr(m, name)
        def spy(*a, _fn=fn, _name=name, **kw):
            seen[_name].append(torch.is_autocast_enabled("cpu"))
            return _fn(*a, **kw)
        monkeypatch.setattr(m, name, spy)
    plain = estep_nll(m, src, tgt_in, tgt_out)
    assert plain.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(estep_nll(m, src, tgt_in, tgt_out), plain)
    seen["latent_nll"].clear(), seen["decode"].clear()
    opt, sched = train_mod.make_optimizer(m, tc)
    _, _, z = train_mod.training_step(m, opt, sched, Batch(src, tgt_in, tgt_out, None), tc, 0.0)
    assert torch.equal(z, plain.argmin(1))
    assert seen["latent_nll"] == [False]                       # the E-step: autocast off
    assert True in seen["decode"]                              # the M-step: autocast on
    # a mixture's responsibilities (hard and soft), also inside autocast
    for em in ("hard", "soft"):
        torch.manual_seed(6)
        mix = MixtureModel(cfg(3, dropout=0.1), MixtureConfig(em, "learned", "shared", "online", "M"))
        r_plain = mix.responsibilities(src, tgt_in, tgt_out)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            r_cast = mix.responsibilities(src, tgt_in, tgt_out)
        assert r_cast.dtype == torch.float32 and torch.equal(r_cast, r_plain)
        states = []
        fn = mix.log_joint
        monkeypatch.setattr(mix, "log_joint", lambda *a, _fn=fn: states.append(torch.is_autocast_enabled("cpu")) or _fn(*a))
        opt, sched = train_mod.make_optimizer(mix, tc)
        train_mod.training_step(mix, opt, sched, Batch(src, tgt_in, tgt_out, None), tc, 0.0)
        assert states == [False]                               # log_joint is the E-step's only caller here


def test_flip_sample_is_a_seeded_uniform_sample_not_the_shortest_sentences():
    from nbsupport.train import Encoded
    g = torch.Generator().manual_seed(8)
    lengths = [3 + (i * 37) % 60 for i in range(300)]           # 3..62 tokens, mixed order
    tgt = [torch.randint(4, 12, (n,), generator=g).tolist() + [2] for n in lengths]
    data = Encoded([t[::-1] for t in tgt], tgt)
    src, tgt_in, tgt_out = sample_sentences(data, 40, seed=0)
    got = (tgt_out != 0).sum(1).float()
    mean_all = sum(len(t) for t in tgt) / len(tgt)
    shortest = sorted(len(t) for t in tgt)[:40]
    assert abs(float(got.mean()) - mean_all) < 10               # ordinary sentences (mean of all: ~33.5)
    assert float(got.mean()) > 2 * sum(shortest) / 40          # not the head of a length-sorted batch
    rows = {tuple(r[r != 0].tolist()) for r in tgt_out}
    assert len(rows) == 40 and rows <= {tuple(t) for t in tgt}  # 40 distinct real training pairs
    assert torch.equal(tgt_in, shift_right(tgt_out))
    s2 = sample_sentences(data, 40, seed=0)[2]
    assert torch.equal(s2, tgt_out) and not torch.equal(sample_sentences(data, 40, seed=1)[2], tgt_out)
    with pytest.raises(ValueError, match="1..300"):
        sample_sentences(data, 301, seed=0)


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
                            "cpu", progress=False, options=VNMTConfig(anneal_fraction=0.5))
    assert isinstance(m, VariationalNMT) and hist.epochs[-1]["train_loss"] < hist.epochs[0]["train_loss"]
    assert m.beta(0.0) == 0.0 and m.beta(0.25) == 0.5 and m.beta(0.9) == 1.0
    assert VariationalNMT(cfg(4), VNMTConfig(anneal_fraction=0)).beta(0.0) == 1.0
    hyps = nbs.decode.decode(m, torch.tensor([src[0], src[1]]), "vnmt", 3)
    assert len(hyps) == 2 and all(len(h) == 3 for h in hyps)


def test_vnmt_batches_sharing_a_generator_draw_fresh_noise():
    """Successive batches of one evaluation must not reuse the same prior noise (as in
    mixture_runs.evaluate): with one generator the second call's draws differ, with a
    fresh seed they repeat."""
    from nbsupport.models.vnmt import VariationalNMT, VNMTConfig
    torch.manual_seed(0)
    m = VariationalNMT(cfg(4), VNMTConfig())
    seen = []
    real = m.model.stepper
    # capture the latent noise the prior stepper decodes with
    m.model.stepper = lambda src, z=None, use_cache=True: seen.append(z.clone()) or real(src, z, use_cache)
    src = torch.tensor([[5, 6, 2], [7, 8, 2]])
    nbs.decode.decode(m, src, "vnmt", 2, seed=3), nbs.decode.decode(m, src, "vnmt", 2, seed=3)
    assert torch.equal(seen[0], seen[2]) and torch.equal(seen[1], seen[3])   # each call reseeds
    seen.clear()
    g = torch.Generator().manual_seed(3)
    nbs.decode.decode(m, src, "vnmt", 2, generator=g), nbs.decode.decode(m, src, "vnmt", 2, generator=g)
    assert not torch.equal(seen[0], seen[2]) and not torch.equal(seen[1], seen[3])


def test_prefetched_variants_are_the_models_train_variant_loads(monkeypatch, caplog):
    """prefetch_variants trains the uncached variants in worker processes (soft losses first) under
    the very cache keys train_variant uses; a second prefetch has nothing to do."""
    caplog.set_level("INFO", logger="nbsupport.cache")
    from nbsupport.lessons import mixture_runs as mr
    from nbsupport.pipeline import is_cached
    monkeypatch.setenv("NBS_THREADS", "2")
    t = mr.task("ci")
    t.training = {**t.training, "epochs": 1}
    variants = [MixtureConfig.from_name(n) for n in ("online.shared.hMup", "online.independent.sMlp")]
    trained = mr.prefetch_variants(t, variants, "cpu")
    assert trained == ["mix-online.independent.sMlp-M-k3", "mix-online.shared.hMup-M-k3"]
    assert all(is_cached(t, **mr.variant_job(t, v)) for v in variants)
    assert mr.prefetch_variants(t, variants, "cpu") == []
    caplog.clear()
    mr.train_variant(t, variants[0], "cpu")
    assert "loaded cached model" in caplog.text


def test_a_model_whose_e_step_uses_one_latent_is_d1_not_ok():
    from nbsupport.lessons.analysis import one_latent_used
    # 04's online.shared.hMlp: the shared decoder decodes every latent well (per-latent BLEU close,
    # pairwise BLEU low), but the last epoch sent all 4000 sentences to latent 1
    assert degeneracy([30.0, 28.0, 27.0], 40.0) == "ok"                        # no usage: as before
    assert degeneracy([30.0, 28.0, 27.0], 40.0, usage=[0, 4000, 0]) == "D1"
    assert degeneracy([30.0, 28.0, 27.0], 40.0, usage=[3990, 5, 5]) == "D1"    # 5 of 4000 is under 1%
    assert degeneracy([30.0, 28.0, 27.0], 40.0, usage=[2000, 1950, 50]) == "ok"  # two latents take sentences
    assert degeneracy([30.0, 28.0, 27.0], 95.0, usage=[1400, 1300, 1300]) == "D2"
    assert not one_latent_used(None) and not one_latent_used([0, 0, 0])


def test_flip_details_by_hand():
    from nbsupport.lessons.analysis import flip_details
    clean = torch.tensor([[1.0, 2.0], [5.0, 3.0], [1.0, 1.5]])
    # sentence 0: both NLLs rise by 4 (a shift every expert shares): no flip, relative noise 0;
    # sentence 1: best (z=1) rises by 3, the other falls by 1: flip, relative noise 4 > gap 2;
    # sentence 2: best rises by 0.2, the other by 0.4: no flip, relative noise 0.2 < gap 0.5
    noisy = torch.tensor([[5.0, 6.0], [4.0, 6.0], [1.2, 1.9]])
    d = flip_details(clean, noisy)
    assert d["flipped"].tolist() == [0.0, 1.0, 0.0]
    assert d["gap"].tolist() == pytest.approx([1.0, 2.0, 0.5])
    assert d["relative_noise"].tolist() == pytest.approx([0.0, 4.0, 0.2])
    assert d["noise"].tolist() == pytest.approx([4.0, 2.0, 0.3])


def test_runner_up_ratio_and_second_usage_share():
    import numpy as np
    from nbsupport.lessons.mixture_runs import runner_up_ratio, second_usage_share
    from nbsupport.stats import Resampled
    per_latent = [Resampled(2.0, np.array([1.0, 3.0])), Resampled(40.0, np.array([40.0, 30.0])),
                  Resampled(10.0, np.array([8.0, 0.0]))]
    r = runner_up_ratio(per_latent)                       # best = latent 1, second = latent 2 (by estimate)
    assert r.estimate == pytest.approx(0.25) and r.values.tolist() == pytest.approx([0.2, 0.0])
    s = second_usage_share([3000, 0, 1000])
    assert s.estimate == pytest.approx(0.25)
    assert abs(s.values.mean() - 0.25) < 0.005 and 0.22 < s.interval().ci_low < 0.25 < s.interval().ci_high < 0.28
    assert second_usage_share([0, 4000, 0]).interval().ci_high == 0.0
    with pytest.raises(ValueError):
        second_usage_share([10])


def test_converged_compares_the_last_epochs_validation_nll():
    from types import SimpleNamespace
    from nbsupport.lessons.mixture_runs import converged, last_drop
    hist = lambda *v: SimpleNamespace(epochs=[{"valid_nll": x} for x in v])
    assert not converged(hist(4.0, 2.0, 1.0))            # still halving
    assert converged(hist(4.0, 1.0, 0.99))               # 1% drop
    assert converged(hist(1.0, 1.1))                     # rising: no more to gain
    assert not converged(hist(1.0))                      # one epoch tells nothing
    assert last_drop(hist(2.0, 1.5)) == pytest.approx(0.25)


def test_training_line_and_over_seed_values():
    import numpy as np
    from types import SimpleNamespace
    from nbsupport.lessons.mixture_runs import over_seed_values, training_line
    from nbsupport.stats import Resampled
    line = training_line("m", SimpleNamespace(epochs=[{"valid_nll": 2.0}, {"valid_nll": 1.0}]))
    assert line == "m: validation NLL/token by epoch 2.000 1.000 (last epoch -50.00%: NOT converged)"
    one = Resampled(1.0, np.array([0.5, 1.5]))
    assert over_seed_values([one]) is one
    two = over_seed_values([one, Resampled(3.0, np.array([2.0, 4.0]))])
    sd = np.std([1.0, 3.0], ddof=1)                        # the sample sd, n - 1
    assert two.estimate == 2.0 and two.ci_high - 2.0 > 1.96 * sd - 1e-9


def test_training_stops_at_the_first_epoch_that_barely_lowers_the_validation_loss(monkeypatch):
    from dataclasses import replace
    g = torch.Generator().manual_seed(0)
    src = [torch.randint(4, 12, (4,), generator=g).tolist() for _ in range(12)]
    data = Encoded(src, [s[::-1] + [2] for s in src])
    scripted = iter([4.0, 2.0, 1.5, 1.49, 1.0, 0.5])                     # epoch 4 lowers it by 0.7%
    monkeypatch.setattr(train_mod, "evaluate_loss", lambda *a, **k: next(scripted))
    tc = TrainConfig(epochs=6, max_tokens=30, lr=1e-3, warmup=5, converged_below=0.02)
    hist = train(Transformer(cfg(1)), data, data, tc, "cpu", progress=False)
    assert [e["valid_nll"] for e in hist.epochs] == [4.0, 2.0, 1.5, 1.49]
    scripted = iter([4.0, 2.0, 1.5, 1.49, 1.0, 0.5])
    monkeypatch.setattr(train_mod, "evaluate_loss", lambda *a, **k: next(scripted))
    assert len(train(Transformer(cfg(1)), data, data, replace(tc, converged_below=None), "cpu", progress=False).epochs) == 6
    with pytest.raises(ValueError, match="converged_below"):
        TrainConfig(converged_below=1.5)


def test_the_profiles_stop_training_where_the_notebooks_call_it_converged():
    import nbsupport as nbs
    from nbsupport.lessons.mixture_runs import CONVERGED_DROP
    assert all(nbs.profile(n).mixture["training"]["converged_below"] == CONVERGED_DROP for n in ("ci", "lab", "full"))


def test_resampled_per_latent_bleu_matches_the_table_and_resamples_the_sources():
    import random
    from types import SimpleNamespace
    from nbsupport import metrics, stats
    from nbsupport.lessons.mixture_runs import resampled
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = random.Random(3)
    refs = [[" ".join(rng.sample(words, 8)) for _ in range(3)] for _ in range(20)]
    hyps = [[rs[0], rs[1], " ".join(rng.sample(words, 8))] for rs in refs]
    t = SimpleNamespace(corpus=SimpleNamespace(test=SimpleNamespace(refs=refs)))
    boot = stats.Resamples(len(hyps), resamples=200, seed=0)
    r = resampled(hyps, t, boot, seed=4)
    assert [x.estimate for x in r["per_latent_1ref"]] == pytest.approx(per_latent_bleu_one_ref(hyps, refs, seed=4))
    assert r["pairwise_bleu"].estimate == pytest.approx(metrics.pairwise_bleu(hyps))
    assert all(len(x.values) == 200 for x in r["per_latent_1ref"])
    # a resample that draws every source once is the test set itself
    whole = stats.Resamples(len(hyps), resamples=1, seed=0)
    whole.counts[:] = 1.0
    again = resampled(hyps, t, whole, seed=4)
    assert again["per_latent_1ref"][0].values[0] == pytest.approx(r["per_latent_1ref"][0].estimate)
    assert again["pairwise_bleu"].values[0] == pytest.approx(metrics.pairwise_bleu(hyps))


def test_vnmt_probe_reads_zero_kl_when_the_posterior_is_the_prior():
    import nbsupport as nbs
    from nbsupport.lessons.mixture_runs import task, vnmt_probe
    from nbsupport.models.vnmt import VariationalNMT
    t = task("ci")
    torch.manual_seed(0)
    m = VariationalNMT(TransformerConfig(len(t.src_vocab), len(t.tgt_vocab), d_model=16, n_heads=2, d_ff=32, enc_layers=1,
                                         dec_layers=1, dropout=0.0, n_latent=4))
    p = vnmt_probe(m, t, 5, seed=0)
    assert p["kl"] > 0 and 0 <= p["own_reference"] <= 1 and p["chance"] == pytest.approx(1 / 3)
    assert len(p["hyps"]) == 5 and all(len(hs) == 3 for hs in p["hyps"])
    assert vnmt_probe(m, t, 5, seed=0)["hyps"] == p["hyps"]                       # seeded
    m.posterior_params = lambda memory, mask, tgt: m.prior_params(memory, mask)    # q = p: nothing learned from y
    assert vnmt_probe(m, t, 5, seed=0)["kl"] == pytest.approx(0.0, abs=1e-6)
    assert nbs.mixture_runs.vnmt_probe is vnmt_probe


def test_soft_em_usage_is_the_summed_posterior_mass():
    """Soft EM's usage sums the E-step's responsibilities (the authors' prob_z_xy.sum(0)), by hand:
    two batches of responsibilities -> per-latent mass and mass per true label; hard EM still counts
    the chosen latent per sentence, as whole numbers."""
    usage = nbs.metrics.LatentUsage(3, labels=[0, 1, 1, 0])
    usage.add(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]), [0, 1])
    usage.add(torch.tensor([[0.5, 0.5, 0.0], [0.4, 0.3, 0.3]]), [2, 3])
    rec = usage.record()
    assert rec["usage"] == pytest.approx([1.7, 1.1, 1.2])           # 0.7+0.1+0.5+0.4, 0.2+0.1+0.5+0.3, 0.1+0.8+0.0+0.3
    by_label = [x for row in rec["latent_by_label"] for x in row]    # latent x label; label 0: pairs 0 and 3
    assert by_label == pytest.approx([1.1, 0.6, 0.5, 0.6, 0.4, 0.8])
    hard = nbs.metrics.LatentUsage(3, labels=[0, 1, 1, 0])
    hard.add(torch.tensor([2, 2, 0, 1]), [0, 1, 2, 3])
    assert hard.record() == {"usage": [1, 1, 2], "latent_by_label": [[0, 1], [1, 0], [1, 1]]}
    assert all(isinstance(u, int) for u in hard.record()["usage"])


def test_a_soft_mixture_reports_its_posteriors_as_usage():
    """The soft M-step returns r = p(z | x, y) (eval-mode E-step), whose column sums are the
    usage; a near-uniform posterior spreads the mass evenly, where argmax counts would give one
    latent every sentence."""
    torch.manual_seed(0)
    m = MixtureModel(cfg(3), MixtureConfig("soft", "uniform", "shared", "online", "M"))
    src, tgt_in, tgt_out = batch(4)
    _, r = m.mixture_loss(src, tgt_in, tgt_out)
    m.eval()
    with torch.no_grad():
        expected = torch.softmax(m.log_joint(src, tgt_in, tgt_out), dim=1)
    assert r.shape == (4, 3) and torch.allclose(r, expected, atol=1e-6)
    usage = nbs.metrics.LatentUsage(3, None)
    usage.add(r, list(range(4)))
    assert usage.record()["usage"] == pytest.approx(expected.sum(0).tolist())
    assert sum(usage.record()["usage"]) == pytest.approx(4.0)
    from nbsupport.lessons.mixture_runs import second_usage_share
    assert second_usage_share([1333.4, 1333.3, 1333.3]).estimate == pytest.approx(1333.3 / 4000)
