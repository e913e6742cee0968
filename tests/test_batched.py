"""Many models trained as one (nbsupport.batched) against the same models trained one by one."""
import copy
import statistics

import pytest
import torch

from nbsupport.batched import StackedAdam, clip_per_model, stackable, train_together
from nbsupport.metrics import LatentUsage
from nbsupport.models import Transformer, TransformerConfig
from nbsupport.train import Encoded, TrainConfig, train


def reversal(n=120, seed=5):
    g = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, 14, (int(torch.randint(3, 8, (1,), generator=g)),), generator=g).tolist() + [2]
           for _ in range(n)]
    return Encoded(src, [s[::-1][1:] + [2] for s in src], labels=[i % 3 for i in range(n)])


def models(k=1, dropout=0.0, n=3):
    out = []
    for s in range(n):
        torch.manual_seed(s)
        out.append(Transformer(TransformerConfig(src_vocab=14, tgt_vocab=14, d_model=32, n_heads=4, d_ff=64,
                                                 enc_layers=1, dec_layers=1, dropout=dropout, n_latent=k)))
    return out


def both(inits, cfgs, data, k):
    usage = lambda: [LatentUsage(k, data.labels)]
    alone = [copy.deepcopy(m) for m in inits]
    h_alone = [train(m, data, data, c, "cpu", progress=False, watchers=usage) for m, c in zip(alone, cfgs)]
    together = [copy.deepcopy(m) for m in inits]
    h_together = train_together(together, data, data, cfgs, "cpu", watchers=lambda i: usage())
    return alone, h_alone, together, h_together


@pytest.mark.parametrize("k", [1, 3])          # the baseline, and Hard-MoE (its E-step inside the batched step)
def test_models_trained_together_end_where_they_end_alone(k):
    data = reversal()
    cfgs = [TrainConfig(epochs=3, max_tokens=120, lr=3e-3, warmup=5, seed=s) for s in range(3)]   # own data orders
    alone, h_alone, together, h_together = both(models(k), cfgs, data, k)
    for a, b, ha, hb in zip(alone, together, h_alone, h_together):
        for ea, eb in zip(ha.epochs, hb.epochs, strict=True):
            assert eb["valid_nll"] == pytest.approx(ea["valid_nll"], rel=1e-4)
            assert eb["train_loss"] == pytest.approx(ea["train_loss"], rel=1e-4)
            assert eb["usage"] == ea["usage"]                      # the same E-step choices, sentence by sentence
        # Adam divides by the root of the squared gradient: a float-rounding difference in a
        # near-zero gradient can move a weight by up to the learning rate, so weights agree in norm
        wa = torch.cat([p.detach().flatten() for p in a.parameters()])
        wb = torch.cat([p.detach().flatten() for p in b.parameters()])
        assert float((wa - wb).norm() / wa.norm()) < 2e-3
        assert ha.best_epoch == hb.best_epoch


def test_a_model_that_converges_stops_and_keeps_its_best_epoch_while_the_others_go_on():
    data = reversal()
    cfgs = [TrainConfig(epochs=8, max_tokens=120, lr=lr, warmup=5, converged_below=0.05) for lr in (3e-3,) * 3]
    inits = models()
    alone, h_alone, together, h_together = both(inits, cfgs, data, 1)
    assert [len(h.epochs) for h in h_together] == [len(h.epochs) for h in h_alone]
    assert len({len(h.epochs) for h in h_alone}) > 1, "the test needs models that stop at different epochs"


def test_with_dropout_the_statistics_agree():
    """Dropout masks differ (each model draws its own), so compare the seeds' mean final loss."""
    data = reversal(200)
    cfgs = [TrainConfig(epochs=3, max_tokens=120, lr=3e-3, warmup=5, seed=s) for s in range(4)]
    _, h_alone, _, h_together = both(models(dropout=0.2, n=4), cfgs, data, 1)
    final = lambda hs: [h.epochs[-1]["valid_nll"] for h in hs]
    spread = statistics.stdev(final(h_alone)) + statistics.stdev(final(h_together))
    assert abs(statistics.mean(final(h_alone)) - statistics.mean(final(h_together))) < 2 * spread + 0.02


def test_each_model_clips_its_own_gradient():
    torch.manual_seed(0)
    grads = {"w": torch.randn(3, 4, 5), "b": torch.randn(3, 5) * torch.tensor([[0.01], [1.0], [10.0]])}
    expected = []
    for i in range(3):
        ps = [torch.nn.Parameter(torch.zeros(4, 5)), torch.nn.Parameter(torch.zeros(5))]
        ps[0].grad, ps[1].grad = grads["w"][i].clone(), grads["b"][i].clone()
        torch.nn.utils.clip_grad_norm_(ps, 1.0)
        expected.append((ps[0].grad, ps[1].grad))
    clip_per_model(grads, 1.0)
    for i, (w, b) in enumerate(expected):
        assert torch.allclose(grads["w"][i], w) and torch.allclose(grads["b"][i], b)


def test_stacked_adam_is_torch_adam_per_model_with_its_own_rate_and_pauses():
    torch.manual_seed(0)
    start = torch.randn(3, 6)
    stacked = {"p": start.clone()}
    opt = StackedAdam(stacked, 3)
    singles = [torch.nn.Parameter(start[i].clone()) for i in range(3)]
    adams = [torch.optim.Adam([p], lr=1.0, betas=(0.9, 0.98), eps=1e-9) for p in singles]
    lrs = torch.tensor([1e-3, 3e-3, 1e-2])
    for step in range(5):
        grads = torch.randn(3, 6)
        active = torch.tensor([True, step % 2 == 0, True])          # model 1 sits out every other step
        opt.step(stacked, {"p": grads.clone()}, lrs, active)
        for i in range(3):
            if active[i]:
                adams[i].param_groups[0]["lr"] = float(lrs[i])
                singles[i].grad = grads[i].clone()
                adams[i].step()
    for i in range(3):
        assert torch.allclose(stacked["p"][i], singles[i].detach(), atol=1e-6)


def test_only_one_configuration_of_a_stackable_family_trains_together():
    a, b = models(n=2)
    other = Transformer(TransformerConfig(src_vocab=14, tgt_vocab=14, d_model=16, n_heads=4, d_ff=64, enc_layers=1,
                                          dec_layers=1))
    cfg = TrainConfig(epochs=1)
    assert stackable([a, b], [cfg, TrainConfig(epochs=1, seed=3)])
    assert not stackable([a, other], [cfg, cfg]) and not stackable([a, b], [cfg, TrainConfig(epochs=1, lr=0.1)])
    with pytest.raises(ValueError, match="one configuration"):
        train_together([a, other], reversal(), reversal(), [cfg, cfg], "cpu")


def test_the_pipeline_caches_each_stacked_seed_under_the_key_train_model_reads(tmp_path, monkeypatch):
    import nbsupport as nbs
    from nbsupport import pipeline
    monkeypatch.setenv("NBS_BUILD", str(tmp_path))
    monkeypatch.setitem(pipeline.STACK_SEEDS, "cpu", True)
    task = nbs.pipeline.toy_task("ci", 0, ambiguity="low", n_train=300)
    job = dict(name="stacked", model_overrides=dict(dropout=0.0), training_overrides=dict(epochs=2))
    assert pipeline.train_many_in_parallel([(task, {**job, "seed": s}) for s in (0, 1)], "cpu") == ["stacked"] * 2
    assert all(pipeline.is_cached(task, seed=s, **job) for s in (0, 1))
    loaded = pipeline.train_model(task, device="cpu", seed=1, progress=False, **job)[1]
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "alone"))
    alone = pipeline.train_model(task, device="cpu", seed=1, progress=False, **job)[1]
    assert [e["valid_nll"] for e in loaded.epochs] == pytest.approx([e["valid_nll"] for e in alone.epochs], rel=1e-4)


def test_every_attention_call_gets_its_padding_mask_batched_like_its_queries(monkeypatch):
    # a GPU's fused attention rejects a mask that vmap has not batched with the queries
    # ("attn_bias: wrong shape (batch dimension)"); a CPU accepts it, so this is checked on the call itself
    import nbsupport.models.transformer as transformer
    from torch._C._functorch import is_batchedtensor
    real, calls = transformer.attention, []

    def strict(q, k, v, mask=None, **kw):
        if mask is not None and is_batchedtensor(q):
            calls.append(is_batchedtensor(mask))
        return real(q, k, v, mask, **kw)

    monkeypatch.setattr(transformer, "attention", strict)
    data = reversal(n=30)
    train_together(models(n=2), data, data, [TrainConfig(epochs=1, max_tokens=120, seed=s) for s in range(2)], "cpu")
    assert calls and all(calls)      # training steps and validation alike
