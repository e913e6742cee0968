"""Zoph & Knight (2016), multi-source translation: the claims the reproduction tests.

The reproduction trains, for every model seed, the systems of Figure 4 that the claims compare on
notebook 01's harder variant of the trilingual toy (a tenth of the training triples, optional phrases
the sources cannot decide, four references per test sentence): the two single sources `fr` and `de`,
Basic and Child-Sum over both, the French + French control, the closer source `close` with
`fr+close.basic` (Figure 6's question), and local-p attention over `fr` and over both (Basic), each to
the convergence rule of :mod:`nbsupport.claims`. It tests the BLEU and perplexity gains of two sources
over the best single one, Basic against Child-Sum, the French + French control, a closer second source
gaining less, and attention helping. Where the toy differs: the main toy's systems reach the floors its
generator sets (a second source decides the nouns the first one merges, by design), so only the harder
variant, whose floors stay above perplexity 1 and whose systems stay above them, can test the
comparisons; one-layer LSTMs of 128 units and 2000 triples instead of four layers of 1000 and 2.4M
WMT triples; BLEU against four toy references, so only the direction of each difference is the
paper's, never its size (every threshold is 0); toy sentences are short enough for one final encoder
state, where the paper's attention gains on long WMT sentences.
"""
from . import PaperClaim, Sanity, converged, fact, within

TITLE = "Barret Zoph and Kevin Knight (2016), Multi-Source Neural Translation (NAACL 2016)"

# the systems (nbsupport.lessons.multisource.SYSTEMS) every seed trains: those the claims compare
SYSTEMS = ("fr", "de", "fr+de.basic", "fr+de.childsum", "fr+fr.same", "close", "fr+close.basic", "fr.attn",
           "fr+de.attn_basic")

_FIG4 = ("We see that the Basic combination method yields a +4.8 Bleu improvement over the strongest single-source, "
         "attention-based system. It also improves Bleu by +2.2 over the non-attention baseline.")
_CHILD_SUM = "The Child-Sum method gives improvements of +4.4 and +1.4."
_CONTROL = "We confirm that two copies of the same French input yields no BLEU improvement."
_PPL = "Ppl reports test-set perplexity as the system predicts English tokens."
_TEST = "beam 4, the harder variant's test sentences against their 4 references"
_DIRECTION = "direction only (the paper's WMT BLEU differences have no toy scale)"
_PPL_DIRECTION = "direction only (the paper's WMT perplexities have no toy scale)"


def _room(*systems: str) -> tuple:
    """BLEU of each system off 0 and 100: one that wrote nothing or every reference leaves nothing to compare."""
    return tuple(within(f"bleu {s}", 0.0, 100.0, f"{s}'s BLEU strictly between 0 and 100") for s in systems)


def _claim(key, quote, section, measures, quantity, direction, systems, threshold_from=_DIRECTION, extra=(),
           room=True):
    """A direction-only claim on ``systems``, each converged (and, for a BLEU difference, off BLEU's bounds)."""
    return PaperClaim(key, quote, section, measures, quantity, direction, 0.0, threshold_from,
                      (converged(*systems), *(_room(*systems) if room else ()), *extra))


CLAIMS = (
    _claim("a second source resolves the merged nouns",
           "The translation system now has two strings as input, which can reduce ambiguity via \"triangulation\" "
           "(Kay's term).", "\u00a71",
           "share of the merged nouns (those fr or de writes with one word for two) translated right: fr+de.basic "
           f"minus the better of fr and de; {_TEST}", "basic_minus_single_merged_nouns", ">",
           ("fr", "de", "fr+de.basic"), "direction only (the paper gives no number for it)", room=False),
    _claim("Basic above the best single source", _FIG4, "\u00a73, Fig. 4 (Basic 23.2 against French 21.0: +2.2)",
           f"BLEU of fr+de.basic minus the better of fr and de (in every resample); {_TEST}",
           "basic_minus_single_bleu", ">", ("fr", "de", "fr+de.basic")),
    _claim("Child-Sum above the best single source", _CHILD_SUM,
           "\u00a73, Fig. 4 (Child-Sum 22.5 against French 21.0)",
           f"BLEU of fr+de.childsum minus the better of fr and de; {_TEST}", "childsum_minus_single_bleu", ">",
           ("fr", "de", "fr+de.childsum")),
    _claim("Basic above Child-Sum", f"{_FIG4} {_CHILD_SUM}",
           "\u00a73, Fig. 4 (23.2 against 22.5; with attention 30.0 against 29.6), Fig. 6 (14.5 against 14.4)",
           f"BLEU of fr+de.basic minus fr+de.childsum; {_TEST}", "basic_minus_childsum_bleu", ">",
           ("fr+de.basic", "fr+de.childsum")),
    _claim("Basic's perplexity below the best single source's", _PPL,
           "\u00a73, Fig. 4 (Ppl: Basic 8.7 against French 10.3, German 15.9)",
           "test perplexity of the training-target reference: fr+de.basic minus the lower of fr and de",
           "basic_minus_single_ppl", "<", ("fr", "de", "fr+de.basic"), _PPL_DIRECTION, room=False),
    _claim("Child-Sum's perplexity below the best single source's", _PPL,
           "\u00a73, Fig. 4 (Ppl: Child-Sum 9.0 against French 10.3, German 15.9)",
           "test perplexity of the training-target reference: fr+de.childsum minus the lower of fr and de",
           "childsum_minus_single_ppl", "<", ("fr", "de", "fr+de.childsum"), _PPL_DIRECTION, room=False),
    _claim("French + French no better than French", _CONTROL,
           "\u00a73, Fig. 4 (French+French Child-Sum 20.7 against French 21.0)",
           f"BLEU of fr+fr.same (Child-Sum over the same fr sentence twice) minus fr; {_TEST}",
           "frfr_minus_fr_bleu", "<", ("fr", "fr+fr.same"),
           "direction only: the paper's control is 0.3 BLEU below French (20.7 against 21.0, Fig. 4); a gain "
           "contradicts it, an interval across 0 (no gain and no loss found) is not decided"),
    _claim("the gain is the second language's", _CONTROL,
           "\u00a73, Fig. 4 (French+German Child-Sum 22.5 against French+French Child-Sum 20.7)",
           f"BLEU of fr+de.childsum minus fr+fr.same (the same combiner and two encoders each); {_TEST}",
           "childsum_minus_frfr_bleu", ">", ("fr+de.childsum", "fr+fr.same")),
    _claim("a closer second source gains less",
           "When our source languages are English and French (Figure 6), we observe smaller BLEU gains (up to +1.1). "
           "This is evidence that the more distinct the source languages, the better they disambiguate each other.",
           "\u00a73, Fig. 6 (English+French Basic 14.5 against English 13.4: +1.1) against Fig. 4 (+2.2)",
           "BLEU gain of fr+close.basic over the better of fr and close, minus the gain of fr+de.basic over the "
           f"better of fr and de; {_TEST}", "close_gain_minus_de_gain", "<",
           ("fr", "de", "close", "fr+de.basic", "fr+close.basic"),
           extra=(fact("close is the closer source", "close shares more of fr's merged noun pairs than de does "
                       "(the paper's premise: English is closer to French than German is)"),)),
    _claim("attention helps a single source", _FIG4,
           "\u00a73, Fig. 4 (French with attention 25.2 against French 21.0)",
           f"BLEU of fr.attn (local-p attention, input feeding) minus fr; {_TEST}", "attn_minus_fr_bleu", ">",
           ("fr", "fr.attn")),
    _claim("two sources with attention above the single-source attention system", _FIG4,
           "\u00a73, Fig. 4 (B-Attent. 30.0 against French Attention 25.2: +4.8)",
           f"BLEU of fr+de.attn_basic (Basic, multi-source attention, eq. 14) minus fr.attn; {_TEST}",
           "attn_basic_minus_attn_bleu", ">", ("fr.attn", "fr+de.attn_basic")),
    _claim("attention helps two sources",
           "We obtain this result through a novel encoder-vector combination method and a novel multi-attention "
           "system.", "\u00a74, Fig. 4 (B-Attent. 30.0 against Basic 23.2)",
           f"BLEU of fr+de.attn_basic minus fr+de.basic; {_TEST}", "attn_basic_minus_basic_bleu", ">",
           ("fr+de.basic", "fr+de.attn_basic")),
)

SANITY = (
    Sanity("floors above 1", "the harder variant leaves every system uncertainty its sources cannot remove: "
           "each system's perplexity floor on the test set is above 1 (no comparison is at a ceiling by design)",
           "sanity_floors_above_one"),
    Sanity("floors ordered by design", "the generator's floors: fr+de below fr and de, fr+close between fr+de and fr, "
           "fr+fr.same equal to fr (these orderings are the toy's construction, not the paper's claims)",
           "sanity_floors_ordered"),
    Sanity("perplexity as Figure 4", "the resampled perplexity's estimate is the lesson's test perplexity "
           "(multisource.evaluate_system) of every system", "sanity_perplexity_is_evaluate_system"),
)
