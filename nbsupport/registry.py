"""Every model family and every way to get K hypotheses, by name.

*Families* (:data:`FAMILIES`) are model classes that speak :mod:`nbsupport.models.protocol`;
the training loop and the cache build them from a configuration through :func:`build`. A
configuration names its family: a ``TransformerConfig`` or an ``LSTMConfig`` alone, or with
options (a ``MixtureConfig``, ``VNMTConfig`` or ``ConditioningConfig``) whose family wins.

*Methods* (:data:`METHODS`) are a family plus how it produces K hypotheses per source
("sampling", "beam", "diverse_beam", "hard_moe", "hMlp", "vnmt", "target_conditioning", ...),
so a notebook can loop over methods by name::

    for name in ["sampling", "beam", "hard_moe"]:
        hyps[name] = nbs.registry.translate(name, models[name], src_vocab, tgt_vocab, sources, k=4)

Adding a family: its module (the model, its config, the protocol's methods) and one line in
:data:`FAMILIES` (plus its methods in :data:`METHODS`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


from .models.lstm import LSTMConfig, MultiSourceLSTM
from .models.mixture import MixtureConfig, MixtureModel
from .models.target_encoder import ConditioningConfig, TargetConditionedTransformer
from .models.transformer import Transformer, TransformerConfig
from .models.vnmt import VariationalNMT, VNMTConfig

# family name -> (model class, the configuration type that selects it)
FAMILIES = {
    "transformer": (Transformer, TransformerConfig),                      # baseline, Hard-MoE, SCONES
    "lstm": (MultiSourceLSTM, LSTMConfig),                                # Zoph & Knight's multi-source
    "mixture": (MixtureModel, MixtureConfig),                             # Shen et al.'s 16 variants
    "vnmt": (VariationalNMT, VNMTConfig),                                 # Zhang et al.'s variational NMT
    "target_conditioning": (TargetConditionedTransformer, ConditioningConfig),   # Lachaux et al.
}


def family_of(config, options=None) -> str:
    """The family a (model configuration, options) pair builds: the options' if given, else the
    configuration's."""
    which = options if options is not None else config
    for name, (_, config_type) in FAMILIES.items():
        if type(which) is config_type:
            return name
    valid = ", ".join(c.__name__ for _, c in FAMILIES.values())
    raise TypeError(f"no model family is configured by a {type(which).__name__}; valid configurations: {valid}")


def family_class(name: str):
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; valid: {', '.join(FAMILIES)}")
    return FAMILIES[name][0]


def build(config, options=None):
    """A new model of the family that ``config`` and ``options`` select."""
    return family_class(family_of(config, options)).build(config, options)


def cache_key(config, options=None) -> dict:
    """What the family's options add to the model cache's key (nothing for a plain config)."""
    return {} if options is None else family_class(family_of(config, options)).cache_key(options)


# --------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class Method:
    """A way to get K hypotheses per source: a model family, the decoding method its
    ``hypotheses`` runs, its default options, and what the model's latent variable is
    (``"K"``: K values, one hypothesis each; ``"none"``: one model decodes K hypotheses;
    ``"dz"``: a continuous latent sampled K times), and which trained model it decodes
    (``model``: "baseline" for the ways to search the one plain Transformer, else the method's own)."""
    name: str
    family: str
    decoding: str
    options: dict = field(default_factory=dict)
    latent: str = "none"
    output: str = "softmax"
    mixture: str | None = None        # a mixture's variant (MixtureConfig.from_name)
    about: str = ""
    model: str = ""                   # the trained model it decodes: "baseline", or (default) its own

    def __post_init__(self):
        if not self.model:
            object.__setattr__(self, "model", self.name)

    @property
    def model_per_k(self) -> bool:
        """One model for each K (K latent values), rather than one model for every K."""
        return self.latent == "K"

    def decoding_options(self, k: int) -> dict:
        """The decoding options for K hypotheses: the beam methods search a beam of K."""
        beam = {"beam": k} if self.decoding in ("beam", "diverse_beam") else {}
        groups = {"groups": k} if self.decoding == "diverse_beam" else {}
        return {**beam, **groups, **self.options}


METHODS = {m.name: m for m in [
    Method("sampling", "transformer", "sample", {"temperature": 1.0}, about="ancestral sampling from the baseline",
           model="baseline"),
    Method("topk", "transformer", "topk", {"top_k": 3}, about="sampling among the 3 best tokens (Fan et al. 2018)",
           model="baseline"),
    Method("nucleus", "transformer", "nucleus", {"top_p": 0.9},
           about="sampling from the nucleus of probability 0.9 (Holtzman et al. 2020)", model="baseline"),
    Method("beam", "transformer", "beam", about="the K best of a beam of K", model="baseline"),
    Method("diverse_beam", "transformer", "diverse_beam", {"diversity": 0.5},
           about="K groups of one, Hamming penalty 0.5 (Vijayakumar et al. 2018)", model="baseline"),
    Method("scones_beam", "transformer", "beam", output="scones", about="the K best of a beam of K, SCONES model"),
    Method("hard_moe", "transformer", "latent_greedy", latent="K", about="Hard-MoE: greedy under each of K latent values"),
    *[Method(loss, "mixture", "latent_greedy", latent="K", mixture=f"online.shared.{loss}",
             about=f"Shen et al.'s online shared {loss}: greedy per expert") for loss in ("hMup", "hMlp", "sMup", "sMlp")],
    Method("vnmt", "vnmt", "prior_sample", latent="dz", about="variational NMT: K latents from the prior, greedy each"),
    Method("target_conditioning", "target_conditioning", "latent_greedy", latent="K",
           about="Lachaux et al.: greedy under each of K domains"),
    Method("multi_source", "lstm", "beam", about="Zoph & Knight's multi-source LSTM, the K best of a beam of K"),
]}


def method(name: str) -> Method:
    """The method called ``name``; an unknown name is a ValueError naming the valid ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; valid methods: {', '.join(METHODS)}")
    return METHODS[name]


def methods_for(model) -> list[str]:
    """The names of the methods that decode ``model``: its family's, with a latent variable
    when the model has one (K > 1) and none when it has not, and the model's output layer."""
    return [name for name, m in METHODS.items() if _decodes(m, model)]


def _decodes(m: Method, model) -> bool:
    k = model.config.n_latent
    variant = getattr(getattr(model, "mixture", None), "name", None)
    return (m.family == model.family and m.output == getattr(model.config, "output", "softmax")
            and not (m.latent == "K" and k < 2) and not (m.latent == "none" and k > 1)
            and (m.mixture is None or variant is None or m.mixture.split(".")[-1] == variant.split(".")[-1]))


def hypotheses(name: str, model, src, k: int, **options) -> list[list[list[int]]]:
    """Token ids of ``k`` hypotheses per source by method ``name`` (``options`` override its defaults)."""
    m = method(name)
    if model.family != m.family:
        raise ValueError(f"method {name!r} decodes a {m.family} model, got a {model.family} model")
    if not _decodes(m, model):
        raise ValueError(f"method {name!r} does not decode this {model.family} model; the methods that do: "
                         f"{', '.join(methods_for(model)) or 'none'}")
    return model.hypotheses(src, k, m.decoding, **{**m.decoding_options(k), **options})


def translate(name: str, model, src_vocab, tgt_vocab, sentences: Sequence[str], k: int, batch_size: int = 64,
              device=None, seed: int = 0, unknown: str = "error", **options) -> list[list[str]]:
    """Strings: ``k`` hypotheses for every sentence by method ``name``, ``batch_size`` sources at a
    time; sampling draws from one generator seeded with ``seed`` whose stream runs across batches.
    A word the source vocabulary does not know is an error naming it, unless ``unknown="unk"``."""
    from .decode import translate_batches
    method(name)                                   # an unknown name fails before any decoding
    if getattr(model.config, "n_sources", 1) > 1:
        raise ValueError("registry.translate reads one source language; a two-source model translates with "
                         "nbs.multisource.translate (one vocabulary per source)")
    return translate_batches(lambda src, lo, generator: hypotheses(name, model, src, k, seed=seed, generator=generator,
                                                                   **options),
                             model, src_vocab, tgt_vocab, sentences, batch_size, device, seed, unknown)
