"""Multi-source LSTM (Zoph & Knight 2016): combiners against the paper's equations, local-p
attention's window, teacher-forced = incremental decoding, training on two sources."""
import math

import pytest
import torch

import nbsupport as nbs
from nbsupport.data.vocab import BOS, PAD
from nbsupport.models.lstm import (Attention, BasicCombiner, ChildSumCombiner, LSTMConfig, LSTMStepper,
                                   MultiSourceLSTM, reverse_padded)
from nbsupport.models.transformer import shift_right
from nbsupport.pipeline import train_or_load
from nbsupport.train import Encoded, TrainConfig

D = 8


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))


def states(seed=0, b=3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, D, generator=g) for _ in range(4)]   # h1, c1, h2, c2


def test_basic_combiner_is_eqs_1_and_2():
    torch.manual_seed(0)
    comb = BasicCombiner(D)
    h1, c1, h2, c2 = states()
    h, c = comb(h1, c1, h2, c2)
    w = comb.w_c.weight                                  # (D, 2D)
    assert h.shape == c.shape == (3, D)
    assert torch.allclose(h, torch.tanh(h1 @ w[:, :D].T + h2 @ w[:, D:].T), atol=1e-6)
    assert torch.equal(c, c1 + c2)


def test_child_sum_combiner_is_eqs_3_to_8():
    """A hand-written reference, one scalar at a time, from the eight matrices."""
    torch.manual_seed(1)
    comb = ChildSumCombiner(D)
    h1, c1, h2, c2 = states(1, b=2)
    with torch.no_grad():
        h, c = comb(h1, c1, h2, c2)
    assert h.shape == c.shape == (2, D)
    Wi1, Wo1, Wu1 = comb.w1.weight.detach().split(D)
    Wi2, Wo2, Wu2 = comb.w2.weight.detach().split(D)
    Wf1, Wf2 = comb.wf1.weight.detach(), comb.wf2.weight.detach()
    sig = lambda x: 1 / (1 + torch.exp(-x))
    for b in range(2):
        for k in range(D):
            dot = lambda W, x: sum(float(W[k, j]) * float(x[b, j]) for j in range(D))
            i = sig(torch.tensor(dot(Wi1, h1) + dot(Wi2, h2)))             # eq. 3
            f1, f2 = sig(torch.tensor(dot(Wf1, h1))), sig(torch.tensor(dot(Wf2, h2)))  # eq. 4
            o = sig(torch.tensor(dot(Wo1, h1) + dot(Wo2, h2)))             # eq. 5
            u = torch.tanh(torch.tensor(dot(Wu1, h1) + dot(Wu2, h2)))      # eq. 6
            c_ref = i * u + f1 * c1[b, k] + f2 * c2[b, k]                  # eq. 7
            assert abs(float(c[b, k]) - float(c_ref)) < 1e-5
            assert abs(float(h[b, k]) - float(o * torch.tanh(c_ref))) < 1e-5   # eq. 8


def test_local_p_attention_window():
    torch.manual_seed(2)
    att = Attention(D, "local", window=2)
    S, B = 12, 4
    st = torch.randn(B, S, D)
    lengths = torch.tensor([12, 9, 5, 1])
    mask = torch.arange(S)[None] < lengths[:, None]
    h = torch.randn(B, D)
    ctx, a = att(h, st, mask, lengths)
    assert ctx.shape == (B, D) and a.shape == (B, S)
    assert bool((a >= 0).all()) and bool((a.sum(-1) <= 1 + 1e-6).all())
    p_t = lengths * torch.sigmoid(att.v_p(torch.tanh(att.w_p(h)))).squeeze(-1)      # eq. 9
    outside = ((torch.arange(S)[None] - p_t[:, None]).abs() > 2) | ~mask
    assert float(a[outside].abs().max()) == 0.0
    assert bool((a.sum(-1) > 0).all())                          # something is always in the window
    assert torch.allclose(ctx, torch.einsum("bs,bsd->bd", a, st))
    # global attention: a distribution over the real tokens
    ctx, a = Attention(D, "global", 2)(h, st, mask, lengths)
    assert torch.allclose(a.sum(-1), torch.ones(B)) and float(a[~mask].abs().max()) == 0.0


def test_local_p_attention_is_eqs_9_to_12_by_hand():
    """Each weight a_t(s) computed from the paper's equations with scalar loops, W_a = w_a.weight.T
    (notebook 01's inline check once passed w_a.weight and printed "= package: False")."""
    torch.manual_seed(3)
    D_win, S = 2, 7
    att = Attention(D, "local", window=D_win)
    st, h = torch.randn(1, 9, D), torch.randn(1, D)
    lengths = torch.tensor([S])
    _, a = att(h, st, torch.arange(9)[None] < S, lengths)
    W_a, W_p, v_p = att.w_a.weight.detach().T, att.w_p.weight.detach(), att.v_p.weight.detach()[0]
    ht, hs = h[0], st[0]
    p_t = S * torch.sigmoid(v_p @ torch.tanh(W_p @ ht))                                    # eq. 9
    window = [s for s in range(S) if abs(s - float(p_t)) <= D_win]
    score = {s: float(sum(ht[i] * W_a[i, j] * hs[s, j] for i in range(D) for j in range(D))) for s in window}  # eq. 12
    z = sum(math.exp(v) for v in score.values())
    for s in range(9):
        expected = 0.0
        if s in window:                                                                   # eqs. 10-11, sigma = D/2
            expected = math.exp(score[s]) / z * math.exp(-(s - float(p_t)) ** 2 / (2 * (D_win / 2) ** 2))
        assert abs(float(a[0, s]) - expected) < 1e-5
    assert not torch.allclose(W_a, W_a.T)        # the transpose matters: a symmetric W_a would hide it


def test_reverse_padded():
    src = torch.tensor([[5, 6, 7, 2], [8, 2, PAD, PAD]])
    assert reverse_padded(src).tolist() == [[2, 7, 6, 5], [2, 8, PAD, PAD]]


def model(n_sources=2, attention="local", combiner="childsum", seed=0):
    torch.manual_seed(seed)
    return MultiSourceLSTM(LSTMConfig((13,) * n_sources, 11, d_model=16, layers=2, dropout=0.1,
                                      combiner=combiner, attention=attention, window=2)).eval()


def sources(n, b=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for j in range(n):
        s = torch.randint(4, 13, (b, 6 + j), generator=g)
        s[1, -2:] = PAD
        out.append(s)
    return tuple(out) if n > 1 else out[0]


@pytest.mark.parametrize("n,attention,combiner", [(1, "none", "basic"), (1, "local", "basic"),
                                                   (2, "none", "basic"), (2, "local", "childsum"),
                                                   (2, "global", "basic")])
def test_teacher_forced_equals_incremental(n, attention, combiner):
    m = model(n, attention, combiner)
    src = sources(n)
    tgt = torch.randint(4, 11, (3, 7), generator=torch.Generator().manual_seed(5))
    tgt_in = shift_right(tgt)
    with torch.no_grad():
        full = torch.log_softmax(m(src, tgt_in), -1)
        stepper = LSTMStepper(m, src)
        steps = [stepper(tgt_in[:, :t + 1]) for t in range(tgt_in.shape[1])]
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5)
    # reordering the stepper's rows = running it on reordered sources
    with torch.no_grad():
        idx = torch.tensor([2, 2, 0])
        a = LSTMStepper(m, src)
        a.reorder(idx)
        b = LSTMStepper(m, tuple(s[idx] for s in src) if n > 1 else src[idx])
        assert torch.allclose(a(tgt_in[idx, :1]), b(tgt_in[idx, :1]), atol=1e-6)


@pytest.mark.parametrize("layers,attention", [(1, "local"), (2, "local"), (2, "none")])
def test_written_out_decoder_cell_is_one_step_of_its_nn_lstm(layers, attention):
    """decoder_cell (layer 0's input gates precomputed, the feed's columns apart) = the model's
    own nn.LSTM run for one step on [x_t; h~_{t-1}], state and output, layer by layer."""
    torch.manual_seed(1)
    m = MultiSourceLSTM(LSTMConfig((13,), 11, d_model=D, layers=layers, dropout=0.3, attention=attention)).eval()
    g = torch.Generator().manual_seed(2)
    x, feed = torch.randn(4, D, generator=g), torch.randn(4, D, generator=g)
    hc = (torch.randn(layers, 4, D, generator=g), torch.randn(layers, 4, D, generator=g))
    inp = torch.cat([x, feed], -1) if attention != "none" else x
    with torch.no_grad():
        out, (h, c) = m.decoder(inp[:, None], hc)
        top, (h2, c2) = m.decoder_cell(m.input_gates(x), feed if attention != "none" else None, hc)
    assert torch.allclose(top, out[:, 0], atol=1e-6) and torch.allclose(h2, h, atol=1e-6) and torch.allclose(c2, c, atol=1e-6)


def test_the_combined_state_reaches_the_decoder():
    """Changing the second source changes the output: the combiner really merges."""
    m = model(2, "none", "basic")
    src = sources(2)
    other = (src[0], sources(2, seed=9)[1])
    tgt_in = torch.full((3, 1), BOS)
    with torch.no_grad():
        assert not torch.allclose(m(src, tgt_in), m(other, tgt_in))


def test_same_source_twice_runs_and_trains():
    g = torch.Generator().manual_seed(0)
    pairs = []
    for _ in range(64):
        s = torch.randint(4, 13, (5,), generator=g).tolist() + [2]
        pairs.append(((s, s), [t - 2 for t in s[:-1]] + [2]))        # the "translation" shifts ids
    data = Encoded([p[0] for p in pairs], [p[1] for p in pairs])
    batch = next(data.batches(10_000, shuffle=False, seed=0, device="cpu"))
    assert isinstance(batch[0], tuple) and len(batch[0]) == 2
    cfg = LSTMConfig((13, 13), 11, d_model=32, layers=1, dropout=0.0, combiner="childsum", attention="local", window=3)
    m, hist = train_or_load("t-ms", cfg, TrainConfig(epochs=25, max_tokens=40, lr=1e-2, warmup=100),
                            {"test": 1}, data, data, "cpu", progress=False)
    losses = [e["train_loss"] for e in hist.epochs]
    assert losses[-1] < 0.5 * losses[0]
    # cached: a second call loads the same weights
    m2, _ = train_or_load("t-ms", cfg, TrainConfig(epochs=25, max_tokens=40, lr=1e-2, warmup=100),
                          {"test": 1}, data, data, "cpu", progress=False)
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), m2.state_dict().values()))


def test_bad_input():
    with pytest.raises(ValueError, match="childsum"):
        LSTMConfig((5, 5), 5, combiner="sum")
    with pytest.raises(ValueError, match="local"):
        LSTMConfig((5,), 5, attention="soft")
    with pytest.raises(ValueError, match="1 or 2 sources"):
        LSTMConfig((5, 5, 5), 5)
    m = model(2)
    with pytest.raises(ValueError, match="2 source"):
        m.encode(sources(1))
    with pytest.raises(ValueError, match="unknown system"):
        nbs.multisource.MultiSourceData("toy", None, {}, None, 0, {}, {}, {}).langs("xx")


# ---- live translation and attention maps of any sources (notebook 01's widgets)
@pytest.fixture(scope="module")
def tiny_trilingual():
    """The trilingual toy at a tiny size with untrained (seeded) systems: the lesson functions
    must agree with the batched decoders whatever the weights."""
    from nbsupport.data.synthetic import ToyConfig, toy_trilingual
    from nbsupport.data.vocab import WordVocab
    corpus = toy_trilingual(ToyConfig(n_styles=1, n_train=200, n_dev=10, n_test=10, seed=0))
    vocabs = {lang: WordVocab.build(corpus.train.sources[lang]) for lang in corpus.train.sources}
    tgt = WordVocab.build(r for rs in corpus.train.refs for r in rs)
    data = nbs.multisource.MultiSourceData("toy", corpus, vocabs, tgt, 0, {}, {}, {})
    systems = {}
    for name in ("fr.attn", "fr+de.attn_basic", "fr+de.basic"):
        torch.manual_seed(1)
        langs = data.langs(name)
        _, combiner, attention = nbs.multisource.SYSTEMS[name]
        systems[name] = MultiSourceLSTM(LSTMConfig(tuple(len(vocabs[l]) for l in langs), len(tgt), d_model=16, layers=1,
                                                   dropout=0.0, combiner=combiner, attention=attention, window=3)).eval()
    return data, systems


@pytest.mark.parametrize("system", ["fr.attn", "fr+de.attn_basic"])
def test_attention_maps_of_source_strings_are_those_of_the_batched_test_set(tiny_trilingual, system):
    """attention_maps_of(strings) gives the test set's greedy output (decoded in one padded batch by
    multisource.translate) and, row by row, the attention weights of a teacher-forced padded batch
    of three test sentences; attention_maps(index) is the same for a test index."""
    data, systems = tiny_trilingual
    model, test, langs = systems[system], data.corpus.test, data.langs(system)
    batched = nbs.multisource.translate(model, data, system, "test", beam=1)
    idx = [2, 5, 7]
    srcs = tuple(nbs.data.batching.pad_batch([data.vocabs[l].encode(test.sources[l][i]) for i in idx]) for l in langs)
    outs = [nbs.decode.token_ids(nbs.decode.decode(model, tuple(s[j:j + 1, :int((s[j] != PAD).sum())] for s in srcs), "greedy"))[0][0]
            for j in range(3)]
    tgt = nbs.data.batching.pad_batch(outs)
    with torch.no_grad():
        memory, _ = model.encode(srcs)
        _, maps = model.decode(shift_right(tgt), memory, return_attention=True)
    for j, i in enumerate(idx):
        got = nbs.multisource.attention_maps_of(model, data, system, {l: test.sources[l][i] for l in langs})
        assert got["text"] == batched[i]
        assert got == nbs.multisource.attention_maps(model, data, system, i)
        for k, src in enumerate(got["sources"]):
            n = int((srcs[k][j] != PAD).sum())
            want = maps[k][j, :len(outs[j]), :n]
            want = want.flip(-1) if model.config.reverse_source else want
            assert src["tokens"] == [data.vocabs[langs[k]].decode([t]) or "</s>" for t in srcs[k][j, :n].tolist()]
            assert torch.allclose(torch.tensor(src["weights"]), want, atol=1e-5)


def test_translation_html_is_the_live_decoding_and_names_bad_input(tiny_trilingual):
    data, systems = tiny_trilingual
    test = data.corpus.test
    for system in ("fr+de.basic", "fr+de.attn_basic"):
        sources = {l: test.sources[l][3] for l in ("xa", "xb")}
        html = nbs.multisource.translation_html(systems[system], data, system, sources, beam=4)
        ids = nbs.decode.token_ids(nbs.decode.decode(systems[system], nbs.multisource.source_tensors(systems[system], data, system, sources),
                                  "beam", beam=4))[0][0]
        assert f"<b>{nbs.widgets.escape(data.tgt_vocab.decode(ids))}</b>" in html and "beam 4" in html
        assert ("attention on source xb" in html) == (system == "fr+de.attn_basic")
    with pytest.raises(ValueError, match="xb.*'zzzq'"):
        nbs.multisource.attention_maps_of(systems["fr+de.attn_basic"], data, "fr+de.attn_basic",
                                          {"xa": test.sources["xa"][0], "xb": "zzzq " + test.sources["xb"][0]})
    with pytest.raises(ValueError, match="no source given for xb"):
        nbs.multisource.translation_html(systems["fr+de.basic"], data, "fr+de.basic", {"xa": test.sources["xa"][0]})
    with pytest.raises(ValueError, match="empty"):
        nbs.multisource.translation_html(systems["fr.attn"], data, "fr.attn", {"xa": "  "})
    with pytest.raises(ValueError, match="no attention"):
        nbs.multisource.attention_maps_of(systems["fr+de.basic"], data, "fr+de.basic", sources)


def test_systems_trained_in_parallel_are_cached_and_loaded(monkeypatch, caplog):
    """On a CPU the uncached systems train in worker processes (costliest first); the notebook's
    train_system then loads each from the cache instead of training it again."""
    caplog.set_level("INFO", logger="nbsupport.cache")
    import os
    from nbsupport.lessons import multisource as ms
    from nbsupport.harness.workers import cpu_workers, run_in_processes
    monkeypatch.setenv("NBS_THREADS", "2")
    assert cpu_workers("cpu", 5) == 2 and cpu_workers("cpu", 1) == 1 and cpu_workers("cuda", 5) == 1
    monkeypatch.setenv("NBS_PARALLEL", "0")
    assert cpu_workers("cpu", 5) == 1
    monkeypatch.delenv("NBS_PARALLEL")
    # each worker gets its share of the threads, results come back in the jobs' order
    assert run_in_processes(os.getenv, [("NBS_THREADS",), ("NBS_THREADS",), ("NBS_THREADS",)], 2) == ["1"] * 3
    cfg = nbs.profile("ci")
    data = ms.toy_data(cfg, 0)
    data.training = {**data.training, "epochs": 1}
    systems = ["fr", "fr.attn", "fr"]
    assert ms.train_in_parallel(data, systems, "cpu") == ["fr.attn", "fr"]      # deduplicated, attention first
    assert all(ms.is_cached(data, s) for s in ("fr", "fr.attn")) and not ms.is_cached(data, "de")
    assert ms.train_in_parallel(data, systems, "cpu") == []                       # nothing left to train
    caplog.clear()
    model, hist = ms.train_system(data, "fr.attn", "cpu", progress=False)
    assert "loaded cached model" in caplog.text and hist.train_seconds > 0


def test_a_worker_exits_when_the_process_that_started_it_dies(tmp_path):
    """A killed or restarted notebook kernel must not leave its training workers running as
    orphans (they would hold the CPU and keep writing to the cache): harness.workers._exit_with."""
    import os
    import signal
    import subprocess
    import sys
    import time
    pid_file = tmp_path / "worker.pid"
    script = ("import os, sys, time\nfrom nbsupport.harness.workers import run_in_processes\n"
              "def job(path):\n    open(path, 'w').write(str(os.getpid()))\n    time.sleep(600)\n"
              "if __name__ == '__main__':\n    run_in_processes(job, [(sys.argv[1],)], 1)\n")
    (tmp_path / "kernel.py").write_text(script)
    kernel = subprocess.Popen([sys.executable, str(tmp_path / "kernel.py"), str(pid_file)], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.time() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline and kernel.poll() is None, "the worker never started"
        time.sleep(0.2)
    worker = int(pid_file.read_text())
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:            # a zombie awaiting its reaper is gone too
            return f.read().split(")")[-1].split()[0] != "Z"
    deadline = time.time() + 15
    while alive(worker) and time.time() < deadline:
        time.sleep(0.2)
    orphan = alive(worker)
    if orphan:
        os.kill(worker, signal.SIGKILL)
    assert not orphan, "the worker kept running after its parent was killed"


# ---- the generator's perplexity floor and per-sentence noun counts (notebook 01's saturation and bootstrap)
def _composed_corpus(ambiguity="none"):
    from nbsupport.data.synthetic import ToyConfig, toy_trilingual
    return toy_trilingual(ToyConfig(n_styles=1, n_train=0, n_dev=0, n_test=1, ambiguity=ambiguity, seed=0))


def test_floor_nll_by_hand():
    from nbsupport.data.synthetic import compose
    corpus, floor = _composed_corpus("low"), nbs.multisource.floor_nll
    dog_cat, dog_horse = compose("dog", "sees", "cat"), compose("dog", "sees", "horse")
    bare = "the dog sees the cat."
    # xa merges dog = cat and horse = bird: (dog, cat) or (cat, dog); dog or cat times horse or bird
    assert floor(corpus, ("xa",), dog_cat, bare) == pytest.approx(4 * math.log(2) + math.log(2))
    assert floor(corpus, ("xa",), dog_horse, bare) == pytest.approx(4 * math.log(2) + math.log(4))
    # xb merges child = dog and cat = horse: with xa every noun is determined
    assert floor(corpus, ("xa", "xb"), dog_cat, bare) == pytest.approx(4 * math.log(2))
    assert floor(corpus, ("xa",), compose("soldier", "sees", "girl"), bare) == pytest.approx(4 * math.log(2))
    # two optional phrases present (manner, time): each 1/2 to be there, then 1 of 2 words
    assert floor(corpus, ("xa", "xb"), dog_cat, "the dog sees the cat slowly at noon.") == pytest.approx(6 * math.log(2))
    assert floor(_composed_corpus("none"), ("xa", "xb"), dog_cat, bare) == 0.0


def test_floor_nll_counts_the_meanings_a_source_sentence_stands_for():
    """Brute force: every (subject, object) pair with the other parts fixed, grouped by the source
    sentences it produces; the floor is the log of its group's size (uniform pairs)."""
    from collections import Counter
    from nbsupport.data.synthetic import NOUNS, Meaning, trilingual_languages
    corpus = _composed_corpus()
    langs = trilingual_languages(0)
    for chosen in [("xa",), ("xb",), ("xc",), ("xa", "xb"), ("xa", "xc")]:
        meanings = [Meaning(s, None, 0, o, None, None) for s in range(len(NOUNS)) for o in range(len(NOUNS)) if s != o]
        text = lambda m: tuple(langs[l].source(m) for l in chosen)
        groups = Counter(text(m) for m in meanings)
        for m in meanings:
            assert nbs.multisource.floor_nll(corpus, chosen, m, "x") == pytest.approx(math.log(groups[text(m)]))


def test_perplexity_floor_and_noun_hits_on_the_toy():
    data = nbs.multisource.toy_data("ci", 0, n_train=50, n_test=40)
    assert nbs.multisource.perplexity_floor(data, "fr+de.basic") == 1.0      # no ambiguity: both sources decide
    assert nbs.multisource.perplexity_floor(data, "fr") > nbs.multisource.perplexity_floor(data, "fr+close.basic") > 1
    refs = [rs[0] for rs in data.corpus.test.refs]
    hits = nbs.multisource.merged_noun_hits(data.corpus, refs)
    # the references themselves: every noun right, two nouns per sentence
    assert all((h[:, 0] == h[:, 1]).all() for h in hits.values())
    assert (hits["merged nouns"][:, 1] + hits["other nouns"][:, 1] == 2).all()
    # a sentence with no noun gets none right; the pooled shares are merged_noun_accuracy's
    wrong = ["the the ."] + refs[1:]
    h = nbs.multisource.merged_noun_hits(data.corpus, wrong)
    assert h["merged nouns"][0, 0] == h["other nouns"][0, 0] == 0
    acc = nbs.multisource.merged_noun_accuracy(data.corpus, wrong)
    for k, v in h.items():
        assert acc[k] == pytest.approx(v[:, 0].sum() / v[:, 1].sum())
    # by hand, from the meanings: every noun right except sentence 0's two
    from nbsupport.data.synthetic import NOUNS
    merged = {NOUNS.index(n) for m in data.corpus.info["merged_nouns"].values() for senses in m.values() for n in senses}
    kinds = [["merged nouns" if n in merged else "other nouns" for n in (m.subj, m.obj)] for m in data.corpus.test.meanings]
    for k in acc:
        total, missed = sum(ks.count(k) for ks in kinds), kinds[0].count(k)
        assert acc[k] == pytest.approx((total - missed) / total)
    with pytest.raises(ValueError, match="hypotheses for"):
        nbs.multisource.merged_noun_hits(data.corpus, refs[:3])


def test_toy_data_variants_are_cached_apart():
    base = nbs.multisource.toy_data("ci", 0)
    hard = nbs.multisource.toy_data("ci", 0, n_train=300, n_test=30, ambiguity="low", training={"epochs": 3},
                                    model={"dropout": 0.3})
    assert base.key["config"]["n_train"] == 2000 and base.key["config"]["ambiguity"] == "none"
    assert (len(hard.corpus.train), len(hard.corpus.test), hard.training["epochs"], hard.model_sizes["dropout"]) == (300, 30, 3, 0.3)
    assert hard.training["max_tokens"] == base.training["max_tokens"]       # the rest: the profile's
    assert len(hard.corpus.test.refs[0]) == 4                                # ambiguity: four sampled references
    paths = {nbs.pipeline.model_key_and_path(*nbs.multisource._configs(d, "fr", 0))[1] for d in (base, hard)}
    assert len(paths) == 2


def test_pairs_of_two_data_sets_train_in_parallel_and_are_cached_apart(monkeypatch):
    from nbsupport.lessons import multisource as ms
    monkeypatch.setenv("NBS_THREADS", "2")
    base = ms.toy_data("ci", 0, n_train=200, n_test=10, training={"epochs": 1})
    variant = ms.toy_data("ci", 0, n_train=100, n_test=10, training={"epochs": 1}, model={"dropout": 0.3})
    pairs = [(base, "fr"), (variant, "fr"), (base, "fr")]
    trained = ms.train_pairs_in_parallel(pairs, "cpu")
    assert [(d is base, s) for d, s in trained] == [(True, "fr"), (False, "fr")]   # more data first; deduplicated
    assert ms.is_cached(base, "fr") and ms.is_cached(variant, "fr") and ms.train_pairs_in_parallel(pairs, "cpu") == []


def test_resampled_scores_are_the_scores_of_each_resampled_test_set():
    from nbsupport import stats
    from nbsupport.lessons import multisource as ms
    data = ms.toy_data("ci", 0, n_train=50, n_test=30)
    refs = [rs[0] for rs in data.corpus.test.refs]
    rng = __import__("random").Random(0)
    hyps = [r if rng.random() < 0.6 else " ".join(reversed(r.split())) for r in refs]   # some nouns swapped
    boot = stats.Resamples(len(hyps), resamples=3, seed=1)
    got = ms.resampled_scores(data, hyps, boot)
    acc = ms.merged_noun_accuracy(data.corpus, hyps)
    assert got["bleu"].estimate == pytest.approx(nbs.metrics.corpus_bleu(hyps, refs))
    assert got["merged nouns"].estimate == pytest.approx(acc["merged nouns"])
    hits = ms.merged_noun_hits(data.corpus, hyps)
    for r, counts in enumerate(boot.counts.astype(int)):
        picked = [i for i, c in enumerate(counts) for _ in range(c)]
        assert got["bleu"].values[r] == pytest.approx(nbs.metrics.corpus_bleu([hyps[i] for i in picked], [refs[i] for i in picked]))
        for k, h in hits.items():
            assert got[k].values[r] == pytest.approx(h[picked, 0].sum() / h[picked, 1].sum())


def test_resampled_perplexity_is_the_perplexity_of_each_resampled_test_set():
    """The estimate is evaluate_system's perplexity; each resample's value is the perplexity of the
    test set that resample draws (its sentences repeated as drawn), scored by evaluate_loss."""
    from nbsupport import stats
    from nbsupport.lessons import multisource as ms
    data = ms.toy_data("ci", 0, n_train=50, n_test=12)
    langs = data.langs("fr+de.basic")
    torch.manual_seed(0)
    model = MultiSourceLSTM(LSTMConfig(tuple(len(data.vocabs[l]) for l in langs), len(data.tgt_vocab), d_model=16,
                                       layers=1, dropout=0.0)).eval()
    boot = stats.Resamples(12, resamples=3, seed=2)
    got = ms.resampled_perplexity(model, data, "fr+de.basic", boot)
    test = data.encoded("test", langs)
    assert got.estimate == pytest.approx(math.exp(nbs.train.evaluate_loss(model, test, 4096, "cpu")), rel=1e-6)   # float32 sums in evaluate_loss
    for r, counts in enumerate(boot.counts.astype(int)):
        picked = [i for i, c in enumerate(counts) for _ in range(c)]
        drawn = Encoded([test.src[i] for i in picked], [test.tgt[i] for i in picked])
        assert got.values[r] == pytest.approx(math.exp(nbs.train.evaluate_loss(model, drawn, 4096, "cpu")), rel=1e-6)
    with pytest.raises(ValueError, match="resamples are of 5"):
        ms.resampled_perplexity(model, data, "fr+de.basic", stats.Resamples(5, resamples=2))
