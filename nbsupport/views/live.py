"""Live views: render functions that call the model on what the student chose or wrote.

Each function takes a trained model, the vocabularies and the control values, decodes there
and then (greedy per latent value, beam search with its n-best, sampling, per-token scores,
exact search within a budget), and returns HTML to read at a glance: hypotheses side by side
with the words that differ highlighted, scores beside them, heat maps of per-token log
probabilities. Bad input (an empty sentence, a word the model cannot encode, a sentence longer
than the model's limit, a latent value out of range) raises a ValueError that names the
problem; :func:`nbsupport.views.widgets.explore` shows it in the view. Nothing here trains.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

from ..data.batching import pad_batch
from ..data.vocab import EOS
from ..decode import MAX_LEN_A, MAX_LEN_B, as_latent, beam_search, decode, max_lengths, token_ids, token_scores
from .widgets import escape

# !important: JupyterLab's rendered-HTML style right-aligns table cells, which broke the hypotheses' columns
CSS = ("<style>.nbs-live td,.nbs-live th{padding:2px 8px;text-align:left !important;font-family:monospace}"
       ".nbs-live mark{background:#ffe08a} .nbs-live tr.chosen{background:#e6f0ff}</style>")


# --------------------------------------------------------------------------- input
def unknown_words(sentence: str, vocab) -> list[str]:
    """Words of ``sentence`` the vocabulary does not know (a word vocabulary; a sentencepiece
    model encodes any text it has the characters of, so the widgets check the toy's words only)."""
    if not hasattr(vocab, "stoi"):
        return []
    return vocab.unknown_words(sentence)


def source_ids(sentence, vocab, max_len: int | None = None) -> list[int]:
    """The ids of one source sentence, or a ValueError saying what is wrong with it."""
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError("the source is empty: pick a sentence or write one")
    unknown = unknown_words(sentence, vocab)
    if unknown:
        raise ValueError(f"the model cannot encode {', '.join(map(repr, unknown))}: not in its vocabulary "
                         f"({len(vocab)} words, e.g. {', '.join(vocab.itos[4:9])}); the toy languages are "
                         "invented, so compose a sentence from the toy's words or pick a test sentence")
    ids = vocab.encode(sentence)
    if max_len is not None and len(ids) > max_len:
        raise ValueError(f"the source has {len(ids)} tokens, more than the model's limit of {max_len}")
    return ids


def source_tensor(sentences: Sequence[str], vocab, model) -> torch.Tensor:
    device = next(model.parameters()).device
    return pad_batch([source_ids(s, vocab, model.config.max_len) for s in sentences]).to(device)


def check_latent(z, k: int, what: str = "latent value") -> int:
    if isinstance(z, bool) or not isinstance(z, int) or not 0 <= z < k:
        raise ValueError(f"the {what} must be one of 0..{k - 1}, got {z!r}")
    return z


# --------------------------------------------------------------------------- HTML
def marked(hyps: Sequence[str]) -> list[str]:
    """Each hypothesis as HTML with the words that not all hypotheses share highlighted."""
    sets = [set(h.split()) for h in hyps]
    shared = set.intersection(*sets) if sets else set()
    return [" ".join(escape(w) if w in shared else f"<mark>{escape(w)}</mark>" for w in h.split()) or "<i>(empty)</i>"
            for h in hyps]


def compare_table(labels: Sequence[str], hyps: Sequence[str], extra: dict | None = None, chosen: int | None = None,
                  title: str = "", column: str = "hypothesis", mark: bool = True) -> str:
    """An HTML table: one row per hypothesis, its label, the words that differ highlighted (unless not
    ``mark``), and ``extra`` columns (name -> one value per row)."""
    extra = extra or {}
    head = "".join(f"<th>{escape(n)}</th>" for n in ["", column, *extra])
    rows = []
    for i, (label, h) in enumerate(zip(labels, marked(hyps) if mark else [escape(h) or "<i>(empty)</i>" for h in hyps])):
        cells = "".join(f"<td>{escape(v[i])}</td>" for v in extra.values())
        rows.append(f"<tr{' class=chosen' if i == chosen else ''}><td>{escape(label)}</td><td>{h}</td>{cells}</tr>")
    caption = f"<caption style='text-align:left'>{escape(title)}</caption>" if title else ""
    return f"<table class='nbs-live'>{caption}<tr>{head}</tr>{''.join(rows)}</table>"


def heat_table(row_labels: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float]],
               title: str = "", log: bool = True) -> str:
    """A heat map as an HTML table: cell (r, c) shows values[r][c], darker for a larger
    probability: a log probability (``log``, printed to 1 decimal) or a probability such as an
    attention weight (printed to 2)."""
    def cell(v):
        p = math.exp(max(v, -20.0)) if log else min(max(v, 0.0), 1.0)
        shade = int(255 - 155 * p)                            # p = 1 -> dark, p -> 0 -> white
        return f"<td style='background:rgb({shade},{shade},255)'>{v:.{1 if log else 2}f}</td>"
    head = "".join(f"<th>{escape(c)}</th>" for c in ["", *columns])
    rows = "".join(f"<tr><td>{escape(l)}</td>{''.join(cell(v) for v in vs)}</tr>" for l, vs in zip(row_labels, values))
    caption = f"<caption style='text-align:left'>{escape(title)}</caption>" if title else ""
    return f"<table class='nbs-live' style='display:inline-table;margin-right:16px'>{caption}<tr>{head}</tr>{rows}</table>"


def page(*parts: str):
    from IPython.display import HTML
    return HTML(CSS + "".join(f"<div style='margin:4px 0; overflow-x:auto'>{p}</div>" for p in parts))


def _line(label: str, text: str) -> str:
    return f"<b>{escape(label)}</b> {escape(text)}"


def _tokens(vocab, ids: Sequence[int]) -> list[str]:
    return [vocab.decode([t]) or ("</s>" if t == EOS else f"<{t}>") for t in ids]


# --------------------------------------------------------------------------- views
def latent_view(model, src_vocab, tgt_vocab, sentence: str, z: int = 0, references: Sequence[str] = (),
                name: str = "z"):
    """All K latent values (or domains) decoded greedily on ``sentence``, side by side, value
    ``z``'s row marked; below, the per-token log probability of z's hypothesis under every
    latent value: the words where z's own row is much likelier than the others' are the ones
    that z, and only z, chose (*why* z wrote it)."""
    k = model.config.n_latent
    check_latent(z, k, name)
    src = source_tensor([sentence], src_vocab, model)
    ids = token_ids(decode(model, src, "latent_greedy", k))[0]
    hyps = [tgt_vocab.decode(h) for h in ids]
    per_value, own = _scores_under_each_latent(model, src, ids, z)
    totals = [f"{sum(s):.2f}" for s in own]
    parts = [_line("source:", sentence)]
    if references:
        parts.append(compare_table([f"reference {i}" for i in range(len(references))], list(references),
                                   column="reference", title="the references (not used by the model)"))
    parts.append(compare_table([f"{name}={v}" for v in range(k)], hyps, {"log p(own)": totals}, chosen=z,
                               title=f"greedy decoding under each {name} (differing words highlighted; "
                                     f"{name}={z} marked)"))
    parts.append(heat_table([f"under {name}={v}" for v in range(k)], _tokens(tgt_vocab, ids[z]), per_value,
                            title=f"log p of each token of {name}={z}'s hypothesis under every {name}: "
                                  f"where row {z} is dark blue and the others pale, that word is {name}={z}'s choice"))
    return page(*parts)


def _scores_under_each_latent(model, src, ids, z: int):
    """Per-token log scores of hypothesis ``ids[z]`` under every latent value, and of each
    ``ids[v]`` under its own value v: two batched passes, one row per latent value."""
    k = len(ids)
    rows, zs = src.repeat(k, 1), torch.arange(k, device=src.device)
    return token_scores(model, rows, [ids[z]] * k, z=zs), token_scores(model, rows, ids, z=zs)


def fixed_latent_view(model, src_vocab, tgt_vocab, sentences: Sequence[str], z: int = 0, name: str = "z"):
    """One latent value over many sources at once (the seed paper Table 4, live): does z always write
    the same style?"""
    k = model.config.n_latent
    check_latent(z, k, name)
    src = source_tensor(sentences, src_vocab, model)
    out = [tgt_vocab.decode(hs[0].tokens) for hs in decode(model, src, "greedy", z=z)]
    rows = "".join(f"<tr><td>{escape(s)}</td><td>{escape(h)}</td></tr>" for s, h in zip(sentences, out))
    return page(f"<table class='nbs-live'><caption style='text-align:left'>{escape(name)}={z} on "
                f"{len(sentences)} sources: the same style every time?</caption>"
                f"<tr><th>source</th><th>{escape(name)}={z} writes</th></tr>{rows}</table>")


def beam_view(model, src_vocab, tgt_vocab, sentence: str, beam: int = 4, n_best: int = 5, z=None,
              reference: str | None = None, exact_budget: int = 0):
    """Beam search of size ``beam`` on ``sentence``, live: its n-best with their scores (summed log
    scores, no length normalisation, as the notebooks' beam search), the empty translation's
    score, and, with ``exact_budget`` > 0, exact search's answer within that many expansions
    (seeded with the beam's best as a lower bound)."""
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise ValueError(f"the beam size must be an integer >= 1, got {beam!r}")
    src = source_tensor([sentence], src_vocab, model)
    limit = max_lengths(src, MAX_LEN_A, MAX_LEN_B, model.config.max_len)
    hyps = beam_search(model.stepper(src, as_latent(z, 1, src.device)), 1, beam, limit, n_best=min(n_best, beam))[0]
    empty = token_scores(model, src, [[EOS]], z=z)[0][0]
    texts = [tgt_vocab.decode(h.tokens) for h in hyps]
    parts = [_line("source:", sentence)] + ([_line("reference:", reference)] if reference else [])
    parts.append(compare_table([f"#{i + 1}" for i in range(len(hyps))], texts,
                               {"log score": [f"{h.score:.2f}" for h in hyps], "tokens": [len(h.tokens) for h in hyps]},
                               chosen=0, title=f"beam {beam}: its {len(hyps)} best (the first is the translation)"))
    if hyps[0].tokens == [EOS]:
        verdict = "the beam's best IS the empty translation (the beam search curse)"
    else:   # token_scores sums in fp32, beam search in fp64: compare with a tolerance
        verdict = "the empty translation beats the beam's best" if empty > hyps[0].score + 1e-4 else \
            "the beam's best beats it"
    parts.append(_line("the empty translation (EOS first):", f"log score {empty:.2f}: {verdict}"))
    if exact_budget:
        from ..search import ModelScorer, exact_search
        res = exact_search(ModelScorer(model, src, as_latent(z, 1, src.device)), max_len=limit[0], lower_bound=(hyps[0].tokens, hyps[0].score),
                           max_expansions=exact_budget)
        found = tgt_vocab.decode(res.tokens) if res.tokens else ""
        status = "proven best" if res.proven else f"best found within {exact_budget} expansions (not proven)"
        beats = res.tokens != hyps[0].tokens and res.score > hyps[0].score + 1e-4   # fp32 scores against fp64
        parts.append(_line("exact search:", f"{found!r}, log score {res.score:.2f}, {status}; "
                                            f"{'better than' if beats else 'the same as'} the beam's best "
                                            f"({res.expansions} expansions)"))
    return page(*parts)


def sample_view(model, src_vocab, tgt_vocab, sentence: str, temperature: float = 1.0, n: int = 5, seed: int = 0,
                z=None):
    """``n`` samples at ``temperature`` on ``sentence``, live, with their log scores."""
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"the temperature must be > 0 (0 is greedy decoding), got {temperature!r}")
    src = source_tensor([sentence], src_vocab, model)
    ids = token_ids(decode(model, src, "sampling", n, temperature=float(temperature), seed=seed, z=z))[0]
    scores = token_scores(model, src.repeat(n, 1), ids, z=z)
    texts = [tgt_vocab.decode(h) for h in ids]
    return page(_line("source:", sentence),
                compare_table([f"sample {i + 1}" for i in range(n)], texts, {"log score": [f"{sum(s):.2f}" for s in scores]},
                              title=f"{n} samples at temperature {temperature:g} (seed {seed}); "
                                    f"{len(set(texts))} distinct"))


def composed_view(corpus, translate=None, seed: int = 0, names=None, **parts):
    """A meaning composed from the toy grammar's parts (``parts``: subject, verb, object,
    subject_adj, object_adj, place, as :func:`nbsupport.data.synthetic.meaning_parts`): its
    source sentence in each of the corpus' languages, which source words merge several senses,
    how each style renders it in English, and, with ``translate`` (a function of the
    {language: source} dict returning HTML or text), the model's answer. ``names`` (optional,
    language code -> display name) labels the sources, e.g. {"xa": "fr"}."""
    from ..data import synthetic
    if parts.get("subject") is not None and parts.get("subject") == parts.get("object"):
        # a state the dropdowns offer, not bad input: say what to do instead of an error
        chosen = ", ".join(f"{k} {v}" for k, v in parts.items() if v != synthetic.NONE)
        return page(_line("choose two different nouns:", f"the subject and the object are both {parts['subject']!r}, "
                                                         "and the toy's meanings relate two different things"),
                    _line("your choice so far:", chosen))
    m = synthetic.compose(**parts)
    langs = synthetic.languages(corpus)
    sources = {name: lang.source(m) for name, lang in langs.items()}
    out = []
    for name, text in sources.items():
        merged = {w: s for w, s in synthetic.ambiguous_nouns(langs[name]).items() if w in text.split()}
        note = "; ".join(f"{w!r} = {' or '.join(s)}" for w, s in merged.items())
        out.append(_line(f"source ({(names or {}).get(name, name)}):", text + (f"   [merged senses: {note}]" if note else "")))
    refs = synthetic.renderings(corpus, m, seed)
    out.append(compare_table([f"style {s}" for s, _ in refs], [r for _, r in refs], column="English",
                             title="how each style of the references renders this meaning"))
    if translate is not None:
        try:
            answer = translate(sources)
        except ValueError as err:      # e.g. a word the training data never showed: the meaning stays in view
            answer = f"<b>the model:</b> ⚠ {escape(err)}"
        out.append(answer if isinstance(answer, str) else getattr(answer, "data", str(answer)))
    return page(*out)
