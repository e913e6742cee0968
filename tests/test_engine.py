"""The NMT engine: model, KV cache, decoding algorithms, the Hard-MoE E-step, training."""
import itertools
import math

import pytest
import torch

import nbsupport as nbs
from nbsupport.data.vocab import BOS, EOS
from nbsupport.decode import TableStepper, beam_search, decode, greedy_or_sample, nucleus, token_ids
from nbsupport.models import Transformer, TransformerConfig, shift_right
from nbsupport.models.hard_em import hard_em_assign
from nbsupport.pipeline import train_or_load
from nbsupport.train import Encoded, TrainConfig

V = 7  # vocabulary of the hand-made tables: 0..3 specials, 4..6 words


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))


def tiny_model(k=1, seed=0, dropout=0.1):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(src_vocab=11, tgt_vocab=V + 5, d_model=32, n_heads=4, d_ff=64,
                                         enc_layers=1, dec_layers=2, dropout=dropout, n_latent=k)).eval()


def random_src(b=3, s=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 11, (b, s), generator=g)
    src[0, -2:] = 0  # padding in one row
    return src


# ---------------------------------------------------------------- hand-made scoring tables
def table_fn(prefix):
    """Log scores depending on the whole prefix, so that greedy and beam disagree:
    greedy takes 4 (0.6) then is stuck with 0.3/0.3/...; 5 (0.4) leads to EOS with 0.99."""
    p = [1e-9] * V
    last = tuple(prefix[1:])
    if last == ():
        p[4], p[5] = 0.6, 0.4
    elif last == (4,):
        p[5], p[6], p[EOS] = 0.35, 0.35, 0.3
    elif last == (5,):
        p[EOS] = 0.99
    else:
        p[EOS] = 0.5
        p[6] = 0.5
    total = sum(p)
    return [math.log(x / total) for x in p]


def brute_force_best(fn, max_len):
    best, best_seq = -math.inf, None
    for n in range(1, max_len + 1):
        for body in itertools.product(range(4, V), repeat=n - 1):
            seq, score, prefix = list(body) + [EOS], 0.0, [BOS]
            for tok in seq:
                score += fn(prefix)[tok]
                prefix.append(tok)
            if score > best:
                best, best_seq = score, seq
    return best_seq, best


def test_beam_finds_the_best_sequence_of_a_table():
    seq, score = brute_force_best(table_fn, 4)
    (hyp,), = beam_search(TableStepper(table_fn), 1, beam=2, max_len=4)
    assert hyp.tokens == seq == [5, EOS] and hyp.score == pytest.approx(score, abs=1e-5)
    greedy = greedy_or_sample(TableStepper(table_fn), 1, max_len=4)[0]
    assert greedy.tokens[0] == 4 and greedy.score < score     # greedy misses it


def test_beam_n_best_are_sorted_and_distinct():
    hyps = beam_search(TableStepper(table_fn), 1, beam=3, max_len=4, n_best=3)[0]
    scores = [h.score for h in hyps]
    assert scores == sorted(scores, reverse=True) and len({tuple(h.tokens) for h in hyps}) == 3


def test_beam_one_equals_greedy_on_a_model():
    model, src = tiny_model(), random_src()
    greedy = token_ids(decode(model, src, "greedy", max_len_a=1, max_len_b=8))
    beam1 = token_ids(decode(model, src, "beam", beam=1, max_len_a=1, max_len_b=8))
    assert greedy == beam1


def test_kv_cache_equals_recomputation():
    model, src = tiny_model(k=3), random_src()
    a = token_ids(decode(model, src, "latent_greedy", max_len_a=1, max_len_b=8, use_cache=True))
    b = token_ids(decode(model, src, "latent_greedy", max_len_a=1, max_len_b=8, use_cache=False))
    assert a == b
    beam_a = token_ids(decode(model, src, "beam", n=2, beam=3, z=torch.tensor([0, 1, 2]), use_cache=True))
    beam_b = token_ids(decode(model, src, "beam", n=2, beam=3, z=torch.tensor([0, 1, 2]), use_cache=False))
    assert beam_a == beam_b


@pytest.mark.parametrize("kind", ["mask", "causal"])
def test_cpu_attention_equals_torch_sdpa(kind):
    """The plain CPU composition against PyTorch's fused kernel: outputs and gradients."""
    from nbsupport.models.transformer import attention
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, 5, 8, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)[:, None, None, :]
    kw = dict(mask=mask) if kind == "mask" else dict(causal=True)
    ours = attention(q, k, v, **kw)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=kw.get("mask"), is_causal=kind == "causal")
    assert torch.allclose(ours, ref, atol=1e-6)
    grads = torch.autograd.grad(ours.square().sum(), (q, k, v))
    for a, b in zip(grads, torch.autograd.grad(ref.square().sum(), (q, k, v))):
        assert torch.allclose(a, b, atol=1e-5)
    if kind == "mask":   # masked keys get no weight: changing them changes nothing
        v2 = v.detach().clone()
        v2[1, :, 3:, :] = 100.0
        assert torch.allclose(attention(q, k, v2, mask=mask)[1], ours[1], atol=1e-6)


def test_diverse_beam_without_penalty_is_beam_split_into_groups():
    model, src = tiny_model(), random_src()
    dbs = token_ids(decode(model, src, "diverse_beam", n=4, beam=4, groups=2, diversity=0.0))
    beam2 = token_ids(decode(model, src, "beam", n=2, beam=2))
    for d, b in zip(dbs, beam2):
        assert d == [b[0], b[0], b[1], b[1]]           # each group is the same beam of 2


def test_diverse_beam_penalty_changes_the_second_group():
    hyps = beam_search(TableStepper(table_fn), 1, beam=2, max_len=4, n_best=2, groups=2, diversity=5.0)[0]
    assert hyps[0].tokens[0] != hyps[1].tokens[0]


def test_diverse_beam_penalises_ending_where_an_earlier_group_ended():
    """EOS counts in the Hamming term: group 0 ends at once (the empty sentence, p 0.5); without
    the penalty on EOS group 1 would end there too and write the same empty hypothesis."""
    def fn(prefix):
        p = [1e-9] * V
        if len(prefix) == 1:
            p[EOS], p[4], p[5] = 0.5, 0.3, 0.2
        else:
            p[EOS] = 0.99
        return [math.log(x / sum(p)) for x in p]
    hyps = beam_search(TableStepper(fn), 1, beam=2, max_len=4, n_best=2, groups=2, diversity=5.0)[0]
    assert [h.tokens for h in hyps] == [[EOS], [5, EOS]]     # group 0's best, group 1's (4 is group 0's live pick)
    plain = beam_search(TableStepper(fn), 1, beam=2, max_len=4, n_best=2, groups=2, diversity=0.0)[0]
    assert [h.tokens for h in plain] == [[EOS], [EOS]]


def test_latent_greedy_equals_one_greedy_run_per_latent():
    model, src = tiny_model(k=3), random_src()
    together = token_ids(decode(model, src, "latent_greedy", max_len_a=1, max_len_b=6))
    for z in range(3):
        alone = token_ids(decode(model, src, "greedy", z=torch.full((3,), z), max_len_a=1, max_len_b=6))
        assert [t[z] for t in together] == [a[0] for a in alone]


def test_sampling_is_seeded_and_topk_restricts_choices():
    model, src = tiny_model(), random_src()
    a = token_ids(decode(model, src, "sampling", n=3, seed=1))
    assert a == token_ids(decode(model, src, "sampling", n=3, seed=1))
    one = token_ids(decode(model, src, "topk", n=5, top_k=1))   # top-1 sampling is greedy
    greedy = token_ids(decode(model, src, "greedy"))
    assert all(all(h == g[0] for h in hs) for hs, g in zip(one, greedy))


def test_nucleus_keeps_the_fewest_best_tokens_reaching_p():
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])
    # by hand: sorted 0.5, 0.3, 0.15, 0.05; cumulative 0.5, 0.8, 0.95, 1.0
    assert torch.allclose(nucleus(probs, 0.7), torch.tensor([[0, 0.5 / 0.8, 0, 0.3 / 0.8]]))
    assert torch.allclose(nucleus(probs, 0.5), torch.tensor([[0, 1.0, 0, 0]]))      # 0.5 reached by the best alone
    assert torch.allclose(nucleus(probs, 0.81), torch.tensor([[0.15, 0.5, 0, 0.3]]) / 0.95)
    assert torch.allclose(nucleus(probs, 1.0), probs)
    assert torch.allclose(nucleus(probs, 1e-6), torch.tensor([[0, 1.0, 0, 0]]))      # the best token always stays


def test_nucleus_sampling_draws_only_from_the_nucleus():
    model, src = tiny_model(), random_src()
    tiny = token_ids(decode(model, src, "nucleus", n=5, top_p=1e-6))            # a nucleus of one token is greedy
    greedy = token_ids(decode(model, src, "greedy"))
    assert all(all(h == g[0] for h in hs) for hs, g in zip(tiny, greedy))
    # top_p = 1 keeps every token: the same draws as plain sampling from the same seed
    assert token_ids(decode(model, src, "nucleus", n=4, top_p=1.0, seed=3)) == token_ids(decode(model, src, "sampling", n=4, seed=3))
    # empirical first-token frequencies against nucleus(p) of the model's first step, by counting
    stepper = model.stepper(src[:1], None)
    first = torch.softmax(stepper(torch.full((1, 1), BOS)), dim=-1)[0]
    allowed = set(torch.nonzero(nucleus(first[None], 0.3)[0]).flatten().tolist())
    draws = token_ids(decode(model, src[:1], "nucleus", n=200, top_p=0.3, seed=0))[0]
    assert {h[0] for h in draws} <= allowed and len(allowed) < first.numel()


def test_batched_estep_equals_separate_passes():
    model, src = tiny_model(k=4), random_src()
    tgt = torch.randint(4, V, (3, 5))
    tgt[:, -1] = EOS
    tgt_in = shift_right(tgt)
    memory, mask = model.encode(src)
    batched = model.latent_nll(memory, mask, tgt_in, tgt)
    chunked = model.latent_nll(memory, mask, tgt_in, tgt, chunk=3)
    for z in range(4):
        logits = model(src, tgt_in, torch.full((3,), z))
        assert torch.allclose(batched[:, z], model.sentence_nll(logits, tgt), atol=1e-4)
    assert torch.allclose(batched, chunked, atol=1e-5)
    assert torch.equal(hard_em_assign(model, src, tgt_in, tgt), batched.argmin(1))
    # differentiable (soft EM's M-step): the same gradient as the K separate passes
    params = list(model.parameters())
    memory, mask = model.encode(src)
    g_batched = torch.autograd.grad(model.latent_nll(memory, mask, tgt_in, tgt, chunk=3).sum(), params, allow_unused=True)
    separate = sum(model.sentence_nll(model(src, tgt_in, torch.full((3,), z)), tgt).sum() for z in range(4))
    g_separate = torch.autograd.grad(separate, params, allow_unused=True)
    assert all((a is None and b is None) or torch.allclose(a, b, atol=1e-5) for a, b in zip(g_batched, g_separate))
    assert torch.equal(hard_em_assign(model, src, tgt_in, tgt, chunk=2), batched.argmin(1))


def test_estep_mode_eval_ignores_dropout():
    model, src = tiny_model(k=4, dropout=0.5), random_src()
    tgt = torch.randint(4, V, (3, 5))
    model.train()
    picks = {tuple(hard_em_assign(model, src, shift_right(tgt), tgt, "eval").tolist()) for _ in range(5)}
    assert len(picks) == 1 and model.training        # deterministic, train mode restored


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="n_latent"):
        TransformerConfig(10, 10, n_latent=0)
    model = tiny_model(k=3)
    with pytest.raises(ValueError, match="out of range"):
        model(random_src(), torch.ones(3, 2, dtype=torch.long), torch.tensor([0, 1, 3]))
    with pytest.raises(ValueError, match="pass z"):
        token_ids(decode(model, random_src(), "greedy"))
    with pytest.raises(ValueError, match="longer than the model's max_len"):
        model.encode(torch.ones(1, 300, dtype=torch.long))
    with pytest.raises(ValueError, match="valid methods"):
        token_ids(decode(tiny_model(), random_src(), "top_p"))
    v = nbs.data.WordVocab(["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        nbs.translation.translate(tiny_model(), v, v, ["a b", "  "])


def test_tiny_hard_moe_uses_several_latents_and_caches():
    c = nbs.data.toy(n_train=600, n_dev=30, n_test=10, seed=0)
    sv = nbs.data.WordVocab.build(c.train.src)
    tv = nbs.data.WordVocab.build(r for rs in c.train.refs for r in rs)
    tr, va = Encoded.from_split(c.train, sv, tv), Encoded.from_split(c.dev, sv, tv)
    mc = TransformerConfig(len(sv), len(tv), d_model=32, n_heads=4, d_ff=64, enc_layers=1, dec_layers=1, n_latent=4)
    tc = TrainConfig(epochs=2, max_tokens=512, lr=3e-3, warmup=20)
    model, hist = train_or_load("tiny", mc, tc, {"toy": "test"}, tr, va, torch.device("cpu"), progress=False)
    usage = hist.epochs[-1]["usage"]
    assert sum(usage) == len(tr) and sum(u > 0 for u in usage) > 1
    assert hist.epochs[-1]["valid_nll"] < hist.epochs[0]["train_loss"]
    confusion = hist.epochs[-1]["latent_by_label"]
    assert sum(map(sum, confusion)) == len(tr)
    again, _ = train_or_load("tiny", mc, tc, {"toy": "test"}, tr, va, torch.device("cpu"), progress=False)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_interrupted_training_resumes(tmp_path):
    c = nbs.data.toy(n_train=300, n_dev=20, n_test=5, seed=1)
    sv = nbs.data.WordVocab.build(c.train.src)
    tv = nbs.data.WordVocab.build(r for rs in c.train.refs for r in rs)
    tr, va = Encoded.from_split(c.train, sv, tv), Encoded.from_split(c.dev, sv, tv)
    mc = TransformerConfig(len(sv), len(tv), d_model=32, n_heads=4, d_ff=64, enc_layers=1, dec_layers=1)
    ckpt = tmp_path / "run.partial.pt"
    torch.manual_seed(0)
    nbs.train.train(Transformer(mc), tr, va, TrainConfig(epochs=1, max_tokens=512), "cpu", ckpt, progress=False)
    torch.manual_seed(0)
    resumed = nbs.train.train(Transformer(mc), tr, va, TrainConfig(epochs=2, max_tokens=512), "cpu", ckpt, progress=False)
    assert [e["epoch"] for e in resumed.epochs] == [1, 2]


def test_purity_and_word_preferences_by_hand():
    assert nbs.analysis.purity([[9, 1], [0, 10], [0, 0]]) == pytest.approx((0.9 + 1.0) / 2)
    hyps = [["the dog was seen.", "the dog is seen."]] * 6
    words = dict(nbs.analysis.word_preferences(hyps, top=2))
    assert words == {"is": [0, 6], "was": [6, 0]}
    assert nbs.live.marked(["a b c", "a x c"]) == ["a <mark>b</mark> c", "a <mark>x</mark> c"]


@pytest.mark.parametrize("output", ["softmax", "scones"])
def test_chunked_loss_training_step_equals_the_plain_one(output):
    from nbsupport.losses import token_loss
    src = random_src()
    tgt = torch.randint(4, V, (3, 5))
    tgt[:, -1] = EOS
    grads = []
    for chunked in (False, True):
        torch.manual_seed(0)
        model = Transformer(TransformerConfig(11, V + 5, d_model=32, n_heads=4, d_ff=64, enc_layers=1,
                                              dec_layers=1, dropout=0.0, n_latent=2, output=output,
                                              scones_alpha=0.5, chunked_loss=chunked))
        cfg = TrainConfig(label_smoothing=0.1)
        loss = token_loss(model, src, shift_right(tgt), tgt, torch.tensor([0, 1, 1]), cfg)
        loss.backward()
        grads.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads[0][1], grads[1][1]))


def test_cache_key_lists_only_non_default_settings():
    from nbsupport.cache import non_default
    assert non_default(TrainConfig(epochs=3)) == {"epochs": 3}
    assert non_default(TransformerConfig(10, 12)) == {"src_vocab": 10, "tgt_vocab": 12}
