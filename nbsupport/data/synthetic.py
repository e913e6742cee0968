"""A synthetic translation task with known latent styles and controlled ambiguity.

Each source sentence encodes a *meaning*: subject, verb, object (each noun with an
optional adjective) and an optional prepositional phrase. The source language is an
invented SOV language with particles (``ga`` marks the subject, ``o`` the object);
its words are drawn from syllables by the seed. The target is English.

**Styles** are the analogue of the papers' latent "per cent vs %" or "past vs present"
choices: every source has ``n_styles`` valid translations that differ *systematically*,
the same way for every sentence. Style ``s`` sets four features from its bits:

=============  ================================  ==========================
feature        strong                            subtle
=============  ================================  ==========================
voice          bit 0: active / passive           always active
synonym set    bit 1: sees vs notices (verbs)    always the first set
tense          bit 0 xor bit 1: present / past   bit 0 xor bit 1
punctuation    s mod 4: . ! ; ...                s mod 4
determiner     bit 2 (S > 4): "the" / "that"     (same)
=============  ================================  ==========================

so with strong styles two styles of a source differ in word order, the verb and the
final mark (pairwise BLEU about 32 between the styles of a source, like human
translators); with subtle styles in one or two tokens (the verb's tense, the mark). The source never tells which
style to use: a single-reference training pair picks one at random.

**Ambiguity** is style-independent intrinsic uncertainty:

* ``low``: four optional phrases after the object (a manner adverb, "at" a time, "with"
  a feeling, a frequency adverb), each present with probability 0.5 whatever the source,
  and each a 2-way choice of word;
* ``high``: the same with 4-way choices, plus a uniform 4-way choice of surface form for
  every content word (``dog``, ``dog2``, ``dog3``, ``dog4``), about 13 nats per sentence.

``entropy_nats`` gives the exact per-sentence entropy these choices add.

The **trilingual** variant (:func:`toy_trilingual`) generates two source languages from
the same meaning. Each merges pairs of English nouns into one ambiguous word, but
different pairs (language A merges dog/cat, horse/bird, ..., language B merges
cat/horse, bird/fish, ...), like Kay's "bank" (English) / "Ufer" vs "Bank" (German): one
source alone leaves a 50/50 choice for those nouns, both together determine it.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import asdict, dataclass, field, fields, replace

STYLE_STRENGTHS = ("strong", "subtle")
AMBIGUITY_LEVELS = ("none", "low", "high")
MAX_STYLES = 8

# English lexicon.
NOUNS = ["dog", "cat", "horse", "bird", "fish", "farmer", "king", "child",
         "soldier", "teacher", "sailor", "baker", "girl", "boy", "woman", "man"]
ADJECTIVES = ["big", "small", "old", "quick", "happy", "angry", "quiet", "strong"]
# The synonym set: every verb has two synonyms (style bit 1 picks one); measured on the
# test set, synonyms for every content word made strong styles too far apart (pairwise
# BLEU 2), verbs alone give about 32, like human translators (about 35).
# (present, past, participle) for each synonym
VERBS = [(("sees", "saw", "seen"), ("notices", "noticed", "noticed")),
         (("finds", "found", "found"), ("discovers", "discovered", "discovered")),
         (("follows", "followed", "followed"), ("chases", "chased", "chased")),
         (("helps", "helped", "helped"), ("assists", "assisted", "assisted")),
         (("calls", "called", "called"), ("summons", "summoned", "summoned")),
         (("watches", "watched", "watched"), ("observes", "observed", "observed")),
         (("likes", "liked", "liked"), ("loves", "loved", "loved")),
         (("meets", "met", "met"), ("greets", "greeted", "greeted"))]
PREPOSITIONS = ["near", "behind", "under", "beyond"]
PLACES = ["river", "house", "hill", "road", "market", "forest"]
PUNCTUATION = [".", "!", ";", "..."]
# Optional phrases: (slot, template, word choices); "{}" is the chosen word.
# All optional phrases follow the object, after every style feature. Measured here: with an
# optional first word (decided right after the latent, which replaces BOS), Hard-MoE spent its
# latent on "opening adverb or not" (a 1.04-nat factor, more than a style bit's 0.69) instead
# of the styles; with an adverb just before the verb, on voice x "adverb or not".
OPTIONAL = [("manner", "{}", ["quietly", "slowly", "gladly", "boldly"]),
            ("time", "at {}", ["dawn", "noon", "dusk", "night"]),
            ("company", "with {}", ["joy", "care", "pride", "ease"]),
            ("frequency", "{}", ["again", "often", "once", "twice"])]
CHOICES = {"none": (0, 1), "low": (2, 1), "high": (4, 4)}  # (optional-phrase ways, content-word ways)
SYLLABLES = ["ka", "mo", "ri", "te", "lu", "po", "se", "na", "vi", "do", "gu", "be", "zo", "fa",
             "ki", "ne", "ru", "sa", "to", "mi", "ha", "je", "wo", "xi"]


@dataclass(frozen=True)
class ToyConfig:
    """Everything that determines a toy corpus (and so its cache key)."""
    n_styles: int = 4
    style_strength: str = "strong"
    ambiguity: str = "none"
    n_train: int = 20000
    n_dev: int = 200
    n_test: int = 200
    refs_per_style: int = 0  # 0: 1 per style, or 4 when there is one style and ambiguity is on
    seed: int = 0

    def __post_init__(self):
        if self.style_strength not in STYLE_STRENGTHS:
            raise ValueError(f"unknown style_strength {self.style_strength!r}; valid values: "
                             f"{', '.join(STYLE_STRENGTHS)}")
        if self.ambiguity not in AMBIGUITY_LEVELS:
            raise ValueError(f"unknown ambiguity {self.ambiguity!r}; valid values: "
                             f"{', '.join(AMBIGUITY_LEVELS)}")
        if not 1 <= self.n_styles <= MAX_STYLES:
            raise ValueError(f"n_styles must be between 1 and {MAX_STYLES}, got {self.n_styles}")
        if min(self.n_train, self.n_dev, self.n_test) < 0 or self.refs_per_style < 0:
            raise ValueError("sizes must be >= 0")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"the toy's seed must be an integer, got {self.seed!r} ({type(self.seed).__name__})")

    @property
    def references_per_style(self) -> int:
        if self.refs_per_style:
            return self.refs_per_style
        return 4 if self.n_styles == 1 and self.ambiguity != "none" else 1


@dataclass(frozen=True)
class Meaning:
    subj: int
    subj_adj: int | None
    verb: int
    obj: int
    obj_adj: int | None
    pp: tuple[int, int] | None  # (preposition, place)


@dataclass
class Split:
    """One split of a corpus. ``sources`` maps a language to one string per example;
    ``refs[i]`` are example i's target strings (one in training) and ``labels[i]`` their
    latent labels (toy: the style; Bible: the version code)."""
    sources: dict[str, list[str]]
    refs: list[list[str]]
    labels: list[list]
    meanings: list = field(default_factory=list)

    @property
    def src(self) -> list[str]:
        return next(iter(self.sources.values()))

    def __len__(self) -> int:
        return len(self.refs)

    def source(self, lang: str | None = None) -> list[str]:
        """The sources in language ``lang`` (None: the first); an unknown one names the valid ones."""
        if lang is None:
            return self.src
        if lang not in self.sources:
            raise ValueError(f"unknown source language {lang!r}; this data has {', '.join(map(repr, self.sources))}")
        return self.sources[lang]

    def pairs(self, lang: str | None = None) -> list[tuple[str, str]]:
        """(source, target) for every reference of every example."""
        return [(s, r) for s, rs in zip(self.source(lang), self.refs) for r in rs]


@dataclass
class Corpus:
    name: str
    train: Split
    dev: Split
    test: Split
    info: dict

    def split(self, name: str) -> Split:
        if name not in ("train", "dev", "test"):
            raise ValueError(f"unknown split {name!r}; valid splits: train, dev, test")
        return getattr(self, name)


# --------------------------------------------------------------------------- styles
def style_features(style: int, strength: str = "strong") -> dict:
    """The surface features of a style (see the module docstring)."""
    b0, b1, b2 = style & 1, (style >> 1) & 1, (style >> 2) & 1
    strong = strength == "strong"
    return {"voice": "passive" if strong and b0 else "active",
            "synonyms": 1 if strong and b1 else 0,
            "tense": "past" if b0 ^ b1 else "present",
            "punctuation": PUNCTUATION[style % 4],
            "determiner": "that" if b2 else "the"}


def entropy_nats(meaning: Meaning, ambiguity: str) -> float:
    """Exact entropy (nats) that ambiguity adds to the translation of ``meaning`` in one style."""
    k_opt, k_word = CHOICES[ambiguity]
    h = 0.0
    if k_opt:
        h += len(OPTIONAL) * (math.log(2) + 0.5 * math.log(k_opt))
    n_content = 3 + (meaning.subj_adj is not None) + (meaning.obj_adj is not None) + (meaning.pp is not None)
    return h + n_content * math.log(k_word)


_CONTENT_WORDS = set(NOUNS + ADJECTIVES + PLACES + [form for verb in VERBS for synonym in verb for form in synonym])


def token_shares(translation: str, ambiguity: str) -> list[float]:
    """q_i = p(y_i | y_<i, x) of every token of a style-0 translation (EOS last) under the toy's own
    distribution of translations: the share of the valid translations sharing y_<i that go on with y_i.
    A content word is one of k_word forms; each optional phrase is present with probability 0.5 (then
    one of k_opt words), so a token also carries 0.5 for every phrase left out just before it."""
    k_opt, k_word = CHOICES[ambiguity]
    q, decided, previous = [], 0, None                   # decided: optional phrases present or left out so far
    for tok in translation.replace(".", " .").split() + ["EOS"]:
        starts = [j for j, (_, template, words) in enumerate(OPTIONAL) if j >= decided
                  and tok in (words[:k_opt] if template == "{}" else [template.split()[0]])]
        if starts:        # optional phrase j begins (the ones before it were left out)
            q.append(0.5 ** (starts[0] - decided) * 0.5 * (1 / k_opt if OPTIONAL[starts[0]][1] == "{}" else 1))
            decided = starts[0] + 1
        elif previous in ("at", "with"):                 # the word of "at ..." or "with ...": one of k_opt
            q.append(1 / k_opt)
        elif tok in PREPOSITIONS:                        # the place phrase, after the optional manner adverb
            q.append(0.5 ** max(0, 1 - decided))
            decided = max(decided, 1)
        elif tok == ".":                                 # the end: every optional phrase not seen was left out
            q.append(0.5 ** (len(OPTIONAL) - decided))
            decided = len(OPTIONAL)
        else:                                            # a content word: one of k_word forms; "the", "by", EOS: 1
            q.append(1 / k_word if tok.rstrip("234") in _CONTENT_WORDS else 1.0)
        previous = tok
    return q


# --------------------------------------------------------------------------- generation
# Which noun each of the first n nouns is merged with (a pair shares one source word).
# "even" (xa) and "odd" (xb) merge different pairs: together they resolve every merged noun.
# "close" (xc) shares half of xa's pairs and merges the other four nouns differently: with xa it
# resolves only those four (Zoph & Knight Fig. 6: a closer second source gains less).
MERGES = {"even": (1, 0, 3, 2, 5, 4, 7, 6),      # dog-cat, horse-bird, fish-farmer, king-child
          "odd": (7, 2, 1, 4, 3, 6, 5, 0),       # cat-horse, bird-fish, farmer-king, child-dog
          "close": (1, 0, 3, 2, 7, 6, 5, 4)}     # dog-cat, horse-bird (as xa), fish-child, farmer-king


class ToyLanguage:
    """Source lexicon (invented words) and the English realiser, fixed by a seed."""

    def __init__(self, seed: int, order: str = "sov", merge: str | None = None):
        rng = random.Random(f"toy-lexicon-{seed}-{order}")
        n_words = len(NOUNS) + len(ADJECTIVES) + len(VERBS) + len(PREPOSITIONS) + len(PLACES)
        words = set()
        while len(words) < n_words:
            words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3)))))
        words = sorted(words)
        rng.shuffle(words)
        it = iter(words)
        self.noun = [next(it) for _ in NOUNS]
        self.adj = [next(it) for _ in ADJECTIVES]
        self.verb = [next(it) for _ in VERBS]
        self.prep = [next(it) for _ in PREPOSITIONS]
        self.place = [next(it) for _ in PLACES]
        self.order = order
        if merge is not None:  # trilingual: merge noun pairs into one ambiguous word
            if merge not in MERGES:    # the first half of the nouns take part in the merges
                raise ValueError(f"unknown merge {merge!r}; valid: {', '.join(MERGES)}")
            for i, partner in enumerate(MERGES[merge]):
                self.noun[i] = self.noun[min(i, partner)]

    def source(self, m: Meaning) -> str:
        def np(n, a):
            return [self.noun[n]] + ([self.adj[a]] if a is not None else [])
        pp = [self.place[m.pp[1]], self.prep[m.pp[0]]] if m.pp else []
        if self.order == "sov":   # subj ga obj o place prep verb
            toks = np(m.subj, m.subj_adj) + ["ga"] + np(m.obj, m.obj_adj) + ["o"] + pp + [self.verb[m.verb]]
        else:                     # "vso": verb subj obj prep place, with other particles
            pp = [self.prep[m.pp[0]], self.place[m.pp[1]]] if m.pp else []
            toks = [self.verb[m.verb], "el"] + np(m.subj, m.subj_adj) + ["al"] + np(m.obj, m.obj_adj) + pp
        return " ".join(toks)


def realise(m: Meaning, style: int, strength: str, ambiguity: str, rng: random.Random) -> str:
    """The English translation of ``m`` in ``style``; ``rng`` draws the ambiguous choices."""
    f = style_features(style, strength)
    syn = f["synonyms"]
    k_opt, k_word = CHOICES[ambiguity]

    def word(w: str) -> str:  # a content word's surface form: w, w2, w3 or w4
        j = rng.randrange(k_word) if k_word > 1 else 0
        return w if j == 0 else f"{w}{j + 1}"

    def np(n: int, a: int | None, det: str = "the") -> list[str]:
        return [det] + ([word(ADJECTIVES[a])] if a is not None else []) + [word(NOUNS[n])]

    optional = {}
    for slot, template, choices in OPTIONAL:
        if k_opt and rng.random() < 0.5:
            optional[slot] = template.format(choices[rng.randrange(k_opt)]).split()
        else:
            optional[slot] = []
    tense = 1 if f["tense"] == "past" else 0
    verb_forms = VERBS[m.verb][syn]
    subj = np(m.subj, m.subj_adj, f["determiner"])
    obj = np(m.obj, m.obj_adj)
    if f["voice"] == "active":
        first, middle, second = subj, [word(verb_forms[tense])], obj
    else:
        aux = "was" if tense else "is"
        first, middle, second = obj, [aux, word(verb_forms[2]), "by"], subj
    pp = [PREPOSITIONS[m.pp[0]], "the", word(PLACES[m.pp[1]])] if m.pp else []
    toks = (first + middle + second + optional["manner"] + pp + optional["time"]
            + optional["company"] + optional["frequency"])
    return detokenize(" ".join(toks) + f["punctuation"])


def detokenize(text: str) -> str:
    """Attach punctuation to the preceding word, as in ordinary English text."""
    return re.sub(r" ([,.!;])", r"\1", text)


def random_meaning(rng: random.Random) -> Meaning:
    subj, obj = rng.sample(range(len(NOUNS)), 2)

    def adj():
        return rng.randrange(len(ADJECTIVES)) if rng.random() < 0.5 else None

    pp = (rng.randrange(len(PREPOSITIONS)), rng.randrange(len(PLACES))) if rng.random() < 0.6 else None
    return Meaning(subj, adj(), rng.randrange(len(VERBS)), obj, adj(), pp)


def _meanings(cfg: ToyConfig) -> tuple[list[Meaning], list[Meaning], list[Meaning]]:
    """Distinct meanings for test, dev, then train (no test/dev source occurs in training)."""
    rng = random.Random(f"toy-meanings-{cfg.seed}")
    seen: set[Meaning] = set()
    out = []
    for n in (cfg.n_test, cfg.n_dev, cfg.n_train):
        part = []
        while len(part) < n:
            m = random_meaning(rng)
            if m not in seen:
                seen.add(m)
                part.append(m)
        out.append(part)
    return out[0], out[1], out[2]


def _build(cfg: ToyConfig, languages: dict[str, ToyLanguage], name: str) -> Corpus:
    test_m, dev_m, train_m = _meanings(cfg)
    rng = random.Random(f"toy-targets-{cfg.seed}")

    def src(ms):
        return {lang: [L.source(m) for m in ms] for lang, L in languages.items()}

    train_styles = [rng.randrange(cfg.n_styles) for _ in train_m]
    train = Split(src(train_m),
                  [[realise(m, s, cfg.style_strength, cfg.ambiguity, rng)] for m, s in zip(train_m, train_styles)],
                  [[s] for s in train_styles], train_m)

    def multi(ms):
        labels = [s for s in range(cfg.n_styles) for _ in range(cfg.references_per_style)]
        refs = [[realise(m, s, cfg.style_strength, cfg.ambiguity, rng) for s in labels] for m in ms]
        return Split(src(ms), refs, [list(labels) for _ in ms], ms)

    info = {"config": asdict(cfg), "languages": list(languages),
            "styles": [style_features(s, cfg.style_strength) for s in range(cfg.n_styles)]}
    return Corpus(name, train, multi(dev_m), multi(test_m), info)


def toy_config(config: ToyConfig | None = None, **overrides) -> ToyConfig:
    """``config`` (default: ``ToyConfig()``) with ``overrides``; an unknown setting names the valid ones."""
    valid = [f.name for f in fields(ToyConfig)]
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise TypeError(f"unknown toy setting(s) {unknown}; valid: {', '.join(valid)}")
    return replace(config or ToyConfig(), **overrides)


def toy(config: ToyConfig | None = None, **overrides) -> Corpus:
    """The toy task. ``toy(n_styles=4, style_strength="strong", ambiguity="low", seed=0)``."""
    cfg = toy_config(config, **overrides)
    return _build(cfg, {"src": ToyLanguage(cfg.seed)}, "toy")


def toy_trilingual(config: ToyConfig | None = None, **overrides) -> Corpus:
    """Source languages for one English target: "xa" (SOV) and "xb" (VSO) each merge a different
    set of noun pairs, so only the two together always determine the target; "xc" shares half
    of xa's merged pairs (see :func:`trilingual_languages`).
    Defaults to one style and no ambiguity, so the only uncertainty is the merged senses."""
    base = ToyConfig(n_styles=1)
    cfg = toy_config(config or base, **overrides)
    langs = trilingual_languages(cfg.seed)
    corpus = _build(cfg, langs, "toy-trilingual")
    corpus.info["merged_nouns"] = {lang: ambiguous_nouns(L) for lang, L in langs.items()}
    corpus.info["noun_words"] = {lang: list(L.noun) for lang, L in langs.items()}
    return corpus


def trilingual_languages(seed: int) -> dict[str, ToyLanguage]:
    """The trilingual toy's sources: "xa" (SOV) and "xb" (VSO) merge complementary noun pairs;
    "xc" (SOV, its own words) shares half of xa's merged pairs: a language close to xa."""
    return {"xa": ToyLanguage(seed, "sov", merge="even"), "xb": ToyLanguage(seed + 1, "vso", merge="odd"),
            "xc": ToyLanguage(seed + 2, "sov", merge="close")}


def ambiguous_nouns(lang: ToyLanguage) -> dict[str, list[str]]:
    """Source word -> the English nouns it may mean (only words with several meanings)."""
    senses: dict[str, list[str]] = {}
    for i, w in enumerate(lang.noun):
        senses.setdefault(w, []).append(NOUNS[i])
    return {w: s for w, s in senses.items() if len(s) > 1}


# --------------------------------------------------------------------------- composing a meaning
NONE = "-"


def meaning_parts() -> dict[str, list[str]]:
    """The parts of a meaning a student can choose, as dropdown options (English names;
    ``"-"`` leaves an optional part out): see :func:`compose`."""
    return {"subject": list(NOUNS), "subject_adj": [NONE, *ADJECTIVES], "verb": [v[0][0] for v in VERBS],
            "object": NOUNS[1:] + NOUNS[:1], "object_adj": [NONE, *ADJECTIVES],
            "place": [NONE] + [f"{p} the {pl}" for p in PREPOSITIONS for pl in PLACES]}


def compose(subject: str, verb: str, object: str, subject_adj: str = NONE, object_adj: str = NONE,
            place: str = NONE) -> Meaning:
    """The :class:`Meaning` of English parts (the options of :func:`meaning_parts`); a part
    that is not one of them is a ValueError naming the valid ones."""
    parts = meaning_parts()

    def index(name, value, options, offset=0):
        if value not in options:
            raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(options)}")
        return options.index(value) - offset
    if subject == object:
        raise ValueError(f"the subject and the object are both {subject!r}: the toy's meanings have two different nouns")
    adj = lambda name, v: None if v == NONE else index(name, v, parts[name], 1)
    p = None if place == NONE else divmod(index("place", place, parts["place"], 1), len(PLACES))
    return Meaning(index("subject", subject, NOUNS), adj("subject_adj", subject_adj),
                   index("verb", verb, parts["verb"]), index("object", object, NOUNS), adj("object_adj", object_adj),
                   None if p is None else (p[0], p[1]))


def languages(corpus: Corpus) -> dict[str, ToyLanguage]:
    """The source languages a toy corpus was generated with (rebuilt from its configuration)."""
    seed = corpus.info["config"]["seed"]
    if corpus.name == "toy-trilingual":
        return trilingual_languages(seed)
    if corpus.name == "toy":
        return {"src": ToyLanguage(seed)}
    raise ValueError(f"{corpus.name!r} is not a toy corpus: only the toys have a grammar to compose with")


def renderings(corpus: Corpus, m: Meaning, seed: int = 0) -> list[tuple[int, str]]:
    """(style, English) for every style of the corpus: how its references render ``m`` (the
    ambiguous choices drawn with ``seed``)."""
    cfg = corpus.info["config"]
    rng = random.Random(f"compose-{seed}")
    return [(s, realise(m, s, cfg["style_strength"], cfg["ambiguity"], rng)) for s in range(cfg["n_styles"])]
