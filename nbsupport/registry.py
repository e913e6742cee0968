"""Every model family and every way to get K hypotheses, by name.

*Families* (:data:`FAMILIES`) are model classes that speak :mod:`nbsupport.models.protocol`;
the training loop and the cache build them from a configuration through :func:`build`. A
configuration names its family: a ``TransformerConfig`` or an ``LSTMConfig`` alone, or with
options (a ``MixtureConfig``, ``VNMTConfig`` or ``ConditioningConfig``) whose family wins.

*Methods* (:data:`METHODS`, the one table of them) are every way to decode, by name: the
searches any model can run ("greedy", "beam", "sampling", "topk", "nucleus", "diverse_beam",
"latent_greedy") and the course's ways to get K hypotheses from one family ("hard_moe", "hMlp",
"vnmt", "target_conditioning", ...), so a notebook can loop over methods by name::

    for name in ["sampling", "beam", "hard_moe"]:
        hyps[name] = nbs.translation.translate(models[name], src_vocab, tgt_vocab, sources, name, n=4)

Adding a family: its module (the model, its config, the protocol's methods) and one line in
:data:`FAMILIES` (plus its methods in :data:`METHODS`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import strategies

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
OPTIONS = ("beam", "temperature", "top_k", "top_p", "groups", "diversity", "length_norm")   # decoding options


@dataclass(frozen=True)
class Method:
    """A way to decode n hypotheses per source: the search that does it (a class of
    :mod:`nbsupport.decode`) with its default options, the model family it decodes (None: any),
    what the model's latent variable is (``"K"``: K values, one hypothesis each; ``"none"``: no
    latent variable; ``"dz"``: a continuous latent sampled n times; ``"any"``: whatever the model
    has, given as z), and which trained model the comparison decodes with it (``model``:
    "baseline" for the ways to search the one plain Transformer, else the method's own)."""
    name: str
    search: type
    family: str | None = None
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

    def strategy(self, n: int = 1, **options) -> strategies.Search:
        """The search for ``n`` hypotheses per source, ``options`` over the defaults (a beam of n, n
        groups); an option this method does not use is ignored, one no method uses is a TypeError."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unknown decoding options {unknown}; valid: {', '.join(OPTIONS)}")
        o = {**self.options, **options}
        if self.search is strategies.Sampling:
            return strategies.Sampling(n, o.get("temperature", 1.0), o.get("top_k"), o.get("top_p"))
        if self.search is strategies.Beam:
            return strategies.Beam(n, o.get("beam", n), o.get("length_norm", False))
        if self.search is strategies.DiverseBeam:
            groups = o.get("groups")
            if groups is not None:
                strategies.check_int("groups", groups, 1)
            groups = groups or n
            width = max(o.get("beam", n), n)
            if groups > width:
                raise ValueError(f"diverse beam search with {groups} groups needs a beam of at least {groups} "
                                 f"(one hypothesis per group), got beam={o.get('beam', n)}, n={n}")
            width += (-width) % groups                     # a beam the groups divide
            return strategies.DiverseBeam(n, width, o.get("length_norm", False), groups=groups,
                                      diversity=o.get("diversity", 0.5))
        return self.search(n)                              # Greedy, LatentGreedy, PriorSample


METHODS = {m.name: m for m in [
    Method("greedy", strategies.Greedy, latent="any", output="any", about="the best token at every step"),
    Method("latent_greedy", strategies.LatentGreedy, latent="K", output="any",
           about="greedy under each of the model's K latent values"),
    Method("sampling", strategies.Sampling, None, {"temperature": 1.0}, latent="any", output="any",
           about="ancestral sampling from the baseline", model="baseline"),
    Method("topk", strategies.Sampling, None, {"top_k": 3}, latent="any", output="any",
           about="sampling among the 3 best tokens (Fan et al. 2018)", model="baseline"),
    Method("nucleus", strategies.Sampling, None, {"top_p": 0.9}, latent="any", output="any",
           about="sampling from the nucleus of probability 0.9 (Holtzman et al. 2020)", model="baseline"),
    Method("beam", strategies.Beam, latent="any", output="any", about="the K best of a beam of K", model="baseline"),
    Method("diverse_beam", strategies.DiverseBeam, None, {"diversity": 0.5}, latent="any", output="any",
           about="K groups of one, Hamming penalty 0.5 (Vijayakumar et al. 2018)", model="baseline"),
    Method("scones_beam", strategies.Beam, "transformer", output="scones", about="the K best of a beam of K, SCONES model"),
    Method("hard_moe", strategies.LatentGreedy, "transformer", latent="K",
           about="Hard-MoE: greedy under each of K latent values"),
    *[Method(loss, strategies.LatentGreedy, "mixture", latent="K", mixture=f"online.shared.{loss}",
             about=f"Shen et al.'s online shared {loss}: greedy per expert") for loss in ("hMup", "hMlp", "sMup", "sMlp")],
    Method("vnmt", strategies.PriorSample, "vnmt", latent="dz", about="variational NMT: K latents from the prior, greedy each"),
    Method("target_conditioning", strategies.LatentGreedy, "target_conditioning", latent="K",
           about="Lachaux et al.: greedy under each of K domains"),
    Method("multi_source", strategies.Beam, "lstm", about="Zoph & Knight's multi-source LSTM, the K best of a beam of K"),
]}


def method(name: str) -> Method:
    """The method called ``name``; an unknown name is a ValueError naming the valid ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; valid methods: {', '.join(METHODS)}")
    return METHODS[name]


def methods_for(model) -> list[str]:
    """The names of the methods that decode ``model``: its family's (or any family's), with a
    latent variable when the model has one (K > 1) and none when it has not, and its output layer."""
    return [name for name, m in METHODS.items() if _decodes(m, model)]


def _decodes(m: Method, model, given_z: bool = False) -> bool:
    """Whether ``m`` decodes ``model`` (``given_z``: a latent value will be given, as a search of any
    model can take one)."""
    k = model.config.n_latent
    variant = getattr(getattr(model, "mixture", None), "name", None)
    return (m.family in (None, model.family) and m.output in ("any", getattr(model.config, "output", "softmax"))
            and not (m.latent == "K" and (k < 2 or not model.discrete_latent)) and not (m.latent == "none" and k > 1)
            and not (m.latent == "any" and k > 1 and not given_z)
            and (m.mixture is None or variant is None or m.mixture.split(".")[-1] == variant.split(".")[-1]))


def search_for(name: str, model, n: int = 1, **options) -> strategies.Search:
    """The search of method ``name`` for ``n`` hypotheses per source of ``model`` (``options``
    over its defaults); a method that does not decode this model is a ValueError naming those that do."""
    m = method(name)
    if m.family not in (None, model.family):
        raise ValueError(f"method {name!r} decodes a {m.family} model, got a {model.family} model")
    if not _decodes(m, model, given_z=True):
        raise ValueError(f"method {name!r} does not decode this {model.family} model; the methods that do: "
                         f"{', '.join(methods_for(model)) or 'none'}")
    return m.strategy(n, **options)
