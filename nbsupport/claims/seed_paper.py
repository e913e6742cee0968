"""The seed paper's claims: Hard-MoE against the decoding baselines (Table 1 and Table 5 with the
text of appendix A), the K sweep (section 5.3), and the latent values' styles (Table 4).

The reproduction trains, for every model seed, a baseline Transformer and a Hard-MoE with K = S = 4
latent values (as many hypotheses as references, Table 1's protocol) and with K = 2S = 8 (Table 5's
sweep from K to twice K), each to the convergence rule, on notebook 10's 4-style toy; the baseline is
decoded by sampling, top-k sampling and diverse beam search (their settings chosen by grid search on
the dev set for the best average oracle BLEU: section 5.2 "perform[s] grid search over these
hyper-parameters and report[s] the best result", and appendix A's "k = 2 performed best" is the
quality of top-k) and by beam search, Hard-MoE by greedy decoding per latent value.
Quality is the paper's average oracle BLEU, diversity its pairwise BLEU, and coverage its reference
coverage. Where the toy differs: S = 4 known styles instead of WMT's open set of translations (past
K = S a latent value has no style of its own left, so the sweep tests the paper's statement where its
premise, more ways to translate than hypotheses, no longer holds); a small model that learns the toy
almost exactly, so sampling is far better than on WMT; the human point is not used (the toy's
references differ by construction). A claim about Hard-MoE's hypotheses assumes a Hard-MoE that uses
its latent values (the paper's premise): it is not decided on a seed whose Hard-MoE writes fewer than
K - 0.5 distinct hypotheses per source on average.
"""
from __future__ import annotations

from . import PaperClaim, Sanity, converged, fact

TITLE = ("Diverse Machine Translation with a Single Multinomial Latent Variable "
         "(anonymous ICLR 2019 submission; the seed paper)")

S = 4                     # the toy's styles: the number of references per source
KS = (S, 2 * S)           # Table 1's K (= the references) and the sweep's K = 2S

A = "App. A, Table 5"
_QUOTES = {
    "beam": "Beam search produces the highest quality outputs, but with low diversity.",
    "sampling": "We observe that sampling produces diverse but low quality outputs.",
    "topk": ("We can improve translation quality by restricting sampling to the top-k candidates at each output "
             "position (k = 2 performed best), but translation quality is still worse than hard-MoE."),
    "diverse_beam": ("Diverse beam search provides a reasonable balance between diversity and translation quality, "
                     "but the hard-MoE approach produces even more diverse and better quality translations."),
    "coverage": ("Finally, besides unrestricted sampling, hard-MoE covers the largest number of references of any "
                 "of the approaches evaluated."),
}


def uses_latents(k: int):
    """The paper's premise for a claim about Hard-MoE's K hypotheses: its latent values write different
    hypotheses (at least K - 0.5 distinct per source on average; a collapsed latent repeats another's)."""
    return fact(f"hard_moe_k{k}_distinct", f"Hard-MoE at K = {k} uses its latent values (at least {k - 0.5:g} distinct "
                                            "hypotheses per source)")


def _at(k: int) -> tuple[PaperClaim, ...]:
    """Appendix A's statements about Table 5, at K = k (quality: average oracle BLEU, the paper's)."""
    models = converged("baseline", f"hard_moe_k{k}")
    uses = uses_latents(k)
    on = f"K = {k}, the test sources"
    return (
        PaperClaim(f"beam_highest_quality_k{k}", _QUOTES["beam"], A,
                   f"beam's average oracle BLEU minus the highest of sampling, top-k, diverse beam and Hard-MoE; {on}",
                   f"beam_quality_margin_k{k}", ">", 0.0,
                   "direction only (Table 5: beam 57.6 / 56.5 / 55.4, the next best Hard-MoE 52.0 / 51.0 / 49.7)",
                   (models,)),
        PaperClaim(f"sampling_more_diverse_k{k}", _QUOTES["sampling"], f"{A}; §5.3, Table 1",
                   f"Hard-MoE's pairwise BLEU minus sampling's; {on}", f"moe_minus_sampling_pairwise_k{k}", ">", 0.0,
                   "direction only (Table 1: sampling 24.1 / 32.0 / 48.2 against Hard-MoE 50.2 / 64.0 / 51.6)",
                   (models, uses)),
        PaperClaim(f"sampling_lower_quality_k{k}", _QUOTES["sampling"], f"{A}; §5.3, Table 1",
                   f"Hard-MoE's average oracle BLEU minus sampling's; {on}", f"moe_minus_sampling_quality_k{k}",
                   ">", 0.0, "direction only (Table 1: Hard-MoE 51.0 / 61.9 / 28.9 against sampling 30.3 / 37.6 / 17.7)",
                   (models, uses)),
        PaperClaim(f"topk_below_hard_moe_k{k}", _QUOTES["topk"], A,
                   f"Hard-MoE's average oracle BLEU minus top-k sampling's (k chosen on the dev set); {on}",
                   f"moe_minus_topk_quality_k{k}", ">", 0.0,
                   "direction only (Table 5: top-2 47.0 / 47.3 / 47.5 against 52.0 / 51.0 / 49.7)", (models, uses)),
        PaperClaim(f"more_diverse_than_diverse_beam_k{k}", _QUOTES["diverse_beam"], f"{A}; Table 1",
                   f"diverse beam's pairwise BLEU minus Hard-MoE's (strength chosen on the dev set); {on}",
                   f"db_minus_moe_pairwise_k{k}", ">", 0.0,
                   "direction only (Table 5: diverse beam 59.8 / 53.7 / 49.7 against 54.2 / 50.2 / 47.1)", (models, uses)),
        PaperClaim(f"better_than_diverse_beam_k{k}", _QUOTES["diverse_beam"], f"{A}; Table 1",
                   f"Hard-MoE's average oracle BLEU minus diverse beam's; {on}", f"moe_minus_db_quality_k{k}",
                   ">", 0.0, "direction only (Table 5: 52.0 / 51.0 / 49.7 against 51.0 / 48.2 / 46.1)", (models, uses)),
        PaperClaim(f"coverage_besides_sampling_k{k}", _QUOTES["coverage"], A,
                   f"Hard-MoE's reference coverage minus the highest of top-k, beam and diverse beam (every system "
                   f"evaluated but unrestricted sampling, as the paper excepts it); {on}",
                   f"moe_coverage_margin_k{k}", ">", 0.0,
                   "direction only (Table 5: Hard-MoE 2.8 / 4.0 / 5.3, the next best of them 2.7 / 3.7 / 4.8: top-2, "
                   "top-2 and diverse beam, diverse beam)",
                   (models, uses)),
    )


CLAIMS = (
    *_at(KS[0]),
    PaperClaim("beam_pairwise_gap_k4", "However, it severely lacks diversity, as shown by the high pairwise BLEU near 80.",
               "§5.3, Table 1", "beam's pairwise BLEU minus Hard-MoE's; K = 4 (as many hypotheses as references, "
               "as Table 1), the test sources", "beam_minus_moe_pairwise_k4", ">", 13.1,
               "Table 1: the smallest of its three gaps, En-Fr beam 77.1 against Hard-MoE 64.0 (En-De 22.8, Zh-En 31.8)",
               (converged("baseline", "hard_moe_k4"), uses_latents(4))),
    PaperClaim("latents_write_styles_k4",
               "Different latent values learn to specialize for different translation styles consistently across "
               "examples, such as past tense vs. present tense, this vs. that, and per cent vs. %.",
               "§5.5, Table 4", "matched accuracy of Hard-MoE's test hypotheses at K = S = 4: each hypothesis credited "
               "with the style of its best-matching reference, each latent value matched one-to-one to a different "
               "style (Hungarian), the share of hypotheses in their value's style",
               "matched_accuracy_k4", ">", 1 / S,
               "the statement's own contrast: latent values that do not specialise in different styles score 1/S = "
               "0.25 (one style for all, or styles at random); the paper gives no size",
               (converged("hard_moe_k4"), uses_latents(4))),
    *_at(KS[1]),
    PaperClaim("more_hypotheses_more_diverse", "In general, when more hypotheses are generated (e.g., K = 20), they "
               "become more diverse but of worse quality.", "§5.3, Fig. 2 left, Table 5",
               "Hard-MoE's pairwise BLEU at K = S = 4 minus at K = 2S = 8 (two models), the test sources",
               "moe_pairwise_k4_minus_k8", ">", 0.0, "direction only (Table 5, Hard-MoE: 54.2 / 50.2 / 47.1 at K = 5 / 10 / 20)",
               (converged("hard_moe_k4", "hard_moe_k8"), uses_latents(4), uses_latents(8))),
    PaperClaim("more_hypotheses_worse_quality", "In general, when more hypotheses are generated (e.g., K = 20), they "
               "become more diverse but of worse quality.", "§5.3, Fig. 2 left, Table 5",
               "Hard-MoE's average oracle BLEU at K = 4 minus at K = 8, the test sources",
               "moe_quality_k4_minus_k8", ">", 0.0, "direction only (Table 5, Hard-MoE: 52.0 / 51.0 / 49.7 at K = 5 / 10 / 20)",
               (converged("hard_moe_k4", "hard_moe_k8"), uses_latents(4), uses_latents(8))),
)

SANITY = (
    Sanity("coverage_and_distinct_bounded", "no system covers more than min(K, S) references or writes more than K "
           "distinct hypotheses per source (the metrics' definitions)", "bounded"),
    Sanity("beam_writes_k_distinct", "beam search's K best are K different strings (an n-best list has no repeats)",
           "beam_distinct"),
    Sanity("fig1_orderings", "Fig. 1's scenarios built from the toy's test references fall in the order their "
           "construction fixes: pairwise BLEU A < C < B, average oracle BLEU A below B and C, coverage B < C < A "
           "(notebook 00; B against C in oracle BLEU is not fixed by construction: near-copies of one reference "
           "against K - 1 references and one unrelated sentence)", "fig1_ordered"),
    Sanity("fig1_d_is_the_references", "Fig. 1 D (the references themselves): pairwise BLEU equal to the human one, "
           "average oracle BLEU 100, coverage S", "fig1_d_identities"),
)
