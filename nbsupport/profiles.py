"""The three run profiles every notebook accepts.

* ``ci``   smoke run: 90 s or less per notebook on 2 CPU cores (what `make test` runs);
* ``lab``  the default: shows the phenomenon on a 2-core CPU in 10 minutes or less, on the
           synthetic toy tasks (a small Bible model reaches only BLEU 2-7 in 3-8 CPU minutes,
           so no lab lesson rests on the Bible);
* ``full`` the real corpus (the Bible) on one GPU in 15 minutes or less.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

PROFILE_NAMES = ("ci", "lab", "full")


class Settings:
    """A lesson's block of a profile: typed fields (a misspelt setting is an error where the
    profile is written), read as attributes (``cfg.mixture.test_sentences``) or, as before, like a
    dict (``cfg.mixture["test_sentences"]``, ``.get``, ``**``); an optional setting left at None is absent."""

    def keys(self):
        """Every setting but the optional ones (None by default) left at None."""
        return [f.name for f in fields(self) if not (f.default is None and getattr(self, f.name) is None)]

    def __getitem__(self, name: str):
        if name not in self.keys():
            valid = ", ".join(f.name for f in fields(self))
            raise KeyError(f"{type(self).__name__} has no setting {name!r}; its settings: {valid}")
        return getattr(self, name)

    def get(self, name: str, default=None):
        return getattr(self, name, None) if getattr(self, name, None) is not None else default

    def __contains__(self, name) -> bool:
        return name in self.keys()

    def __iter__(self):
        return iter(self.keys())

    def items(self):
        return [(k, getattr(self, k)) for k in self.keys()]

    def replace(self, **changes):
        return replace(self, **changes)


@dataclass(frozen=True)
class CurseSettings(Settings):
    """Lessons 06-07: the toy's size and training, the beams swept, exact search's sentences and budget."""
    n_train: int
    training: dict            # TrainConfig fields over the toy's (the epoch cap, the convergence rule)
    sentences: int
    beams: tuple
    exact_sentences: int
    exact_budget: int
    exact_max_src: int
    exact_batch: int
    speed_sentences: int
    model: dict = field(default_factory=dict)   # TransformerConfig sizes over the toy's
    bible_epochs: int | None = None             # the Bible models' epochs (read at `full` only, the one profile with the Bible)


@dataclass(frozen=True)
class MultiSourceSettings(Settings):
    """Lesson 01: the trilingual toy's size, the LSTM's sizes and training, the harder variant, the Bible's."""
    toy_train: int
    toy_model: dict
    toy_training: dict
    hard: dict
    bible_model: dict | None = None
    bible_training: dict | None = None
    bible_systems: tuple = ()       # the systems trained on the Bible


@dataclass(frozen=True)
class IBMSettings(Settings):
    """Lessons 08-09: IBM-3 training, the temperatures, the NMT models trained on the samples, exact search."""
    toy_train: int
    nmt_train: int | None
    iterations: int
    test_refs: int
    gammas: tuple
    model: dict
    training: dict
    sentences: int
    exact_sentences: int
    exact_max_words: int
    exact_budget: int
    exact_batch: int
    exact_seed_beams: tuple


@dataclass(frozen=True)
class MixtureSettings(Settings):
    """Lessons 03-04: the mixtures' toy, training, test sizes, seeds and dropout rates."""
    styles: int
    toy_train: int
    training: dict
    test_sentences: int
    seeds: tuple
    dropouts: tuple
    flip_sentences: int
    table1_losses: tuple
    model: dict | None = None


@dataclass(frozen=True)
class CompareSettings(Settings):
    """Lesson 10: the toy, its model and training, the K swept, seeds, test and dev sizes, the methods."""
    styles: int
    toy_train: int
    training: dict
    ks: tuple
    seeds: tuple
    test_sentences: int
    dev_sentences: int
    model: dict | None = None
    methods: tuple | None = None
    bible_ks: tuple | None = None
    bible_seeds: tuple | None = None


@dataclass(frozen=True)
class ReproductionSettings(Settings):
    """The reproductions: model seeds behind every claim, and each paper's settings."""
    seeds: int
    seed_paper: dict
    zoph_knight: dict
    shen: dict
    scones: dict
    lachaux: dict


@dataclass(frozen=True)
class Profile:
    name: str
    budget_s: int             # wall-clock budget of one notebook
    toy_train: int            # toy training pairs
    toy_test: int             # toy test (and dev) sources
    bible_test: int | None    # Bible test verses evaluated (None: all, about 500)
    spm_vocab: int            # sentencepiece vocabulary size per language
    spm_sentences: int | None  # training sentences used to train sentencepiece (None: all)
    uses_bible_training: bool  # does this profile train models on the Bible?
    toy_model: dict = field(default_factory=dict)     # TransformerConfig sizes for the toy tasks
    toy_training: dict = field(default_factory=dict)  # TrainConfig for the toy tasks
    bible_model: dict = field(default_factory=dict)
    bible_training: dict = field(default_factory=dict)
    bible_train: int | None = None                    # training verses (None: all)
    bible_dev: int | None = None                      # dev (validation) verses (None: all 243)
    curse: CurseSettings | None = None                # notebooks 06-07: sentences, beams, exact-search budget
    multi_source: MultiSourceSettings | None = None   # notebook 01: LSTM sizes and training, toy and Bible
    ibm: IBMSettings | None = None                    # notebooks 08-09: IBM-3 training, temperatures, NMT runs
    mixture: MixtureSettings | None = None            # notebooks 03-04: mixture runs (toy size, epochs, seeds)
    compare: CompareSettings | None = None            # notebook 10: methods, K sweep, seeds, toy model, the Bible's K
    max_steps: int | None = None                      # every training run stops after this many steps (smoke runs)
    # the reproduction notebooks (notebooks/reproductions/): model seeds per claim, and each paper's settings
    reproduction: ReproductionSettings | None = None

    def bible_limits(self) -> dict:
        """The Bible splits' sizes as :func:`nbsupport.data.bible.corpus` takes them."""
        return {"test_limit": self.bible_test, "train_limit": self.bible_train, "dev_limit": self.bible_dev}

    def __str__(self) -> str:
        return f"profile {self.name!r} (budget {self.budget_s} s)"


# Toy sizes: 1024-token batches give enough updates per epoch for the baseline to keep the styles
# apart (benchmarks/README.md, "Profile sizing", has the measurements behind every lab size here).
_TOY_LAB_MODEL = dict(d_model=128, n_heads=4, d_ff=256, enc_layers=2, dec_layers=2, dropout=0.1)
_TOY_LAB_TRAINING = dict(epochs=5, max_tokens=1024, lr=1e-3, warmup=400)
# Notebook 01 (LSTMs, 10 systems on the toy): one layer (two cost more and learned no better), the paper's window D=10.
# `hard`: notebook 01's variant that does not saturate (a tenth of the triples, optional phrases), trained in
# smaller batches for more epochs, until the validation NLL flattens (and at `full`, to compare, in the main
# batches: a quarter of the steps, still learning); a larger test set for tighter intervals.
_MULTI_SOURCE_LAB = MultiSourceSettings(toy_train=20000, toy_model=dict(d_model=128, layers=1, dropout=0.2, window=10),
                         toy_training=dict(epochs=8, max_tokens=1024, lr=3e-3, warmup=200),
                         hard=dict(toy_train=2000, epochs=24, max_tokens=256, test=500, ambiguity="low"))
# Notebooks 06-07 (and the SCONES reproduction, whose seed 0 are its models): a small Transformer trained until two
# epochs in a row lower the validation NLL by under 2% (4-6 epochs at lab; d_model 128 with two layers a side was
# still falling by 10-34% an epoch after 3, SCONES alpha = 1 the most).
_CURSE_MODEL_LAB = dict(d_model=64, d_ff=256, enc_layers=1, dec_layers=1)
_CURSE_TRAINING_LAB = dict(epochs=30, lr=3e-3, warmup=100, converged_below=0.02, patience=2)
# Notebooks 03-04 (mixtures, K = S = 3 as Shen et al.): many short runs on a smaller toy, each until its
# validation NLL falls by under 2% in an epoch (converged), at most `epochs`: at lab 20, the reproduction's cap (a
# cap of 8 stopped E&M and the independent hMup still falling by 2-7% an epoch; the others stop by the rule in 6-8
# epochs either way); `full` (a GPU) trains up to 30. At lab the papers' dropout 0.1 only; `full` adds 0.2, 0.3 and 0.5.
_MIXTURE_LAB = MixtureSettings(styles=3, toy_train=4000, training=dict(epochs=20, lr=2e-3, warmup=100, converged_below=0.02),
                    test_sentences=100, seeds=(0,), dropouts=(0.1,), flip_sentences=256,
                    table1_losses=("sMlp", "sMup", "hMlp", "hMup"))

# Notebooks 08-09 (IBM-3 synthetic pairs): per temperature 3 NMT models (softmax, SCONES 0.2 and 1.0; 0.5 too at full),
# each trained until two epochs in a row lower its dev loss by less than 1% (the paper trains to convergence,
# section 3; one such epoch was sometimes a blip):
# notebook 10's smaller toy model at its learning rate reaches that in the budget, 06's did not;
# exact search (prefixes expanded 64 per model call, seeded by greedy and beam 4) on the beam sentences: the
# converged models' searches end proven within a few thousand prefixes even at gamma 1 (words <= 9: every toy source).
_IBM_LAB = IBMSettings(toy_train=20000, nmt_train=5000, iterations=5, test_refs=4, gammas=(0.1, 0.3, 1.0),
                model=dict(d_model=64, d_ff=256, enc_layers=1, dec_layers=1),
                training=dict(epochs=40, lr=3e-3, warmup=100, converged_below=0.01, patience=2),
                sentences=100, exact_sentences=100, exact_max_words=9, exact_budget=20000, exact_batch=64,
                exact_seed_beams=(1, 4))

# Notebook 10 (every method, K in {2, 4}: K <= S): the 4-style toy at the mixture lessons' smaller size
# with a smaller model trained longer (it learned the toy better per second). At lab the soft mixture
# sMup (the costliest model) is left out: it collapses (D2) in notebook 04 (in Shen et al.'s Table 1
# it is healthy with M-step-only dropout), so hMlp is "the best of the other mixture variants";
# `full` runs every method.
_COMPARE_LAB = CompareSettings(styles=4, toy_train=4000, model=dict(d_model=64, d_ff=256, enc_layers=1, dec_layers=1),
                    training=dict(epochs=6, lr=3e-3, warmup=100), ks=(2, 4), seeds=(0,), test_sentences=100,
                    dev_sentences=50, methods=("sampling", "topk", "nucleus", "beam", "diverse_beam", "hard_moe", "hMlp",
                                               "vnmt", "target_conditioning"))

# The reproductions: every model behind a claim trained from 3 model seeds (2 at ci), each paper's
# training budgets long enough for the convergence rule of nbsupport.claims (CONVERGED_BELOW).
# seed_paper: notebook 10's 4-style toy (compare), the baseline and Hard-MoE at K = S = 4 and 2S = 8, each trained
# until two epochs in a row lower its dev loss by under 2% (at most 40 epochs); all 200 test sources.
# Lachaux et al. (notebooks/reproductions/lachaux.ipynb): per seed six models on lesson 05's toy (baseline, Hard-MoE,
# target encoder at lambda = 1 and its three ablations), each to the 2% rule; the temperature reaches 0 after 2.5
# epochs as in lesson 05's 5, then the frozen encoder trains on; Fig. 3 timed on K = 3 and 50, 10 paired rounds.
# Measured at lab, seed 0: Hard-MoE and the target encoder (lambda = 1) stop by the rule after 4 epochs (validation
# NLL 0.77 0.33 0.31 0.32 and 0.89 0.32 0.31 0.33), 20-32 s an epoch two at a time on the 2-core machine.
_LACHAUX_LAB = dict(training=dict(epochs=12, converged_below=0.02, patience=1), anneal_epochs=2.5, beam=10,
                    speed=dict(ks=(3, 50), steps=6, rounds=10))
# Shen et al. (notebooks/reproductions/shen.ipynb): lessons 03-04's mixture toy and model; every model trained
# until an epoch lowers its validation NLL by under 2% (nbsupport.claims.CONVERGED_BELOW), at most `epochs`
# (the lessons' 8 left most E&M models still improving). The variants are the claims' (nbsupport.claims.shen).
_SHEN_LAB = dict(epochs=20)
# SCONES (notebooks/reproductions/scones.ipynb): notebooks 06-07's toy at both levels with its model and training rule
# (the convergence rule is reached in 4-6 epochs); softmax and SCONES 0.2 and 1.0 (0.5 left out: alpha is chosen on dev between 0.2 and 1.0); the beams the
# claims read; exact search on every test source of at most 6 words. IBM-3 (notebooks 08-09): its lab settings at two
# temperatures, so that seed 0 is the lesson's models.
_SCONES_LAB = dict(toy=dict(n_train=15000, model=_CURSE_MODEL_LAB, training=_CURSE_TRAINING_LAB,
                            alphas=(0.2, 1.0), beams=(1, 4, 64), sentences=200, exact_max_src=6, exact_sentences=None,
                            exact_budget=20000, exact_batch=64, speed_sentences=64, speed_rounds=12),
                   ibm=dict(gammas=(0.1, 1.0), alphas=(0.2, 1.0)))
# Zoph & Knight (notebooks/reproductions/zoph_knight.ipynb): notebook 01's harder variant (its data and training
# settings), each system trained until two epochs in a row lower its validation NLL by under 2% (one such epoch
# also stopped single sources in the pause after the warm-up: de at lab seed 0 after epoch 4, at 1.35 nats/token
# against 0.41 by epoch 23), at most `epochs`. Measured at lab, seed 0: the systems without attention stop after
# 15-25 epochs of about 1 s; the attention ones reached a single such epoch after 13-19 epochs of 2-6 s (two at a
# time on the 2-core machine).
_ZOPH_KNIGHT_LAB = dict(epochs=40, patience=2)
_REPRODUCTION_LAB = ReproductionSettings(seeds=3, seed_paper=dict(ks=(4, 8), test_sentences=200, dev_sentences=50,
                                                  training=dict(epochs=40, converged_below=0.02, patience=2)), zoph_knight=_ZOPH_KNIGHT_LAB, shen=_SHEN_LAB, scones=_SCONES_LAB, lachaux=_LACHAUX_LAB)

PROFILES = {
    "ci": Profile("ci", 90, toy_train=2000, toy_test=50, bible_test=60, spm_vocab=2000,
                  spm_sentences=3000, uses_bible_training=False,
                  toy_model=dict(d_model=64, n_heads=4, d_ff=128, enc_layers=1, dec_layers=1, dropout=0.1),
                  toy_training=dict(epochs=8, max_tokens=1024, lr=2e-3, warmup=50),
                  bible_model=dict(d_model=64, n_heads=4, d_ff=128, enc_layers=1, dec_layers=1, dropout=0.1),
                  bible_training=dict(epochs=1, max_tokens=2048, lr=2e-3, warmup=50),
                  curse=CurseSettings(n_train=2000, training=dict(epochs=8), sentences=20, beams=(1, 2, 4, 8), exact_sentences=4,
                             exact_budget=200, exact_max_src=7, exact_batch=32, speed_sentences=16),
                  multi_source=MultiSourceSettings(toy_train=2000, toy_model=dict(d_model=64, layers=1, dropout=0.1, window=10),
                                    toy_training=dict(epochs=6, max_tokens=1024, lr=3e-3, warmup=50),
                                    hard=dict(toy_train=300, epochs=2, max_tokens=256, test=50, ambiguity="low")),
                  ibm=IBMSettings(toy_train=2000, nmt_train=2000, iterations=3, test_refs=4, gammas=(0.1, 1.0),
                           model={}, training=dict(epochs=8, converged_below=0.01, patience=2), sentences=20, exact_sentences=4,
                           exact_max_words=6, exact_budget=200, exact_batch=32, exact_seed_beams=(1, 4)),
                  mixture=MixtureSettings(styles=3, toy_train=1000, training=dict(epochs=2, warmup=20, converged_below=0.02),
                               test_sentences=30, seeds=(0,),
                               dropouts=(0.1,), flip_sentences=64, table1_losses=("hMup",)),
                  compare=CompareSettings(styles=4, toy_train=1000, training=dict(epochs=2, warmup=20), ks=(2, 4), seeds=(0,),
                               test_sentences=20, dev_sentences=10),
                  reproduction=ReproductionSettings(seeds=2, seed_paper=dict(ks=(4, 8), test_sentences=20, dev_sentences=10,
                                                                  training=dict(epochs=4, converged_below=0.02)), zoph_knight=dict(epochs=3, patience=2), shen=dict(epochs=3), scones=dict(
                                        toy=dict(n_train=2000, model={}, training=dict(epochs=6, converged_below=0.02),
                                                 alphas=(0.2, 1.0), beams=(1, 4, 8), sentences=20, exact_max_src=6,
                                                 exact_sentences=4, exact_budget=200, exact_batch=32, speed_sentences=8,
                                                 speed_rounds=10),
                                        ibm=dict(gammas=(0.1, 1.0), alphas=(0.2, 1.0))),
                                    lachaux=dict(training=dict(epochs=4, converged_below=0.02), anneal_epochs=1, beam=4,
                                                 speed=dict(ks=(3, 8), steps=2, rounds=10)))),
    "lab": Profile("lab", 600, toy_train=20000, toy_test=200, bible_test=None, spm_vocab=8000,
                   spm_sentences=None, uses_bible_training=False,
                   toy_model=_TOY_LAB_MODEL, toy_training=_TOY_LAB_TRAINING,
                   # 8 models (softmax + SCONES x 3 alphas, two ambiguity levels) at ~32 s each
                   # exact search on short sources (at most 6 words), best first, 64 prefixes per model call
                   curse=CurseSettings(n_train=15000, training=_CURSE_TRAINING_LAB, model=_CURSE_MODEL_LAB, sentences=100, beams=(1, 2, 4, 8, 16, 32, 64),
                              exact_sentences=20, exact_budget=20000, exact_max_src=6, exact_batch=64, speed_sentences=64),
                   multi_source=_MULTI_SOURCE_LAB,
                   ibm=_IBM_LAB,
                   mixture=_MIXTURE_LAB,
                   compare=_COMPARE_LAB,
                   reproduction=_REPRODUCTION_LAB),
    "full": Profile("full", 900, toy_train=20000, toy_test=200, bible_test=None, spm_vocab=8000,
                    spm_sentences=None, uses_bible_training=True,
                    toy_model=_TOY_LAB_MODEL, toy_training=_TOY_LAB_TRAINING,
                    # one GPU, 15 minutes a notebook (benchmarks/gpu-h100/, benchmarks/gpu-nvidia-h200/)
                    bible_model=dict(d_model=256, n_heads=4, d_ff=1024, enc_layers=3, dec_layers=3,
                                     dropout=0.1, max_len=320),
                    bible_training=dict(epochs=8, max_tokens=12000, lr=7e-4, warmup=1000,
                                        label_smoothing=0.1),
                    # sized on one H200 (benchmarks/gpu-nvidia-h200/): the Bible's four models 4 epochs, not 8 (a
                    # capped run projected 19 minutes, 12 of them those models), the sweep on 100 sentences, not 200
                    curse=CurseSettings(n_train=15000, training=dict(epochs=3), sentences=100, beams=(1, 2, 4, 8, 16, 32, 64, 128),
                               exact_sentences=50, exact_budget=5000, exact_max_src=6, exact_batch=64, speed_sentences=200,
                               bible_epochs=4),
                    # the Bible: 4-layer encoders/decoder as in the paper, narrower; twice the batch of the first
                    # setting (an input-feeding LSTM's step costs its time steps, not its rows: half the steps), the
                    # attention combiner left to the toy (its Bible step took 4x the others'); warm-up a fifth of the
                    # 558 steps (6 epochs of 984 steps were all warm-up); sized on one H200
                    multi_source=_MULTI_SOURCE_LAB.replace(hard=dict(_MULTI_SOURCE_LAB["hard"], few_steps_max_tokens=1024),
                                      bible_model=dict(d_model=512, layers=4, dropout=0.3, window=10, max_len=320,
                                                       init_range=0.08),
                                      bible_training=dict(epochs=6, max_tokens=16000, lr=1e-3, warmup=100),
                                      bible_systems=("fr", "de", "fr+fr.same", "fr+de.basic", "fr+de.childsum",
                                                     "fr+fr.two_versions")),
                    # lab's 5,000 sampled pairs per temperature (a d_model-64 step costs the same on a GPU as on a CPU:
                    # the full corpus took 4x the steps) and four temperatures, not six (a capped run projected 71 minutes)
                    ibm=_IBM_LAB.replace(gammas=(0.1, 0.3, 0.5, 1.0), sentences=200, exact_sentences=50, exact_budget=5000),
                    mixture=_MIXTURE_LAB.replace(seeds=(0, 1, 2), dropouts=(0.1, 0.2, 0.3, 0.5),
                                 training=dict(_MIXTURE_LAB["training"], epochs=30)),
                    # the Bible at K = 4 (its four references), one seed: six models, three shared with 02 and 05
                    compare=_COMPARE_LAB.replace(methods=None, seeds=(0, 1, 2), bible_ks=(4,), bible_seeds=(0,)),
                    reproduction=_REPRODUCTION_LAB),
}


def profile(name: "str | Profile") -> Profile:
    """The settings of a profile; an unknown name is an error naming the valid ones. A
    :class:`Profile` is returned as it is, so functions taking ``cfg`` accept either."""
    if isinstance(name, Profile):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a profile is one of the names {', '.join(PROFILE_NAMES)} or nbs.profile(name), "
                        f"got {name!r} ({type(name).__name__})")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILE_NAMES)} "
                         "(set PROFILE in the notebook's parameters cell, or papermill -p PROFILE ...)")
    return PROFILES[name]
