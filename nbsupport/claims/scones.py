"""Stahlberg & Kumar (2022), SCONES: the claims the reproduction tests.

The reproduction runs two experiments for every model seed, each model trained to the convergence
rule of :mod:`nbsupport.claims`. The toy experiment (notebooks 06-07) trains softmax and SCONES
(alpha = 0.2 and 1.0) on the single-style toy task at low and at high intrinsic uncertainty and
tests the beam search curse (Figs. 3-4, section 4.3), exact search (Table 6, Figs. 5-6), search
errors (Fig. 7), the cost of exact search against ambiguity (appendix A, Table 7), greedy SCONES
against softmax (Table 3, section 4.1; alpha chosen on the dev set as Table 5) and decoding speed
(section 4.2, timed side by side on a CPU). The synthetic experiment (notebooks 08-09) samples
targets from IBM-3 at a low and a high temperature and tests Fig. 8 (similar under beam search),
Fig. 9 (exact search degrades for softmax and alpha = 1, less for alpha = 0.2) and Table 7 again.
Where the toy differs: invented languages with a known grammar instead of WMT (multi-reference
BLEU against 4 sampled references instead of one human reference); Transformers of about 0.1M
parameters (64-dimensional, one encoder and one decoder layer) instead of 121M; beams up to 64
instead of 500; exact search on short sources (the toy's sources up to a length limit) within a
budget of prefixes far below the paper's 1M states; alpha chosen among two trained values. Where
the paper gives no number (a "sharp decline", "similarly"), the test is the direction, or a margin
taken from the paper's own tables, said in ``threshold_from``.
"""
from . import PaperClaim, Sanity, compute_bound, converged, fact, within

TITLE = ("Stahlberg & Kumar (2022), Jam or Cream First? Modeling Ambiguity in Neural Machine Translation with "
         "SCONES (NAACL 2022)")

SIMILAR = 2.0   # BLEU: the largest beam-4 gain of SCONES over softmax in Table 3 (lt-en, 26.9 -> 28.9)

# ---------------------------------------------------------------------------- the toy (notebooks 06-07)
_SWEEP = "the first test sources of the toy (4 references each), the same sources at both levels"
_EXACT = "the toy's short test sources (exact search, the same sources for every model and level)"


def _conv(*names):
    return converged(*names)


def _bleu_ok(*keys):
    """The systems translate (BLEU not at the floor or the ceiling), where a change of BLEU is the claim."""
    return tuple(within(k, 1.0, 99.0, f"{k} between 1 and 99 (not at a floor or a ceiling)") for k in keys)


_PROVEN_HIGH = fact("toy exact search proven (high)", "exact search proved its answer optimal on every sentence "
                    "used, for every model at high ambiguity (an unproven answer is only a lower bound near the beam)")
_PROVEN_BOTH = fact("toy exact search proven (both levels)", "exact search proved its answer optimal on every "
                    "sentence used, for every model at both levels (an unproven search's count is only a lower bound)")
_CURSE = ("One of the most irksome pathologies of traditional softmax-based NMT models is the \"beam search curse\" "
          "(Koehn and Knowles, 2017): larger beam sizes improve the log-probability of the translations, but the "
          "translation quality gets worse.")
_LENGTH = ("Translations obtained using softmax become shorter at higher beam sizes whereas for SCONES with "
           "\u03b1 = 0.2, there is no such steep decrease in length.")
_FIG5 = ("With exact search, small \u03b1-values yield adequate translations, but \u03b1 \u2248 1.0 performs similar "
         "to the softmax baseline: the BLEU score drops because hypotheses are too short.")
_TABLE7 = ("Table 7: Fraction of sentences for which exact search did not terminate before 1M steps. For runs that "
           "are not listed here, exact search terminated within 1M steps for all sentences.")
_T7_FROM = ("direction only (Table 7, synthetic: SCONES 0.2 unfinished 0.55% at temperature 0.1, 5.10% at 0.2, "
            "12.6% at 0.3, 25.0% at 0.5; softmax 1.05%, 1.00%, 0.10%, then not listed)")
_TABLE3 = "SCONES yields consistent improvements across the board."
_T3_FROM = ("direction only (Table 3, greedy: +1.1 de-en, +0.4 en-de, +0.7 fi-en, +1.0 en-fi, +1.4 lt-en, "
            "+1.0 en-lt BLEU)")
_GREEDY_BEAM = ("For four of six language pairs (all except en-de and fi-en), SCONES with greedy search is even able "
                "to outperform the softmax models with beam search.")

TOY_CLAIMS = (
    PaperClaim(
        "softmax BLEU falls at large beams (high)",
        "The sharp decline of the green curve for large beam sizes reflects the beam search curse for the softmax "
        "baseline.", "\u00a74.3, Fig. 3",
        f"softmax, multi-reference BLEU at the largest beam minus at beam 4; high ambiguity, {_SWEEP}",
        "toy.softmax.bleu_change.high", "<", 0.0, "direction only (Fig. 3 gives no number)",
        (_conv("high/softmax"), *_bleu_ok("toy.softmax.bleu_b4.high"))),
    PaperClaim(
        "softmax shorter at large beams (high)", _LENGTH, "\u00a74.3, Fig. 4",
        f"softmax, length ratio at the largest beam minus at beam 4; high ambiguity, {_SWEEP}",
        "toy.softmax.len_change.high", "<", 0.0, "direction only", (_conv("high/softmax"),
                                                                     *_bleu_ok("toy.softmax.bleu_b4.high"))),
    PaperClaim(
        "SCONES 0.2 keeps its length better than softmax (high)", _LENGTH, "\u00a74.3, Fig. 4",
        f"length-ratio change from beam 4 to the largest beam, SCONES 0.2 minus softmax; high ambiguity, {_SWEEP}",
        "toy.len_change.scones02_minus_softmax.high", ">", 0.0, "direction only",
        (_conv("high/softmax", "high/scones_0.2"), *_bleu_ok("toy.softmax.bleu_b4.high", "toy.scones_0.2.bleu_b4.high"))),
    PaperClaim(
        "SCONES 0.2 less affected by large beams (high)",
        "SCONES seems to be less affected at larger beam sizes, particularly for small \u03b1-values: the BLEU score "
        "for SCONES with \u03b1 = 0.2 (solid purple curve) is stable for beam sizes greater than 100.",
        "\u00a74.3, Fig. 3",
        f"BLEU change from beam 4 to the largest beam, SCONES 0.2 minus softmax; high ambiguity, {_SWEEP}",
        "toy.bleu_change.scones02_minus_softmax.high", ">", 0.0, "direction only",
        (_conv("high/softmax", "high/scones_0.2"), *_bleu_ok("toy.softmax.bleu_b4.high", "toy.scones_0.2.bleu_b4.high"))),
    PaperClaim(
        "softmax BLEU falls at large beams (low)", _CURSE, "\u00a74.3 (on WMT German-English, Fig. 3)",
        f"softmax, multi-reference BLEU at the largest beam minus at beam 4; LOW ambiguity, {_SWEEP} (the paper's "
        "statement is about real data; the toy's low level has little intrinsic uncertainty)",
        "toy.softmax.bleu_change.low", "<", 0.0, "direction only",
        (_conv("low/softmax"), *_bleu_ok("toy.softmax.bleu_b4.low"))),
    PaperClaim(
        "the curse grows with ambiguity",
        "Stahlberg et al. (2022) provided strong evidence that this length deficiency is due to the intrinsic "
        "uncertainty of the MT task.", "\u00a74.3",
        f"softmax, length-ratio change from beam 4 to the largest beam, low minus high ambiguity; {_SWEEP}",
        "toy.softmax.len_change.low_minus_high", ">", 0.0, "direction only",
        (_conv("low/softmax", "high/softmax"),)),
    PaperClaim(
        "exact search: SCONES 0.2 above softmax (high)",
        "Table 6 shows that SCONES with \u03b1 = 0.2 consistently outperforms the softmax baselines by a large margin "
        "with exact search.", "\u00a74.3, Table 6 (exact search: de-en 39.1 against 23.7; margins 5.0 to 21.6 BLEU)",
        f"exact search, multi-reference BLEU, SCONES 0.2 minus softmax; high ambiguity, {_EXACT}",
        "toy.exact_bleu.scones02_minus_softmax.high", ">", 0.0,
        "direction only (Table 6's margins are on WMT; the toy's BLEU scale differs)",
        (_conv("high/softmax", "high/scones_0.2"), _PROVEN_HIGH)),
    PaperClaim(
        "exact search: softmax's modes shorter than SCONES 0.2's (high)", _FIG5, "\u00a74.3, Fig. 5",
        f"exact search, length ratio, SCONES 0.2 minus softmax; high ambiguity, {_EXACT}",
        "toy.exact_len.scones02_minus_softmax.high", ">", 0.0, "direction only",
        (_conv("high/softmax", "high/scones_0.2"), _PROVEN_HIGH)),
    PaperClaim(
        "exact search: alpha = 1's modes shorter than alpha = 0.2's (high)", _FIG5, "\u00a74.3, Fig. 5",
        f"exact search, length ratio, SCONES 0.2 minus SCONES 1.0; high ambiguity, {_EXACT}",
        "toy.exact_len.scones02_minus_scones10.high", ">", 0.0, "direction only",
        (_conv("high/scones_0.2", "high/scones_1.0"), _PROVEN_HIGH)),
    PaperClaim(
        "smaller alpha, wider gap to the empty translation (high)",
        "A small \u03b1 leads to a larger gap between the logprobabilities of the exact search translation and the "
        "empty translation that arises from higher logprobabilities for the exact-search translation along with "
        "smaller variances.", "\u00a74.3, Fig. 6",
        f"mean over sentences of (exact search's log score minus the empty translation's), SCONES 0.2 minus SCONES "
        f"1.0; high ambiguity, {_EXACT}",
        "toy.empty_gap.scones02_minus_scones10.high", ">", 0.0, "direction only",
        (_conv("high/scones_0.2", "high/scones_1.0"), _PROVEN_HIGH)),
    PaperClaim(
        "fewer search errors for SCONES 0.2 (high)",
        "Increasing the beam size is most effective in reducing the number of search errors for SCONES with a small "
        "value of \u03b1.", "\u00a74.4, Fig. 7",
        f"share of sentences whose beam output at the largest beam scores below exact search's, softmax minus "
        f"SCONES 0.2; high ambiguity, {_EXACT}",
        "toy.search_errors.softmax_minus_scones02.high", ">", 0.0, "direction only",
        (_conv("high/softmax", "high/scones_0.2"), _PROVEN_HIGH)),
    PaperClaim(
        "exact search costlier with ambiguity: SCONES 0.2", _TABLE7, "appendix A, Table 7",
        f"SCONES 0.2, prefixes exact search expands per sentence (log2, mean), high minus low ambiguity; {_EXACT}",
        "toy.log2_prefixes.high_minus_low.scones02", ">", 0.0, _T7_FROM,
        (_conv("low/scones_0.2", "high/scones_0.2"), _PROVEN_BOTH)),
    PaperClaim(
        "exact search not costlier with ambiguity: softmax", _TABLE7, "appendix A, Table 7",
        f"softmax, prefixes exact search expands per sentence (log2, mean), low minus high ambiguity; {_EXACT}",
        "toy.log2_prefixes.low_minus_high.softmax", ">", 0.0, _T7_FROM,
        (_conv("low/softmax", "high/softmax"), _PROVEN_BOTH)),
    *(PaperClaim(
        f"greedy SCONES above greedy softmax ({level})", _TABLE3, "\u00a74.1, Table 3 (alpha tuned on dev, Table 5)",
        f"greedy multi-reference BLEU, SCONES (alpha chosen by greedy dev BLEU among the trained values) minus "
        f"softmax; {level} ambiguity, {_SWEEP}",
        f"toy.greedy.scones_minus_softmax.{level}", ">", 0.0, _T3_FROM,
        (_conv(f"{level}/softmax", f"{level}/scones_0.2", f"{level}/scones_1.0"),
         *_bleu_ok(f"toy.softmax.bleu_greedy.{level}")))
      for level in ("low", "high")),
    *(PaperClaim(
        f"greedy SCONES above beam-4 softmax ({level})", _GREEDY_BEAM, "\u00a74.1, Table 3",
        f"multi-reference BLEU, greedy SCONES (alpha chosen on dev) minus softmax with beam 4; {level} ambiguity, "
        f"{_SWEEP}", f"toy.greedy_scones_minus_beam4_softmax.{level}", ">", 0.0,
        "direction only (Table 3: four of six pairs, e.g. lt-en greedy SCONES 27.7 against beam-4 softmax 26.9)",
        (_conv(f"{level}/softmax", f"{level}/scones_0.2", f"{level}/scones_1.0"),
         *_bleu_ok(f"toy.softmax.bleu_b4.{level}")))
      for level in ("low", "high")),
    PaperClaim(
        "greedy SCONES faster than beam-4 softmax",
        "Replacing beam-4 search with greedy search corresponds to a 3.9x speed-up (2.76 \u2192 10.64 sentences per "
        "second) on an entry-level NVIDIA Quadro P1000 GPU with a batch size of 4.", "\u00a74.2",
        "seconds of softmax beam 4 over seconds of SCONES 0.2 greedy, the same sources at batch size 4, paired "
        "rounds (the two take turns; geometric mean of the rounds' ratios, bootstrap over the rounds)",
        "toy.speed_ratio", ">", 1.0,
        "direction only (the paper's 3.9x is on a GPU; a CPU's ratio differs)", (compute_bound(),)),
)

# ---------------------------------------------------------------------------- IBM-3 (notebooks 08-09)
_IBM_BEAM = "beam 4 on the first test sources of the synthetic pair (4 sampled references each)"
_IBM_EXACT = ("exact search on the synthetic pair's short test sources, the same sources at both temperatures, "
              "multi-reference BLEU")
_IBM_PROVEN = fact("ibm exact search proven", "exact search proved its answer optimal on every sentence used, for "
                   "every model at both temperatures")
_IBM_ALL = ("ibm-lo/softmax", "ibm-lo/scones_0.2", "ibm-lo/scones_1.0",
            "ibm-hi/softmax", "ibm-hi/scones_0.2", "ibm-hi/scones_1.0")
_FIG9 = ("While the translations with the global highest probability for high IBM-3 sampling temperatures are heavily "
         "degraded for softmax and SCONES with \u03b1 = 1, the drop is much less dramatic for SCONES with \u03b1 = 0.2 "
         "(solid purple curve).")

IBM_CLAIMS = (
    *(PaperClaim(
        f"similar under beam search (gamma {at})",
        "Fig. 8 shows that softmax and SCONES perform similarly using beam search", "\u00a75, Fig. 8",
        f"the largest multi-reference BLEU gap between a SCONES model (0.2, 1.0) and softmax; the {at} temperature, "
        f"{_IBM_BEAM} (an equivalence test: the whole interval below the margin)",
        f"ibm.beam4_largest_gap.{at}", "<", SIMILAR,
        "Table 3: the largest beam-4 BLEU gain of SCONES over softmax (lt-en, 26.9 -> 28.9)",
        (_conv(f"ibm-{at}/softmax", f"ibm-{at}/scones_0.2", f"ibm-{at}/scones_1.0"),
         *_bleu_ok(f"ibm.softmax.bleu_b4.{at}")))
      for at in ("lo", "hi")),
    PaperClaim(
        "exact search at high gamma: SCONES 0.2 above softmax", _FIG9, "\u00a75, Fig. 9",
        f"exact search at the high temperature, SCONES 0.2 minus softmax; {_IBM_EXACT}",
        "ibm.exact_bleu.scones02_minus_softmax.hi", ">", 0.0, "direction only",
        (_conv("ibm-hi/softmax", "ibm-hi/scones_0.2"), _IBM_PROVEN)),
    PaperClaim(
        "exact search at high gamma: SCONES 0.2 above SCONES 1.0", _FIG9, "\u00a75, Fig. 9",
        f"exact search at the high temperature, SCONES 0.2 minus SCONES 1.0; {_IBM_EXACT}",
        "ibm.exact_bleu.scones02_minus_scones10.hi", ">", 0.0, "direction only",
        (_conv("ibm-hi/scones_0.2", "ibm-hi/scones_1.0"), _IBM_PROVEN)),
    PaperClaim(
        "softmax's mode degrades with gamma", _FIG9, "\u00a75, Fig. 9",
        f"softmax's exact-search BLEU as a % of softmax's beam-4 BLEU on the same sentences, low minus high "
        f"temperature; {_IBM_EXACT}", "ibm.rel_drop.softmax", ">", 0.0, "direction only",
        (_conv(*_IBM_ALL[::3]), _IBM_PROVEN)),
    PaperClaim(
        "SCONES 0.2's mode degrades less than softmax's", _FIG9, "\u00a75, Fig. 9",
        f"the drop of the relative exact-search BLEU (% of softmax beam 4) from low to high temperature, softmax's "
        f"minus SCONES 0.2's; {_IBM_EXACT}", "ibm.rel_drop.softmax_minus_scones02", ">", 0.0, "direction only",
        (_conv("ibm-lo/softmax", "ibm-hi/softmax", "ibm-lo/scones_0.2", "ibm-hi/scones_0.2"), _IBM_PROVEN)),
    PaperClaim(
        "exact search costlier with gamma: SCONES 0.2", _TABLE7, "appendix A, Table 7",
        f"SCONES 0.2, prefixes exact search expands per sentence (log2, mean), high minus low temperature; "
        f"{_IBM_EXACT}", "ibm.log2_states.hi_minus_lo.scones02", ">", 0.0, _T7_FROM,
        (_conv("ibm-lo/scones_0.2", "ibm-hi/scones_0.2"), _IBM_PROVEN)),
    PaperClaim(
        "exact search not costlier with gamma: softmax", _TABLE7, "appendix A, Table 7",
        f"softmax, prefixes exact search expands per sentence (log2, mean), low minus high temperature; "
        f"{_IBM_EXACT}", "ibm.log2_states.lo_minus_hi.softmax", ">", 0.0, _T7_FROM,
        (_conv("ibm-lo/softmax", "ibm-hi/softmax"), _IBM_PROVEN)),
)

CLAIMS = TOY_CLAIMS + IBM_CLAIMS

SANITY = (
    Sanity("toy exact search at least every beam", "on the toy, exact search's answer scores at least as high as "
           "every beam size's output and the empty translation, every sentence and model (it starts from them)",
           "sanity.toy_exact_at_least_beams"),
    Sanity("toy levels share sources", "the toy's low- and high-ambiguity test sets have the same sources (the "
           "comparisons across levels are paired)", "sanity.toy_levels_share_sources"),
    Sanity("ibm exact search at least every beam", "on IBM-3's pairs, exact search's answer scores at least as high "
           "as every seed beam's output, every sentence and model", "sanity.ibm_exact_at_least_beams"),
    Sanity("references spread with gamma", "IBM-3's sampled references of one source agree less at the high "
           "temperature (pairwise BLEU lower): what makes single-reference BLEU fall with gamma by construction "
           "(Fig. 8's fall is this, not a finding about the models)", "sanity.ibm_references_spread"),
)
