"""Multi-source translation experiments (Zoph & Knight 2016): the systems of Figure 4,
their data, training through the shared cached loop, and evaluation (perplexity, BLEU
against the training target, multi-reference BLEU, attention maps for Figure 5).

Roles name the source languages as the paper does: ``fr`` and ``de`` (on the trilingual
toy its first and second source language, "xa" and "xb"), ``fr2`` a second French
translation (the Bible only: Ostervald beside Louis Segond).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import matplotlib.pyplot as plt
import numpy as np

from ..data import bible
from ..data.batching import pad_batch
from ..data.synthetic import CHOICES, Corpus, NOUNS, OPTIONAL, ToyConfig, meaning_parts, toy_trilingual, trilingual_languages
from ..data.vocab import BOS, PAD, WordVocab, train_sentencepiece
from ..decode import decode, token_ids
from ..metrics import corpus_bleu
from ..models.lstm import LSTMConfig, MultiSourceLSTM
from ..profiles import Profile, profile
from ..runtime import setup
from ..pipeline import model_key_and_path, train_or_load, train_several
from ..train import Encoded, TrainConfig, _autocast, evaluate_loss
from ..data import synthetic as syn
from ..stats import Resampled, corpus_stats
from ..views.live import composed_view, heat_table, source_ids
from ..views.plots import error_bars
from ..views.tables import table
from ..views.widgets import escape, explore

# name -> (source roles, combiner, attention): Figure 4's rows, plus the two-versions control.
SYSTEMS = {
    "fr": (("fr",), "basic", "none"),
    "de": (("de",), "basic", "none"),
    "fr+de.basic": (("fr", "de"), "basic", "none"),
    "fr+de.childsum": (("fr", "de"), "childsum", "none"),
    "fr+fr.same": (("fr", "fr"), "childsum", "none"),        # the paper's control: French twice
    "fr.attn": (("fr",), "basic", "local"),
    "fr+de.attn_basic": (("fr", "de"), "basic", "local"),
    "fr+de.attn_childsum": (("fr", "de"), "childsum", "local"),
    "fr+fr.two_versions": (("fr", "fr2"), "childsum", "none"),  # beyond the paper (Bible only)
    "fr+close.basic": (("fr", "close"), "basic", "none"),       # Fig. 6 in miniature (toy only)
    "close": (("close",), "basic", "none"),                     # its other single source (toy only)
}
ROLES = {"toy": {"fr": "xa", "de": "xb", "close": "xc"},
         "bible": {"fr": "l", "fr2": "o", "de": "e"}}
BIBLE_TARGET = "4"   # the training target (World English Bible); the test also has KJV, BBE, YLT


@dataclass
class MultiSourceData:
    dataset: str                 # "toy" or "bible"
    corpus: Corpus
    vocabs: dict                 # language code -> vocabulary
    tgt_vocab: object
    target_index: int            # which reference of each example is the training target
    key: dict
    model_sizes: dict
    training: dict

    def langs(self, system: str) -> tuple[str, ...]:
        if system not in SYSTEMS:
            raise ValueError(f"unknown system {system!r}; valid: {', '.join(SYSTEMS)}")
        roles = SYSTEMS[system][0]
        missing = [r for r in roles if r not in ROLES[self.dataset]]
        if missing:
            raise ValueError(f"system {system!r} needs {missing} which the {self.dataset} data does not have")
        return tuple(ROLES[self.dataset][r] for r in roles)

    def has(self, system: str) -> bool:
        """Does this data set have every source language ``system`` needs?"""
        return all(r in ROLES[self.dataset] for r in SYSTEMS[system][0])

    def encoded(self, split: str, langs: tuple[str, ...]) -> Encoded:
        """(sources, training-target reference) pairs of a split."""
        unknown = [l for l in langs if l not in self.vocabs]
        if unknown:
            roles = ", ".join(f"{r} = {c!r}" for r, c in ROLES[self.dataset].items())
            raise ValueError(f"unknown source language(s) {unknown}; the {self.dataset} data has "
                             f"{', '.join(map(repr, self.vocabs))} (roles: {roles}; data.langs(system) maps a system)")
        s = self.corpus.split(split)
        only_target = type(s)(s.sources, [[rs[self.target_index]] for rs in s.refs], s.labels, s.meanings)
        return Encoded.multi_source(only_target, langs, [self.vocabs[l] for l in langs], self.tgt_vocab)


def toy_data(cfg: Profile | str, seed: int = 0, n_train: int | None = None, n_test: int | None = None,
             ambiguity: str = "none", training: dict | None = None, model: dict | None = None) -> MultiSourceData:
    """The trilingual toy: two source languages with complementary merged nouns. By default the
    profile's sizes and no ambiguity; ``n_train``, ``n_test`` (also the dev size), ``ambiguity`` and
    ``training`` / ``model`` (settings that replace the profile's) make a variant, cached apart."""
    cfg = profile(cfg)              # a profile name is accepted too
    ms = cfg.multi_source
    n_test = cfg.toy_test if n_test is None else n_test
    tc = ToyConfig(n_styles=1, n_train=ms["toy_train"] if n_train is None else n_train, n_dev=n_test, n_test=n_test,
                   ambiguity=ambiguity, seed=seed)
    corpus = toy_trilingual(tc)
    vocabs = {lang: WordVocab.build(corpus.train.sources[lang]) for lang in corpus.train.sources}
    tgt = WordVocab.build(r for rs in corpus.train.refs for r in rs)
    key = {"dataset": corpus.name, "config": asdict(tc)}
    return MultiSourceData("toy", corpus, vocabs, tgt, 0, key, {**ms["toy_model"], **(model or {})},
                           {**ms["toy_training"], **(training or {})})


def bible_data(cfg: Profile | str) -> MultiSourceData:
    """The Bible: French (Segond, Ostervald) and German (Elberfelder) sources, English
    targets; one version (WEB) is the training target, all four are test references."""
    cfg = profile(cfg)              # a profile name is accepted too
    ms = cfg.multi_source
    codes = tuple(ROLES["bible"].values())
    corpus = bible.corpus(sources=codes, targets=bible.ENGLISH_REFERENCES, **cfg.bible_limits())
    n = cfg.spm_sentences
    vocabs = {c: train_sentencepiece(corpus.train.sources[c][:n], cfg.spm_vocab, name=f"spm-{c}") for c in codes}
    t = bible.ENGLISH_REFERENCES.index(BIBLE_TARGET)
    tgt = train_sentencepiece([rs[t] for rs in corpus.train.refs[:n]], cfg.spm_vocab, name=f"spm-{BIBLE_TARGET}")
    key = {"dataset": "bible", "target": BIBLE_TARGET, "verses": len(corpus.train), "test_limit": cfg.bible_test,
           **({"dev_limit": cfg.bible_dev} if cfg.bible_dev else {}), "spm": sorted(v.path.name for v in [*vocabs.values(), tgt])}
    return MultiSourceData("bible", corpus, vocabs, tgt, t, key, ms["bible_model"], ms["bible_training"])


def _configs(data: MultiSourceData, system: str, seed: int):
    langs = data.langs(system)
    _, combiner, attention = SYSTEMS[system]
    mc = LSTMConfig(tuple(len(data.vocabs[l]) for l in langs), len(data.tgt_vocab),
                    combiner=combiner, attention=attention, **data.model_sizes)
    return f"{data.dataset}-multisource-{system}", mc, TrainConfig(seed=seed, **data.training), {**data.key, "langs": langs}


def train_system(data: MultiSourceData, system: str, device, seed: int = 0, progress: bool = True):
    """A cached model of ``system`` (see :data:`SYSTEMS`); returns (model, history)."""
    name, mc, tc, key = _configs(data, system, seed)
    langs = key["langs"]
    return train_or_load(name, mc, tc, key, data.encoded("train", langs), data.encoded("dev", langs), device, progress)


def is_cached(data: MultiSourceData, system: str, seed: int = 0) -> bool:
    return model_key_and_path(*_configs(data, system, seed))[1].exists()


def _train_in_worker(data: MultiSourceData, system: str, seed: int) -> float:
    setup(seed, "cpu", threads=torch.get_num_threads())   # the worker's share
    return train_system(data, system, "cpu", seed, progress=False)[1].train_seconds


def train_in_parallel(data: MultiSourceData, systems, device, seed: int = 0) -> list[str]:
    """Train the systems not yet cached, several at once on a CPU (one process per core, see
    :func:`nbsupport.pipeline.train_several`); each is cached, so :func:`train_system` then loads it.
    On a GPU, or with one worker, nothing happens here (train_system trains them one by one).
    Returns the systems trained."""
    return [s for _, s in train_pairs_in_parallel([(data, s) for s in systems], device, seed)]


def train_pairs_in_parallel(pairs, device, seed: int = 0) -> list[tuple[MultiSourceData, str]]:
    """:func:`train_in_parallel` for (data, system) pairs of several data sets (a variant of the
    toy beside the default one): the uncached ones, several at once on a CPU. Returns those trained."""
    return [(d, s) for d, s, _ in train_jobs_in_parallel([(d, s, seed) for d, s in pairs], device)]


def train_jobs_in_parallel(jobs, device) -> list[tuple[MultiSourceData, str, int]]:
    """:func:`train_in_parallel` for (data, system, model seed) triples (several seeds of a system, as
    a reproduction trains them): the uncached ones, several at once on a CPU. Returns those trained."""
    todo, seen = [], set()
    for data, s, seed in jobs:
        path = model_key_and_path(*_configs(data, s, seed))[1]
        if path not in seen and not path.exists():
            seen.add(path)
            todo.append((data, s, seed))
    # the costliest first (input feeding runs the decoder step by step; two sources cost more; more data)
    todo.sort(key=lambda p: (SYSTEMS[p[1]][2] != "none", len(SYSTEMS[p[1]][0]),
                             len(p[0].corpus.train) * p[0].training.get("epochs", 1)), reverse=True)
    several = len({id(d) for d, _, _ in todo}) > 1
    seeds = len({seed for _, _, seed in todo}) > 1
    names = ", ".join(f"{s}" + (f" [{len(d.corpus.train)} triples]" if several else "") + (f" seed {seed}" if seeds else "")
                      for d, s, seed in todo)
    if not todo or not train_several(_train_in_worker, todo, device, f"systems ({names})"):
        return []
    return todo


def resampled_scores(data: MultiSourceData, hyps: list[str], boot, refs=None, split: str = "test") -> dict:
    """Corpus BLEU of one hypothesis per sentence (against ``refs``, default: the training target's
    reference, as :func:`evaluate_system`'s ``bleu``) and the merged / other noun accuracies, each
    a :class:`nbsupport.stats.Resampled` on the resamples ``boot`` of the sentences."""
    s = data.corpus.split(split)
    refs = [[rs[data.target_index]] for rs in s.refs] if refs is None else refs
    out = {"bleu": Resampled(corpus_bleu(hyps, refs), boot.bleu(corpus_stats(hyps, refs)))}
    for k, h in merged_noun_hits(data.corpus, hyps, split).items():
        with np.errstate(invalid="ignore", divide="ignore"):
            out[k] = Resampled(float(h[:, 0].sum() / h[:, 1].sum()), boot.mean(h[:, 0]) / boot.mean(h[:, 1]))
    return out


@torch.no_grad()
def sentence_nll(model: MultiSourceLSTM, data: MultiSourceData, system: str, split: str = "test"):
    """Per sentence of a split: the NLL (nats) of its training-target reference and that reference's
    token count (the end marker included), the two sums :func:`evaluate_system`'s perplexity divides;
    two numpy arrays in the split's order."""
    model.eval()
    device = next(model.parameters()).device
    enc = data.encoded(split, data.langs(system))
    nll, tokens = np.zeros(len(enc)), np.zeros(len(enc))
    for batch in enc.batches(4096, shuffle=False, seed=0, device=device):      # evaluate_system's batches
        with _autocast(device):
            nll[batch.idx] = model.validation_nll(batch, TrainConfig()).double().cpu().numpy()
        tokens[batch.idx] = (batch.tgt_out != PAD).sum(-1).cpu().numpy()
    return nll, tokens


def resampled_perplexity(model: MultiSourceLSTM, data: MultiSourceData, system: str, boot, split: str = "test"):
    """Figure 4's perplexity (:func:`evaluate_system`'s ``ppl``) as a :class:`nbsupport.stats.Resampled`
    on the resamples ``boot`` of the sentences: exp of the resampled NLL over the resampled tokens."""
    nll, tokens = sentence_nll(model, data, system, split)
    if len(nll) != boot.n:
        raise ValueError(f"{len(nll)} {split} sentences, but the resamples are of {boot.n}")
    return Resampled(math.exp(nll.sum() / tokens.sum()), np.exp(boot.mean(nll) / boot.mean(tokens)))


def _batches(data: MultiSourceData, langs, split: str, batch_size: int, device):
    s = data.corpus.split(split)
    enc = [[data.vocabs[l].encode(x) for x in s.sources[l]] for l in langs]
    for lo in range(0, len(s), batch_size):
        yield tuple(pad_batch(e[lo:lo + batch_size]).to(device) for e in enc)


@torch.no_grad()
def translate(model: MultiSourceLSTM, data: MultiSourceData, system: str, split: str = "test", beam: int = 4,
              batch_size: int = 64) -> list[str]:
    """The 1-best (beam search; beam 1 = greedy) of every source of a split."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for src in _batches(data, data.langs(system), split, batch_size, device):
        ids = token_ids(decode(model, src, "greedy" if beam == 1 else "beam", beam=beam))
        out += [data.tgt_vocab.decode(hs[0]) for hs in ids]
    return out


def evaluate_system(model: MultiSourceLSTM, data: MultiSourceData, system: str, split: str = "test",
                    beam: int = 4) -> dict:
    """Figure 4's columns: test perplexity of the training-target references, BLEU against
    them (single reference, as the paper), and BLEU against all the split's references."""
    device = next(model.parameters()).device
    langs = data.langs(system)
    nll = evaluate_loss(model, data.encoded(split, langs), 4096, device)
    hyps = translate(model, data, system, split, beam)
    refs = data.corpus.split(split).refs
    res = {"ppl": math.exp(nll), "bleu": corpus_bleu(hyps, [r[data.target_index] for r in refs])}
    if len(refs[0]) > 1:
        res["multi_ref_bleu"] = corpus_bleu(hyps, refs)
    res["hyps"] = hyps
    return res


def source_tensors(model: MultiSourceLSTM, data: MultiSourceData, system: str, sources: dict) -> tuple:
    """One source sentence per language of ``system`` (``sources``: language code -> text, e.g.
    ``{"xa": ..., "xb": ...}``) as the tuple of (1, length) tensors the model reads; a missing
    language, an empty text, a word the model cannot encode or a too long text is a ValueError
    naming it (:func:`nbsupport.views.live.source_ids`)."""
    langs = data.langs(system)
    missing = [l for l in langs if l not in sources]
    if missing:
        raise ValueError(f"system {system!r} reads {', '.join(langs)}: no source given for {', '.join(missing)}")
    device = next(model.parameters()).device
    ids = []
    for lang in langs:
        try:
            ids.append(source_ids(sources[lang], data.vocabs[lang], model.config.max_len))
        except ValueError as err:
            raise ValueError(f"source {lang}: {err}") from None
    return tuple(torch.tensor([i], device=device) for i in ids)


def decode_sources(model: MultiSourceLSTM, data: MultiSourceData, system: str, sources: dict, beam: int = 1) -> list[int]:
    """The token ids of the model's translation of one set of sources (greedy for beam 1, else
    the 1-best of beam search), decoded there and then."""
    srcs = source_tensors(model, data, system, sources)
    return decode(model, srcs, "greedy" if beam == 1 else "beam", beam=beam)[0][0].tokens


@torch.no_grad()
def attention_maps_of(model: MultiSourceLSTM, data: MultiSourceData, system: str, sources: dict, beam: int = 1):
    """Figure 5 for any sources (language code -> text): the model's output (greedy, or the
    1-best of a beam) and per source the attention weights a_t(s) that produced it (output
    tokens x source tokens, in reading order)."""
    if model.config.attention == "none":
        raise ValueError(f"system {system!r} has no attention")
    model.eval()
    langs = data.langs(system)
    srcs = source_tensors(model, data, system, sources)
    out = decode(model, srcs, "greedy" if beam == 1 else "beam", beam=beam)[0][0].tokens
    tgt = torch.tensor([out], device=srcs[0].device)
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)   # BOS + output
    memory, _ = model.encode(srcs)
    _, maps = model.decode(tgt_in, memory, return_attention=True)
    result = {"output": [data.tgt_vocab.decode([t]) or "</s>" for t in out], "text": data.tgt_vocab.decode(out),
              "sources": []}
    for lang, src, a in zip(langs, srcs, maps):
        ids = src[0].tolist()
        weights = a[0].cpu()
        if model.config.reverse_source:            # the encoder read the source reversed
            weights = weights.flip(-1)
        result["sources"].append({"lang": lang, "tokens": [data.vocabs[lang].decode([t]) or "</s>" for t in ids],
                                  "weights": weights.tolist()})
    return result


def attention_maps(model: MultiSourceLSTM, data: MultiSourceData, system: str, index: int, split: str = "test"):
    """Figure 5 for example ``index`` of a split: :func:`attention_maps_of` its sources."""
    s = data.corpus.split(split)
    if not 0 <= index < len(s):
        raise ValueError(f"index must be in 0..{len(s) - 1}, got {index}")
    return attention_maps_of(model, data, system, {l: s.sources[l][index] for l in data.langs(system)})


def attention_html(maps: dict, names=None) -> str:
    """Figure 5 as HTML heat tables, one per source: rows the output tokens, columns the
    source's tokens in reading order, each cell's weight printed and shaded (darker = larger).
    ``names`` (optional, language code -> display name) labels the sources."""
    return "".join(heat_table(maps["output"], src["tokens"], src["weights"], log=False,
                              title=f"attention on source {(names or {}).get(src['lang'], src['lang'])} (as written)") for src in maps["sources"])


def translation_html(model: MultiSourceLSTM, data: MultiSourceData, system: str, sources: dict, beam: int = 1,
                     names=None) -> str:
    """What ``system`` answers for ``sources`` (language code -> text), decoded live: its
    translation (greedy, or the 1-best of a beam), and for an attention system the attention
    weights of each source behind every output token. ``names`` (optional, language code -> display
    name) labels the sources, e.g. {"xa": "fr"}."""
    how = "greedy" if beam == 1 else f"beam {beam}"
    langs = [(names or {}).get(l, l) for l in data.langs(system)]
    if model.config.attention == "none":
        text = data.tgt_vocab.decode(decode_sources(model, data, system, sources, beam))
        note = " (no attention: the decoder sees the sources only through the combined final states)"
        return f"<b>{escape(system)}</b> reads {escape(' + '.join(langs))}, {how}: <b>{escape(text)}</b>{escape(note)}"
    maps = attention_maps_of(model, data, system, sources, beam)
    return (f"<b>{escape(system)}</b> reads {escape(' + '.join(langs))}, {how}: <b>{escape(maps['text'])}</b>"
            f"<div>{attention_html(maps, names)}</div>")


def floor_nll(corpus: Corpus, langs, meaning, reference: str) -> float:
    """The least NLL (nats) any model reading ``langs`` can give ``reference`` of ``meaning`` on
    the trilingual toy: log of the number of (subject, object) noun pairs the source words allow
    (the generator draws two different nouns uniformly), plus the ambiguity's optional phrases
    (each present with probability 1/2, then one of k words), read off the reference."""
    words = corpus.info["noun_words"]

    def senses(noun: int) -> set[int]:
        return {n for n in range(len(NOUNS)) if all(words[l][n] == words[l][noun] for l in langs)}
    subjects, objects = senses(meaning.subj), senses(meaning.obj)
    pairs = sum(1 for a in subjects for b in objects if a != b)
    k_opt, k_word = CHOICES[corpus.info["config"]["ambiguity"]]
    if k_word > 1:
        raise ValueError("floor_nll covers ambiguity 'none' and 'low' (one surface form per content word)")
    nll = math.log(pairs)
    if k_opt:
        tokens = set(reference.replace(".", " ").replace(",", " ").replace("!", " ").replace(";", " ").split())
        for _, _, choices in OPTIONAL:
            present = any(c in tokens for c in choices[:k_opt])
            nll += math.log(2) + (math.log(k_opt) if present else 0.0)
    return nll


def perplexity_floor(data: MultiSourceData, system: str, split: str = "test") -> float:
    """The lowest test perplexity the toy's generator allows a system reading ``system``'s sources
    (:func:`floor_nll` per reference, over the reference tokens and end markers the perplexity
    of :func:`evaluate_system` counts)."""
    if data.dataset != "toy":
        raise ValueError("the perplexity floor is known for the toy data only")
    s, langs = data.corpus.split(split), data.langs(system)
    refs = [rs[data.target_index] for rs in s.refs]
    nll = sum(floor_nll(data.corpus, langs, m, r) for m, r in zip(s.meanings, refs))
    return math.exp(nll / sum(len(data.tgt_vocab.encode(r)) for r in refs))


def merged_noun_hits(corpus: Corpus, hyps: list[str], split: str = "test") -> dict:
    """Per sentence, for "merged nouns" and "other nouns" (:func:`merged_noun_accuracy`): an
    (n, 2) array of the nouns translated right and the nouns there were (0, 1 or 2 each), so
    that a bootstrap can resample the sentences (accuracy = resampled right / resampled total).
    Nouns are read from the output in order (the toy's one style is active voice: subject first,
    object second)."""
    merged = {NOUNS.index(n) for m in corpus.info["merged_nouns"].values() for senses in m.values() for n in senses}
    meanings = corpus.split(split).meanings
    if len(hyps) != len(meanings):
        raise ValueError(f"{len(hyps)} hypotheses for {len(meanings)} {split} sentences")
    out = {"merged nouns": np.zeros((len(hyps), 2)), "other nouns": np.zeros((len(hyps), 2))}
    for i, (meaning, hyp) in enumerate(zip(meanings, hyps)):
        found = [w for w in hyp.replace(".", " ").split() if w in NOUNS]
        for slot, noun in enumerate((meaning.subj, meaning.obj)):
            row = out["merged nouns" if noun in merged else "other nouns"][i]
            row += (len(found) > slot and found[slot] == NOUNS[noun], 1)
    return out


def merged_noun_accuracy(corpus: Corpus, hyps: list[str], split: str = "test") -> dict[str, float]:
    """On the trilingual toy: the share of subject/object nouns translated right, among the
    nouns the source languages merge (each language merges the same eight nouns, paired
    differently: one source leaves a 50/50 guess, the two together determine the noun) and
    among the other nouns (the totals of :func:`merged_noun_hits`)."""
    totals = {k: h.sum(0) for k, h in merged_noun_hits(corpus, hyps, split).items()}
    return {k: float(right / n) if n else float("nan") for k, (right, n) in totals.items()}


# --- Notebook 01's tables, figures and printed readings (the lesson keeps its algorithms inline) ---

# The paper's BLEU (WMT, single reference), typed from its Figure 4 (French, German -> English) and Figure 6
# (English, French -> German): the language each role plays there, and each system's numbers.
PAPER_LANGUAGE = {4: {"fr": "French", "de": "German"}, 6: {"fr": "English", "close": "French"}}
# per system, typed from the paper: (figure, its BLEU, the BLEU of its first source alone, None for one source)
PAPER_BLEU = {"fr": (4, 21.0, None), "de": (4, 17.3, None), "fr+fr.same": (4, 20.7, 21.0), "fr+de.basic": (4, 23.2, 21.0),
              "fr+de.childsum": (4, 22.5, 21.0), "fr+de.attn_basic": (4, 30.0, 25.2), "fr+de.attn_childsum": (4, 29.6, 25.2),
              "fr+close.basic": (6, 14.5, 13.4)}
_PARTICLES = {"ga": "subj.", "el": "subj.", "o": "obj.", "al": "obj."}   # the toy's subject and object markers


def _role_of(data: MultiSourceData) -> dict:
    return {c: r for r, c in ROLES[data.dataset].items()}


def _senses(corpus: Corpus, langs, noun: int) -> list[int]:
    words = corpus.info["noun_words"]
    return [n for n in range(len(NOUNS)) if all(words[l][n] == words[l][noun] for l in langs)]


def merges_table(data: MultiSourceData) -> str:
    """A table of each toy source's merged words and the two English nouns each one stands for."""
    merged = data.corpus.info["merged_nouns"]
    return table([[r, ", ".join(f"{w} = {'/'.join(s)}" for w, s in merged[c].items())] for r, c in ROLES["toy"].items()],
                 ["source", "merged words"])


def merged_subject_example(data: MultiSourceData, split: str = "test") -> int:
    """The index of the first sentence of a split whose subject `fr` merges and whose object no source merges."""
    fr, langs = ROLES["toy"]["fr"], ROLES["toy"].values()
    alone = lambda noun: all(len(_senses(data.corpus, [l], noun)) == 1 for l in langs)
    return next(i for i, m in enumerate(data.corpus.split(split).meanings)
                if len(_senses(data.corpus, [fr], m.subj)) > 1 and alone(m.obj))


def window_note(data: MultiSourceData) -> str:
    """One sentence: the longest toy source (with </s>) against the attention window D of the lesson's models."""
    longest = max(len(x.split()) + 1 for part in (data.corpus.train, data.corpus.test)
                  for xs in part.sources.values() for x in xs)
    D = data.model_sizes["window"]
    return (f"longest toy source: {longest} positions with </s>, window D = {D}: "
            + ("the window never cuts a toy source" if longest <= D else "the window cuts the longest toy sources"))


def score_system(model: MultiSourceLSTM, data: MultiSourceData, system: str, boot) -> tuple[dict, dict]:
    """(the results record of ``system``: ppl, ppl_floor, bleu, noun_accuracy, intervals, parameters;
    its BLEU and merged / other noun shares as :class:`nbsupport.stats.Resampled` on ``boot``)."""
    ev = evaluate_system(model, data, system)                       # test perplexity, BLEU, the beam-4 outputs
    scores = resampled_scores(data, ev.pop("hyps"), boot)
    record = {"ppl": ev["ppl"], "ppl_floor": perplexity_floor(data, system), "bleu": ev["bleu"],
              "noun_accuracy": {k: scores[k].estimate for k in ("merged nouns", "other nouns")},
              "intervals": {k: r.interval().to_dict() for k, r in scores.items()},
              "parameters": model.n_parameters()}
    return record, scores


def paper_bleu(system: str) -> str:
    """The paper's BLEU for ``system`` (:data:`PAPER_BLEU`), its first source alone before it where it reads two:
    "Fig. 4: French 21.0 -> French+German 23.2"; "-" for a system the paper has no number for."""
    if system not in PAPER_BLEU:
        return "-"
    fig, bleu, alone = PAPER_BLEU[system]
    languages = [PAPER_LANGUAGE[fig][role] for role in system.split(".")[0].split("+")]
    before = f"{languages[0]} {alone:.1f} -> " if alone is not None else ""
    return f"Fig. {fig}: {before}{'+'.join(languages)} {bleu:.1f}" + (", both with attention" if "attn" in system else "")


def expected_merged_share(data: MultiSourceData, system: str) -> float:
    """The best expected share of `fr`'s merged nouns a reader of ``system``'s sources gets right: 1 for a
    noun its sources decide, a coin flip (1/senses) for one they leave ambiguous."""
    merged = [n for n in range(len(data.corpus.info["noun_words"][ROLES["toy"]["fr"]]))
              if len(_senses(data.corpus, [ROLES["toy"]["fr"]], n)) > 1]
    langs = data.langs(system)
    return sum(1 / len(_senses(data.corpus, langs, n)) for n in merged) / len(merged)


def merged_nouns_figure(data: MultiSourceData, intervals: dict):
    """Bars: each system's share of merged nouns translated right (``intervals``: system -> Interval),
    with a red mark at :func:`expected_merged_share`."""
    names = list(intervals)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    ax.barh(names, [intervals[n].estimate for n in names], color="steelblue", capsize=3,
            xerr=error_bars([intervals[n] for n in names]))
    ax.scatter([expected_merged_share(data, n) for n in names], names, marker="|", s=500, lw=2.5, color="crimson",
               zorder=3, label="best expected share its sources allow (section 1)")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("share of merged nouns translated right (95% interval)")
    ax.set_ylabel("system")
    ax.legend(loc="lower center", bbox_to_anchor=(0.4, 1.0), fontsize=8, frameon=False, markerscale=0.5)
    fig.tight_layout()
    return fig


def explore_meanings(models: dict, data: MultiSourceData, interactive: bool = True) -> None:
    """The "try it" view: a meaning composed from dropdowns, written in the toy's sources, with a
    system's translation (and its attention); opens on `fr+de.attn_basic` and *the dog sees the cat*."""
    parts, names, beams = meaning_parts(), _role_of(data), {"greedy": 1, "beam 4": 4}
    subjects = [n for n in parts["subject"] if n != "cat"] + ["cat"]   # "cat" last: the default dog/cat pair

    def render_meaning(system="fr+de.attn_basic", decoding="greedy", subject="dog", verb="sees", object="cat",
                       subject_adj="-", object_adj="-", place="-"):
        translate = lambda sources: translation_html(models[system], data, system, sources, beams[decoding], names=names)
        return composed_view(data.corpus, translate=translate, names=names, subject=subject, verb=verb, object=object,
                             subject_adj=subject_adj, object_adj=object_adj, place=place)
    explore(render_meaning, interactive, system=list(models)[::-1], decoding=list(beams), subject=subjects,
            verb=parts["verb"], object=parts["object"], subject_adj=parts["subject_adj"],
            object_adj=parts["object_adj"], place=parts["place"])


def gloss(data: MultiSourceData, lang: str) -> dict:
    """Source word of toy language ``lang`` -> its English meaning (a merged noun's senses joined by '/')."""
    lex = _lexicons(data)[lang]
    g = dict(_PARTICLES)
    for english, own in ((syn.ADJECTIVES, lex.adj), ([v[0][0] for v in syn.VERBS], lex.verb),
                         (syn.PREPOSITIONS, lex.prep), (syn.PLACES, lex.place)):
        g.update(zip(own, english))
    return g | {w: "/".join(n for n, x in zip(syn.NOUNS, lex.noun) if x == w) for w in lex.noun}


def attention_figure(model: MultiSourceLSTM, data: MultiSourceData, system: str, index: int = 0):
    """Figure 5 for test sentence ``index``: one heat map of a_t(s) per source, stacked, its words written
    level with their English gloss below, each row's total weight on the right, colour bars, and the
    output and reference in the title."""
    maps = attention_maps(model, data, system, index)
    n_out = len(maps["output"])
    fig, axes = plt.subplots(len(maps["sources"]), 1, figsize=(8.5, len(maps["sources"]) * (1.3 + 0.27 * n_out)),
                             squeeze=False)
    for ax, src in zip(axes[:, 0], maps["sources"]):
        g = gloss(data, src["lang"])
        image = ax.imshow(src["weights"], cmap="Greys", aspect="auto", vmin=0, vmax=1)
        ax.set_xticks(range(len(src["tokens"])), [f"{t}\n({g[t]})" if t in g else t for t in src["tokens"]], fontsize=8)
        ax.set_yticks(range(n_out), maps["output"], fontsize=8)
        ax.set_xlabel(f"source {_role_of(data)[src['lang']]} (as written)")
        ax.set_ylabel("output token")
        totals = ax.secondary_yaxis("right")                          # each row's total weight: faint rows look nowhere
        totals.set_yticks(range(n_out), [f"{sum(row):.2f}" for row in src["weights"]], fontsize=7)
        totals.set_ylabel("row's total", fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.04, pad=0.1, label="weight $a_t(s)$")
    fig.suptitle(f"{system}, test sentence {index}: {maps['text']!r}\n(reference: {data.corpus.test.refs[index][0]!r})",
                 fontsize=9)
    fig.tight_layout()
    return fig


def noun_attention_shares(model: MultiSourceLSTM, data: MultiSourceData, system: str, n: int) -> dict:
    """Per source role, over the first ``n`` test sentences: (share of the output nouns' attention on the
    noun's own source word, share on </s>, both of all the weight the noun rows carry together; the
    mean total weight of a noun row)."""
    lexicons = _lexicons(data)
    mass = {}
    for i in range(n):
        maps = attention_maps(model, data, system, i)
        for src in maps["sources"]:
            m = mass.setdefault(_role_of(data)[src["lang"]], [0.0, 0.0, 0.0, 0])   # on its word, on </s>, all, rows
            for tok, row in zip(maps["output"], src["weights"]):
                if tok in NOUNS:
                    own = lexicons[src["lang"]].noun[NOUNS.index(tok)]          # the noun's word in this source
                    m[0] += sum(a for a, x in zip(row, src["tokens"]) if x == own)
                    m[1] += sum(a for a, x in zip(row, src["tokens"]) if x == "</s>")
                    m[2] += sum(row)
                    m[3] += 1
    return {role: (w / total, e / total, total / rows) for role, (w, e, total, rows) in mass.items() if total > 0}


def _lexicons(data: MultiSourceData) -> dict:
    return trilingual_languages(data.corpus.info["config"]["seed"])


def shares_table(shares: dict) -> str:
    """A table of :func:`noun_attention_shares`: per source, the noun rows' mean total weight, the shares on
    the noun's word and on </s>, and where that weight mostly sits (either share at 50% or more; else "split")."""
    where = lambda w, e: "on </s>" if e >= 0.5 else "on the noun's own word" if w >= 0.5 else "split"
    return table([[r, f"{t:.2f}", f"{w:.0%}", f"{e:.0%}", where(w, e)] for r, (w, e, t) in shares.items()],
                 ["source", "row's total weight (mean)", "share on the noun's word", "share on </s>", "mostly"])
