"""SCONES loss against the paper's equations; exact search against brute force."""
import itertools
import math
import random

import pytest
import torch

from nbsupport.decode import TableStepper, beam_search
from nbsupport.losses import cross_entropy_loss, scones_loss
from nbsupport.search import best_first_search, exact_search, sequence_score

PAD = 0


def reference_scones(logits, targets, alpha, lam):
    """Eqs. 6-8 with label smoothing (eqs. 11-12), one token at a time, in float64 Python."""
    sig = lambda x: 1 / (1 + math.exp(-x))
    out = []
    for row_l, row_t in zip(logits.tolist(), targets.tolist()):
        row = []
        for f, y in zip(row_l, row_t):
            if y == PAD:
                row.append(0.0)
                continue
            p = sig(f[y])
            pos = -(1 - lam) * math.log(p) - lam * math.log(1 - p)
            neg = -sum((1 - lam) * math.log(1 - sig(fw)) + lam * math.log(sig(fw))
                       for w, fw in enumerate(f) if w != y)
            row.append(pos + alpha * neg)
        out.append(row)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("alpha, lam", [(1.0, 0.0), (0.2, 0.0), (0.5, 0.1), (1.0, 0.3)])
def test_scones_loss_matches_the_equations(alpha, lam):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 9, dtype=torch.float64) * 3
    targets = torch.randint(1, 9, (3, 5))
    targets[0, 3:] = PAD
    ref = reference_scones(logits, targets, alpha, lam)
    per_token = scones_loss(logits, targets, pad_id=PAD, alpha=alpha, label_smoothing=lam, reduction="none")
    assert per_token.shape == targets.shape
    assert torch.allclose(per_token.double(), ref, atol=1e-5)
    mean = scones_loss(logits, targets, pad_id=PAD, alpha=alpha, label_smoothing=lam)
    assert mean.item() == pytest.approx(ref.sum().item() / int((targets != PAD).sum()), rel=1e-5)


def test_scones_loss_is_stable_for_extreme_logits():
    logits = torch.tensor([[[80.0, -80.0, 0.0, 40.0]]])
    loss = scones_loss(logits, torch.tensor([[1]]), pad_id=PAD, alpha=1.0)
    # gold logit -80: -log sigma(-80) = 80; negatives: softplus(80) + softplus(0) + softplus(40)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(80 + 80 + math.log(2) + 40, rel=1e-6)


def test_scones_gradient_gradcheck_and_closed_form():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 2, PAD], [3, 4, 5]])
    assert torch.autograd.gradcheck(
        lambda x: scones_loss(x, targets, pad_id=PAD, alpha=0.5, label_smoothing=0.1, reduction="sum"), (logits,))
    # d/df: sigma(f) - (1 - lam) at the gold token, alpha * (sigma(f) - lam) elsewhere
    loss = scones_loss(logits, targets, pad_id=PAD, alpha=0.5, label_smoothing=0.1, reduction="sum")
    (grad,) = torch.autograd.grad(loss, logits)
    s = torch.sigmoid(logits.detach())
    expected = 0.5 * (s - 0.1)
    gold = torch.nn.functional.one_hot(targets, 6).bool()
    expected[gold] = (s - 0.9)[gold]
    expected[targets == PAD] = 0
    assert torch.allclose(grad, expected, atol=1e-10)


def test_cross_entropy_interface():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, PAD], [3, 4, 1]])
    ref = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD)
    assert cross_entropy_loss(logits, targets, pad_id=PAD).item() == pytest.approx(ref.item(), rel=1e-6)
    with pytest.raises(ValueError, match="valid"):
        scones_loss(logits, targets, pad_id=PAD, reduction="avg")


def test_cross_entropy_per_token_is_the_smoothed_nll_written_out():
    """Per token (the flattened (tokens, V) computation): -(1 - ls) log p(gold) - ls * mean_v log p(v),
    zero at padding, for 2-d and 3-d logits."""
    torch.manual_seed(0)
    for shape in ((2, 4, 7), (5, 7)):
        logits = torch.randn(*shape)
        targets = torch.randint(1, 7, shape[:-1])
        targets.view(-1)[1] = PAD
        logp = torch.log_softmax(logits.double(), dim=-1)
        by_hand = -(0.9 * logp.gather(-1, targets[..., None]).squeeze(-1) + 0.1 * logp.mean(-1))
        by_hand[targets == PAD] = 0
        got = cross_entropy_loss(logits, targets, pad_id=PAD, label_smoothing=0.1, reduction="none")
        assert got.shape == targets.shape
        assert torch.allclose(got.double(), by_hand, atol=1e-5)


# ------------------------------------------------------------------------ exact search
V, EOS_ID, BOS_ID = 5, 2, 1  # tokens 3, 4 are words; 0 pad and 1 bos are never good


def random_table(seed, ties=False):
    rng = random.Random(seed)
    memo = {}

    def fn(prefix):
        key = tuple(prefix)
        if key not in memo:
            raw = [rng.choice([1.0, 2.0]) if ties else rng.random() + 0.01 for _ in range(V)]
            raw[0] = raw[1] = 1e-6
            total = sum(raw)
            memo[key] = [math.log(r / total) for r in raw]
        return memo[key]
    return fn


def brute_force(fn, max_len):
    best, best_seq = -math.inf, None
    for n in range(1, max_len + 1):
        for body in itertools.product([3, 4], repeat=n - 1):
            seq = list(body) + [EOS_ID]
            s = sequence_score(fn, seq, bos=BOS_ID)
            if s > best:
                best, best_seq = s, seq
    return best_seq, best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ties", [False, True])
def test_exact_search_equals_brute_force(seed, ties):
    fn = random_table(seed, ties)
    seq, score = brute_force(fn, 6)
    res = exact_search(fn, bos=BOS_ID, eos=EOS_ID, max_len=6)
    assert res.proven and res.score == pytest.approx(score, abs=1e-9)
    assert sequence_score(fn, res.tokens, bos=BOS_ID) == pytest.approx(score, abs=1e-9)
    # seeded with a beam search result: same optimum, never worse than the beam
    (beam,), = beam_search(TableStepper(fn), 1, beam=2, max_len=6)
    assert beam.score <= res.score + 1e-9
    seeded = exact_search(fn, bos=BOS_ID, eos=EOS_ID, max_len=6, lower_bound=(beam.tokens, beam.score))
    assert seeded.proven and seeded.score == pytest.approx(score, abs=1e-9)
    assert seeded.expansions <= res.expansions


def test_exact_search_budget_reports_unproven():
    # at the root EOS has probability 0.2 and each word 0.4: after one expansion the best
    # complete hypothesis is [EOS] (log 0.2) but both word branches (log 0.4) could still win
    fn = lambda prefix: [math.log(p) for p in (1e-9, 1e-9, 0.2, 0.4, 0.4)]
    res = exact_search(fn, bos=BOS_ID, eos=EOS_ID, max_len=5, max_expansions=1)
    assert not res.proven and res.expansions == 1
    assert res.tokens == [EOS_ID] and res.score == pytest.approx(math.log(0.2))
    assert exact_search(fn, bos=BOS_ID, eos=EOS_ID, max_len=5).proven


def test_beam_search_score_never_above_exact():
    for seed in range(8):
        fn = random_table(100 + seed)
        exact = exact_search(fn, bos=BOS_ID, eos=EOS_ID, max_len=7)
        for beam in (1, 2, 4):
            (hyp,), = beam_search(TableStepper(fn), 1, beam=beam, max_len=7)
            assert hyp.score <= exact.score + 1e-9


def test_model_scorer_reuses_cache_exactly_and_search_is_exact_on_a_model():
    from nbsupport.models import Transformer, TransformerConfig
    from nbsupport.search import ModelScorer
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=9, tgt_vocab=7, d_model=16, n_heads=2, d_ff=32,
                                          enc_layers=1, dec_layers=1, output="scones")).eval()
    src = torch.tensor([[4, 5, 6, 2]])
    cached, fresh = ModelScorer(model, src), ModelScorer(model, src, cache_size=0)
    for prefix in ([1], [1, 4], [1, 4, 5], [1, 6], [1, 4, 5, 3]):
        assert torch.allclose(cached(prefix), fresh(prefix), atol=1e-5)
    assert (cached(prefix) <= 0).all()                      # log-sigmoid scores
    words = [3, 4, 5, 6]
    best = max((sequence_score(fresh, list(body) + [2]), list(body) + [2])
               for n in range(0, 3) for body in itertools.product(words, repeat=n))
    res = exact_search(ModelScorer(model, src), max_len=3)
    assert res.proven and res.score == pytest.approx(best[0], abs=1e-5) and res.tokens == best[1]


def _batched(fn):
    return lambda prefixes: [fn(p) for p in prefixes]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_best_first_search_equals_brute_force(seed, ties, batch_size):
    fn = random_table(seed, ties)
    seq, score = brute_force(fn, 6)
    res = best_first_search(_batched(fn), bos=BOS_ID, eos=EOS_ID, max_len=6, batch_size=batch_size)
    assert res.proven and res.score == pytest.approx(score, abs=1e-9)
    assert sequence_score(fn, res.tokens, bos=BOS_ID) == pytest.approx(score, abs=1e-9)
    (beam,), = beam_search(TableStepper(fn), 1, beam=2, max_len=6)
    seeded = best_first_search(_batched(fn), bos=BOS_ID, eos=EOS_ID, max_len=6, lower_bound=(beam.tokens, beam.score),
                               batch_size=batch_size)
    assert seeded.proven and seeded.score == pytest.approx(score, abs=1e-9)


def flat_table(word_cost, eos_cost):
    """Every word costs the same and EOS costs more: many hypotheses score near the best, as
    under SCONES with a small alpha at high ambiguity; the best is the shortest, [w, EOS]."""
    def fn(prefix):
        return [-30.0, -30.0, -eos_cost if len(prefix) > 1 else -30.0, -word_cost, -word_cost]
    return fn


def test_best_first_proven_flag_against_brute_force_under_a_budget():
    """Proven only when the search finished: on a table where the proof needs every prefix above
    the optimum, a budget below that count leaves it unproven (with the best found so far, never
    above the true optimum), and the exact count of prefixes proves it."""
    fn = flat_table(0.1, 0.25)
    seq, score = brute_force(fn, 6)
    full = best_first_search(_batched(fn), bos=BOS_ID, eos=EOS_ID, max_len=6, batch_size=1)
    assert full.proven and full.score == pytest.approx(score) and full.tokens == seq
    # prefixes scoring above the optimum (-0.35): the root and the word prefixes of depths 1-3 (-0.1, -0.2, -0.3)
    above = 1 + sum(2 ** d for d in range(1, 7) if -0.1 * d > score + 1e-12)
    assert full.expansions == above
    for budget in range(1, above):
        cut = best_first_search(_batched(fn), bos=BOS_ID, eos=EOS_ID, max_len=6, batch_size=1, max_expansions=budget)
        assert not cut.proven and cut.expansions == budget and cut.score <= score + 1e-12
    assert best_first_search(_batched(fn), bos=BOS_ID, eos=EOS_ID, max_len=6, batch_size=4, max_expansions=above).proven


def test_batch_scorer_equals_the_cached_scorer_on_a_model_and_searches_exactly():
    from nbsupport.models import Transformer, TransformerConfig
    from nbsupport.search import BatchScorer, ModelScorer
    torch.manual_seed(0)
    for output in ("scones", "softmax"):
        model = Transformer(TransformerConfig(src_vocab=9, tgt_vocab=7, d_model=16, n_heads=2, d_ff=32,
                                              enc_layers=1, dec_layers=1, output=output)).eval()
        src = torch.tensor([[4, 5, 6, 2]])
        batched, single = BatchScorer(model, src), ModelScorer(model, src, cache_size=0)
        prefixes = [[1], [1, 4], [1, 4, 5], [1, 6], [1, 4, 5, 3]]     # different lengths in one padded batch
        for p, row in zip(prefixes, batched(prefixes)):
            assert torch.allclose(row, single(p), atol=1e-5)
        words = [3, 4, 5, 6]
        best = max((sequence_score(single, list(body) + [2]), list(body) + [2])
                   for n in range(0, 3) for body in itertools.product(words, repeat=n))
        res = best_first_search(BatchScorer(model, src), max_len=3, batch_size=8)
        assert res.proven and res.score == pytest.approx(best[0], abs=1e-5) and res.tokens == best[1]


# ------------------------------------------------------------------------ the notebooks' sweeps (06-09)
def _tiny_setup(seed=0):
    from nbsupport.data.vocab import WordVocab
    from nbsupport.models import Transformer, TransformerConfig
    src_v, tgt_v = WordVocab.build(["a b c d e f g"]), WordVocab.build(["u v w x y z"])
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(src_vocab=len(src_v), tgt_vocab=len(tgt_v), d_model=16, n_heads=2, d_ff=32,
                                          enc_layers=1, dec_layers=1, output="scones")).eval()
    srcs = ["a b c", "d e f g", "a c e", "b d f"]
    return model, src_v, tgt_v, srcs, [["u v"]] * len(srcs)


def test_exact_sweep_under_a_tiny_budget_is_at_least_every_beam():
    """Seeded with beam 4 only, a search stopped by its budget can return a best
    below beam 8's output, and search errors are then counted against a best too low."""
    from nbsupport.lessons import beam_curse
    from nbsupport.search import ModelScorer
    model, src_v, tgt_v, srcs, refs = _tiny_setup(13)   # a random model whose beam 8 beats beam 4
    beams = [1, 2, 4, 8]
    sweep = beam_curse.beam_sweep(model, src_v, tgt_v, srcs, refs, beams)
    scorers = [ModelScorer(model, torch.tensor([src_v.encode(s)])) for s in srcs]
    beam_scores = {b: [sequence_score(sc, sweep[b]["tokens"][i]) for i, sc in enumerate(scorers)] for b in beams}
    # the case the old seeding got wrong: beam 4 as the only lower bound, 1 model call
    old = [exact_search(sc, max_len=20, lower_bound=(sweep[4]["tokens"][i], beam_scores[4][i]), max_expansions=1)
           for i, sc in enumerate(scorers)]
    assert any(o.score < beam_scores[8][i] - 1e-3 for i, o in enumerate(old)), "the test needs beam 8 above the old result"
    with pytest.raises(ValueError, match="seed exact search"):
        beam_curse.search_errors(model, src_v, srcs, sweep[8]["tokens"], [o.score for o in old])
    ex = beam_curse.exact_sweep(model, src_v, tgt_v, srcs, refs, max_expansions=1,
                                candidates=beam_curse.candidates(sweep, len(srcs)))
    assert ex["proven_fraction"] < 1                                      # the budget did run out
    for i, best in enumerate(ex["scores"]):
        assert best >= max(beam_scores[b][i] for b in beams) - 1e-5
        assert ex["seed_scores"][i] == pytest.approx(max(beam_scores[b][i] for b in beams), abs=1e-5)
        assert sequence_score(scorers[i], ex["tokens"][i]) == pytest.approx(best, abs=1e-4)
    assert all(beam_curse.search_errors(model, src_v, srcs, sweep[b]["tokens"], ex["scores"]) >= 0 for b in beams)


def test_exact_sweep_scores_the_empty_translation_of_the_same_sentences():
    """Fig. 6 compares the best and the empty translation's log scores: both come
    from one sweep over the same sources, the empty one equal to an independent batched pass."""
    from nbsupport.lessons import beam_curse
    from nbsupport.data.batching import pad_batch
    from nbsupport.search import empty_scores
    model, src_v, tgt_v, srcs, refs = _tiny_setup(1)
    ex = beam_curse.exact_sweep(model, src_v, tgt_v, srcs[:3], refs[:3], max_expansions=50)
    batched = empty_scores(model, pad_batch([src_v.encode(s) for s in srcs[:3]])).tolist()
    assert len(ex["empty_scores"]) == len(ex["scores"]) == 3
    assert ex["empty_scores"] == pytest.approx(batched, abs=1e-5)
    # the empty translation is in the search space: the best (after >= 1 expansion) is no worse
    assert all(b >= e - 1e-6 for b, e in zip(ex["scores"], ex["empty_scores"]))


def test_batched_exact_sweep_finds_the_dfs_optimum_and_flags_search_errors():
    """exact_sweep with batch_size (best first) returns the depth-first search's scores and proofs;
    a search error is flagged only where the beam output differs from exact search's translation."""
    from nbsupport.lessons import beam_curse
    model, src_v, tgt_v, srcs, refs = _tiny_setup(13)
    sweep = beam_curse.beam_sweep(model, src_v, tgt_v, srcs, refs, [1, 4])
    cands = beam_curse.candidates(sweep, len(srcs))
    dfs = beam_curse.exact_sweep(model, src_v, tgt_v, srcs, refs, 5000, candidates=cands)
    bfs = beam_curse.exact_sweep(model, src_v, tgt_v, srcs, refs, 5000, candidates=cands, batch_size=16)
    assert dfs["proven"] == bfs["proven"] == [True] * len(srcs)
    assert bfs["scores"] == pytest.approx(dfs["scores"], abs=1e-4)
    matched = 0
    for b in (1, 4):
        flags = beam_curse.search_error_flags(model, src_v, srcs, sweep[b]["tokens"], bfs["scores"])
        # a beam output that is exact search's translation is no search error; a flagged one differs from it
        same = [list(t) == list(e) for t, e in zip(sweep[b]["tokens"], bfs["tokens"])]
        assert not any(f and s for f, s in zip(flags, same))
        matched += sum(same)
        assert beam_curse.search_errors(model, src_v, srcs, sweep[b]["tokens"], bfs["scores"]) == sum(flags) / len(flags)
    assert matched > 0                                   # the check above met sentences where beam found the optimum


def test_resampled_quality_estimates_are_the_metrics_and_subsets_are_their_own_corpus():
    import numpy as np
    from nbsupport import metrics, stats
    from nbsupport.lessons import beam_curse
    hyps = ["the cat sat .", "", "a dog ran home", "the bird sang loudly today", "the cat"]
    refs = [["the cat sat .", "a cat sat ."], ["the dog ran .", "a dog ran ."], ["a dog ran home", "the dog ran home"],
            ["the bird sang", "a bird sang today"], ["the cat sat", "a cat sat ."]]
    per = beam_curse.quality_stats(hyps, refs)
    r = beam_curse.resampled_quality(per, stats.Resamples(len(hyps), seed=0))
    by_hand = metrics.bleu_and_length(hyps, refs)
    assert r["multi_ref_bleu"].estimate == pytest.approx(by_hand["bleu"], abs=1e-6)
    assert r["bleu"].estimate == pytest.approx(metrics.bleu_and_length(hyps, [[x[0]] for x in refs])["bleu"], abs=1e-6)
    assert r["len_ratio"].estimate == pytest.approx(by_hand["len_ratio"], abs=1e-9)
    assert r["empty_rate"].estimate == pytest.approx(0.2) and len(r["empty_rate"].values) == stats.RESAMPLES
    assert np.all((r["empty_rate"].values >= 0) & (r["empty_rate"].values <= 1))
    sub = [0, 2, 3]
    on_sub = beam_curse.resampled_quality(per, stats.Resamples(3, seed=0), sub)
    direct = metrics.bleu_and_length([hyps[i] for i in sub], [refs[i] for i in sub])
    assert on_sub["multi_ref_bleu"].estimate == pytest.approx(direct["bleu"], abs=1e-6)
    assert on_sub["len_ratio"].estimate == pytest.approx(direct["len_ratio"], abs=1e-9)
    assert on_sub["empty_rate"].estimate == 0.0
    with pytest.raises(ValueError, match="resamples"):
        beam_curse.resampled_quality(per, stats.Resamples(4, seed=0), sub)


@pytest.mark.parametrize("profile_name, bible", [("full", True), ("lab", False)])
def test_softmax_and_scones_train_without_label_smoothing(monkeypatch, profile_name, bible):
    """The paper trains softmax and SCONES without label smoothing (section 3,
    appendix C); the Bible's default training has 0.1. Toy models keep their cache keys."""
    from nbsupport import pipeline
    from nbsupport.lessons import beam_curse
    from nbsupport.profiles import profile
    from nbsupport.train import TrainConfig
    cfg = profile(profile_name)
    training = cfg.bible_training if bible else cfg.toy_training
    seen = {}
    monkeypatch.setattr(pipeline, "train_or_load", lambda name, mc, tc, *a, **k: seen.setdefault(name, (mc, tc)) and (None, None))
    task = pipeline.Task("bible" if bible else "toy", None, range(50), range(60), None, None, {}, cfg.toy_model, training)
    alphas = {"softmax": None, "scones_0.2": 0.2, "scones_1.0": 1.0}
    models, _ = beam_curse.train_softmax_and_scones(task, alphas, "cpu", epochs=None if bible else 3)
    assert set(models) == set(alphas) and len(seen) == 3
    for name, alpha in alphas.items():
        mc, tc = seen[f"{task.name}-{name}"]
        assert tc.label_smoothing == 0.0 and mc.scones_alpha == (alpha or 1.0)
        assert mc.output == ("softmax" if alpha is None else "scones")
        if not bible:   # the training configuration is the task's, without label smoothing, 3 epochs
            assert tc == TrainConfig(seed=0, **{**training, "epochs": 3, "label_smoothing": 0.0})


def test_prefetched_softmax_and_scones_models_are_the_ones_the_notebooks_load(monkeypatch, caplog, tmp_path):
    """prefetch_softmax_and_scones trains every uncached model of several tasks (and extra jobs) in
    worker processes under the very cache keys train_softmax_and_scones and train_model use; a
    second prefetch has nothing to do (notebooks 06-09)."""
    caplog.set_level("INFO", logger="nbsupport.cache")
    from nbsupport import pipeline
    from nbsupport.lessons import beam_curse
    monkeypatch.setenv("NBS_THREADS", "2")
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))
    tasks = [pipeline.toy_task("ci", 0, n_styles=1, ambiguity=level, n_train=300) for level in ("low", "high")]
    alphas = {"softmax": None, "scones_0.5": 0.5}
    extra = {"name": "hard-moe-k2", "n_latent": 2, "training_overrides": {"epochs": 1}}
    trained = beam_curse.prefetch_softmax_and_scones([(t, {"epochs": 1}) for t in tasks], alphas, "cpu",
                                                     more_jobs=[(tasks[0], extra)])
    assert trained == ["hard-moe-k2", "softmax", "scones_0.5", "softmax", "scones_0.5"]   # extra jobs first
    assert beam_curse.prefetch_softmax_and_scones([(t, {"epochs": 1}) for t in tasks], alphas, "cpu", more_jobs=[(tasks[0], extra)]) == []
    caplog.clear()
    for t in tasks:
        beam_curse.train_softmax_and_scones(t, alphas, "cpu", epochs=1)
    pipeline.train_model(tasks[0], device="cpu", progress=False, **extra)
    assert caplog.text.count("loaded cached model") == 5
    assert not pipeline.is_cached(tasks[1], **extra)
