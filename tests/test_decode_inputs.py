"""translation.translate / decode.decode: sampling streams across batches, z per batch, bad input."""
import math

import pytest
import torch

import nbsupport as nbs
from nbsupport.decode import decode, token_ids
from nbsupport.translation import translate
from nbsupport.models import Transformer, TransformerConfig

WORDS = [f"w{i}" for i in range(8)]
VOCAB = nbs.data.WordVocab(WORDS)          # 4 specials + 8 words = 12 ids, source and target


def tiny_model(k=1):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(src_vocab=len(VOCAB), tgt_vocab=len(VOCAB), d_model=32, n_heads=4,
                                         d_ff=64, enc_layers=1, dec_layers=1, dropout=0.0, n_latent=k)).eval()


def run(model, sentences, method="greedy", **kw):
    return translate(model, VOCAB, VOCAB, sentences, method, **kw)


def test_sampling_streams_do_not_repeat_across_batches():
    # the same source 2 x 16 times, in batches of 16: before the fix, sentence i and i+16
    # drew the same random numbers (the generator was re-seeded per batch) and so got the
    # same samples, all 16 of them; independent draws agree about as often as neighbours
    # within one batch do (a random model's samples rarely coincide)
    model, sents, kw = tiny_model(), ["w1 w2 w3"] * 32, dict(n=2, batch_size=16, max_len_a=0, max_len_b=8)
    out = run(model, sents, "sampling", seed=3, **kw)
    across = sum(out[i] == out[i + 16] for i in range(16))
    within = sum(out[i] == out[i + 1] for i in range(15))
    assert across < 16 and across <= within + 2
    assert out == run(model, sents, "sampling", seed=3, **kw)      # the whole call is reproducible
    assert out != run(model, sents, "sampling", seed=4, **kw)
    # the first batch is what a single generate call with the same seed gives
    src = nbs.data.pad_batch([VOCAB.encode(s) for s in sents[:16]])
    first = token_ids(decode(model, src, "sampling", n=2, seed=3, max_len_a=0, max_len_b=8))
    assert out[:16] == [[VOCAB.decode(h) for h in hs] for hs in first]


def test_z_is_cut_per_batch_and_an_int_means_every_sentence():
    model = tiny_model(k=3)
    sents = [f"w{i % 8} w{(i // 8) % 8} w{(i * 3) % 8}" for i in range(70)]   # 70 > one batch of 64
    z = torch.arange(70) % 3
    together = run(model, sents, z=z, max_len_b=4)     # rejected before the fix (all 70 z per batch)
    for i in (0, 63, 64, 65, 69):
        assert together[i] == run(model, [sents[i]], z=int(z[i]), max_len_b=4)[0]
    assert run(model, sents[:5], z=2) == run(model, sents[:5], z=torch.full((5,), 2))
    assert run(model, sents[:5], "beam", n=2, beam=2, z=1) == run(model, sents[:5], "beam", n=2, beam=2,
                                                                    z=torch.ones(5, dtype=torch.long))


def test_a_bare_string_is_rejected():
    with pytest.raises(TypeError, match=r"bare string.*\[sentence\]"):
        run(tiny_model(), "w1 w2")
    with pytest.raises(TypeError, match="sentence 1 must be a string"):
        run(tiny_model(), ["w1", 3])


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="sampling", temperature=0), "temperature must be a finite number > 0"),
    (dict(method="sampling", temperature=-1.0), "temperature must be a finite number > 0"),
    (dict(method="sampling", temperature=math.nan), "temperature must be a finite number > 0"),
    (dict(method="topk", top_k=0), "top_k must be an integer >= 1"),
    (dict(method="nucleus", top_p=0), r"top_p must be a number in \(0, 1\]"),
    (dict(method="nucleus", top_p=1.5), r"top_p must be a number in \(0, 1\]"),
    (dict(method="sampling", n=0), "n must be an integer >= 1"),
    (dict(method="sampling", n=2.0), "n must be an integer >= 1"),
    (dict(method="beam", beam=0), "beam must be an integer >= 1"),
    (dict(method="diverse_beam", n=2, groups=0), "groups must be an integer >= 1"),
    (dict(method="diverse_beam", n=2, diversity=-0.5), "diversity must be a finite number >= 0"),
    (dict(max_len_b=0), "max_len_b must be an integer >= 1"),
    (dict(max_len_a=-1), "max_len_a must be a finite number >= 0"),
    (dict(batch_size=0), "batch_size must be an integer >= 1"),
    (dict(seed=-1), "seed must be an integer >= 0"),
    (dict(method="greedy", n=3), "greedy decoding gives one hypothesis"),
    (dict(z="0"), "z must be None, an int"),
])
def test_bad_decoding_arguments_name_the_valid_range(kwargs, message):
    kwargs = {"method": "greedy", **kwargs}
    with pytest.raises((ValueError, TypeError), match=message):
        run(tiny_model(), ["w1 w2", "w3"], kwargs.pop("method"), **kwargs)


def test_bad_latent_arguments():
    model = tiny_model(k=3)
    with pytest.raises(ValueError, match=r"one entry per sentence \(2\), got shape \(3,\)"):
        run(model, ["w1 w2", "w3"], z=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="out of range"):
        run(model, ["w1 w2", "w3"], z=3)
    with pytest.raises(ValueError, match="do not pass z"):
        run(model, ["w1 w2", "w3"], "latent_greedy", z=0)
    with pytest.raises(ValueError, match="n is K=3, got n=2"):
        run(model, ["w1 w2", "w3"], "latent_greedy", n=2)
    assert run(model, ["w1 w2"], "latent_greedy", n=3) == run(model, ["w1 w2"], "latent_greedy")


# ---------------------------------------------------------------- bad input said, with the valid values
def test_unknown_words_are_named_unless_asked_to_map_them_to_unk():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"source sentence 1 .*'🙂'.*unknown='unk'"):
        run(model, ["w1 w2", "🙂 w3"])
    with pytest.raises(ValueError, match=r"'zz', 'yy'"):
        translate(model, VOCAB, VOCAB, ["zz w1 yy"], "beam", 2)
    mapped = run(model, ["🙂 🙂", "w1"], unknown="unk")
    assert len(mapped) == 2
    unk = nbs.data.pad_batch([[VOCAB.unk, VOCAB.unk, VOCAB.eos]])
    assert mapped[0] == [VOCAB.decode(h) for h in token_ids(decode(model, unk))[0]]     # the emoji became <unk>
    with pytest.raises(ValueError, match="'error'.*'unk'"):
        run(model, ["w1"], unknown="skip")


def test_a_sentencepiece_vocabulary_names_the_characters_it_never_saw(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path))
    sp = nbs.data.train_sentencepiece(["the cat sat on the mat", "a dog ran far away"] * 20, 30, name="spm_unknown")
    assert sp.unknown_words("the cat sat") == []
    assert sp.unknown_words("the 🙂 cat Ω") == ["🙂", "Ω"]


def test_diverse_beam_with_more_groups_than_beams_is_an_error():
    model, src = tiny_model(), nbs.data.pad_batch([VOCAB.encode("w1 w2")])
    with pytest.raises(ValueError, match=r"4 groups needs a beam of at least 4"):
        token_ids(decode(model, src, "diverse_beam", n=2, beam=2, groups=4))
    with pytest.raises(ValueError, match=r"groups can be 1\.\.2"):
        nbs.decode.DiverseBeam(n=1, beam=2, groups=3)
    assert len(token_ids(decode(model, src, "diverse_beam", n=2, beam=2, groups=2))[0]) == 2


@pytest.mark.parametrize("make", [
    lambda **kw: TransformerConfig(src_vocab=12, tgt_vocab=12, **kw),
    lambda **kw: nbs.models.LSTMConfig((12,), 12, **kw),
])
@pytest.mark.parametrize("dropout", [1.5, 1.0, -0.1, "0.1", True])
def test_model_configs_reject_a_dropout_outside_0_1(make, dropout):
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\)"):
        make(dropout=dropout)
    make(dropout=0.0)
    make(dropout=0.5)


def test_model_configs_reject_sizes_below_one():
    with pytest.raises(ValueError, match="d_ff must be an integer >= 1, got 0"):
        TransformerConfig(src_vocab=12, tgt_vocab=12, d_ff=0)
    with pytest.raises(ValueError, match="layers must be an integer >= 1"):
        nbs.models.LSTMConfig((12,), 12, layers=0)
    with pytest.raises(ValueError, match="anneal_fraction must be in"):
        nbs.models.vnmt.VNMTConfig(anneal_fraction=1.5)


def test_strategies_built_directly_check_their_settings():
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        nbs.decode.Sampling(n=0)
    with pytest.raises(ValueError, match="temperature"):
        nbs.decode.Sampling(temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        nbs.decode.Sampling(top_p=1.5)
    model, src = tiny_model(), nbs.data.pad_batch([VOCAB.encode("w1 w2")])
    by_name = nbs.decode.decode(model, src, "beam", 2)
    assert by_name == nbs.decode.decode(model, src, nbs.decode.Beam(n=2, beam=2))     # a name, or the object
    with pytest.raises(TypeError, match="a search object carries its own settings"):
        nbs.decode.decode(model, src, nbs.decode.Beam(n=2, beam=2), beam=3)
    with pytest.raises(TypeError, match=r"unknown decoding options \['beams'\]"):
        nbs.decode.decode(model, src, "beam", beams=3)
