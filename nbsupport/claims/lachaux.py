"""Lachaux, Joulin & Lample (2020), target conditioning: the claims the reproduction tests.

The reproduction trains, for every model seed, on the toy task of notebooks 02 and 05 (four hidden
styles, low ambiguity, K = 4 domains): a baseline (for beam search and sampling),
Hard-MoE (the paper's MoE baseline, hMup), the target-conditioned model at the paper's lambda = 1 (on
the paper's summed scale, section 3.3), and the three ablations of section 4.7 (lambda = 0, lambda
too high, the source as the target encoder's input), each to the convergence rule of
:mod:`nbsupport.claims`. It tests Table 1's order (diversity against quality, greedy decoding, mBLEU
and pairwise BLEU of section 4.1), Fig. 5 (a beam per domain), the ablations, and Fig. 3's training
speed against K (timed side by side on a CPU, where a step's time is its arithmetic; the forward
passes each step makes are counted as a construction check). Where the toy differs: one synthetic
task whose diversity is four known styles instead of WMT with 10 references; models of 0.7M
parameters; the same lambda weighs more per token here than in the paper (batches of ~1k tokens
against 55k, lesson 05 section 1). The paper gives no number for "constant" or "drastically" (Fig. 3),
so those two thresholds are this table's, fixed before the run and said so in ``threshold_from``;
"close to 100" takes the paper's own 97.2 for a decoder that ignores its domain. A claim about the
target-conditioned model's hypotheses assumes a model that did not collapse (the paper's lambda is
there to prevent it): it is not decided on a seed where the lambda = 1 model collapsed.
"""
from . import PaperClaim, Sanity, compute_bound, converged, fact, within

TITLE = "Lachaux, Joulin & Lample (2020), Target Conditioning for One-to-Many Generation (Findings of EMNLP 2020)"

K = 4                  # domains (and Hard-MoE's latent values), the toy's number of styles
K_SPEED = (3, 50)      # Fig. 3's smallest K and a large one (the paper goes to 200)
LAMBDA = 1.0           # the paper's lambda, on its summed scale (section 4.7: "lambda = 0.1 or lambda = 1")
LAMBDA_HIGH = 50_000.0  # "too high": about 50 per token of the toy's ~1k-token batches
IGNORED_PAIRWISE = 97.2  # section 4.7: the paper's pairwise BLEU of a model whose decoder ignores the domain
UNIFORM_SHARE = 0.5    # "uniformly maps ... to all available domains": every domain above half of 1/K

_T1 = ("\u00a74.5, Table 1 (En-De 46.2 against MoE 48.8, En-Fr 57.3 against 64.4; reversed on Zh-En at K = 3, "
       "52.5 against 47.5)")
_QUALITY = ("In Table 1, we observe that for En-De and En-Fr, our model obtains a lower mBLEU score than beam search "
            "decoding and the Mixture of Experts, but provides more diversity, with a pairwise score of 57.3 instead "
            "of 64.4 in En-Fr.")
_TEST = "greedy per domain / method, K = 4 hypotheses per source, the test sources (all 4 references each)"

_CONV_MAIN = converged("hard_moe", "target_encoder")
# the premise of every claim about the target-conditioned model's hypotheses: it did not collapse (section 4.7's
# definition: all training targets in one domain), as the paper's lambda is there to ensure
_WORKS = fact("target encoder not collapsed", f"the target encoder at lambda = {LAMBDA:g} did not collapse (section 4.7: "
                                              "more than one domain above 1% of the training targets)")

CLAIMS = (
    PaperClaim(
        "more diverse than Hard-MoE",
        "Overall, our method provides more diversity than the MoE method, i.e. it obtains a lower pairwise score, "
        "but to the detriment of a lower mBLEU score.",
        _T1, f"Hard-MoE minus target encoder, pairwise BLEU; {_TEST}", "moe_minus_te_pairwise", ">", 0.0,
        "direction only", (_CONV_MAIN, _WORKS)),
    PaperClaim(
        "lower mBLEU than Hard-MoE",
        "Overall, our method provides more diversity than the MoE method, i.e. it obtains a lower pairwise score, "
        "but to the detriment of a lower mBLEU score.",
        "\u00a74.5, Table 1 (En-De 55.4 against MoE 59.8, En-Fr 65.9 against 72.6)",
        f"Hard-MoE minus target encoder, mBLEU; {_TEST}", "moe_minus_te_mbleu", ">", 0.0, "direction only",
        (_CONV_MAIN, _WORKS)),
    PaperClaim(
        "more diverse than beam search",
        "Beam search and diverse beam search hypotheses are accurate, but lack diversity, resulting in a very "
        "similar set of hypotheses.",
        "\u00a74.5, Table 1 (beam 74.0 / 77.7 / 83.8 against 46.2 / 57.3 / 52.5)",
        f"beam search (the {K} best of a beam of {K}) minus target encoder, pairwise BLEU; {_TEST}",
        "beam_minus_te_pairwise", ">", 0.0, "direction only", (_WORKS, converged("baseline", "target_encoder"),)),
    PaperClaim(
        "lower mBLEU than beam search", _QUALITY, "\u00a74.5, Table 1 (beam 66.3 / 79.3 against 55.4 / 65.9)",
        f"beam search minus target encoder, mBLEU; {_TEST}", "beam_minus_te_mbleu", ">", 0.0, "direction only",
        (_WORKS, converged("baseline", "target_encoder"))),
    PaperClaim(
        "sampling more diverse",
        "On the other hand, the sampling baseline generates very diverse but inaccurate hypotheses, with a pairwise "
        "score of 11.8, but a mBLEU of 28.2.",
        "\u00a74.5, Table 1 (sampling pairwise 11.8 / 21.0 / 12.0 against 46.2 / 57.3 / 52.5)",
        f"target encoder minus sampling ({K} samples from the baseline), pairwise BLEU; {_TEST}",
        "te_minus_sampling_pairwise", ">", 0.0, "direction only", (_WORKS, converged("baseline", "target_encoder"),)),
    PaperClaim(
        "sampling less accurate",
        "On the other hand, the sampling baseline generates very diverse but inaccurate hypotheses, with a pairwise "
        "score of 11.8, but a mBLEU of 28.2.",
        "\u00a74.5, Table 1 (sampling mBLEU 28.2 / 43.6 / 19.1 against 55.4 / 65.9 / 34.7)",
        f"target encoder minus sampling, mBLEU; {_TEST}", "te_minus_sampling_mbleu", ">", 0.0, "direction only",
        (_WORKS, converged("baseline", "target_encoder"),)),
    PaperClaim(
        "beam per domain raises mBLEU",
        "Beam search increases both the mBLEU and the pairwise scores, i.e., it provides higher quality "
        "translations, but with lower diversity.",
        "\u00a74.7, Fig. 5 (En-Fr, K = 10, beams 3, 5, 10)",
        "target encoder, each domain's 1-best of a beam of 10 minus its greedy output, mBLEU; the test sources",
        "beam10_minus_greedy_mbleu", ">", 0.0, "direction only", (_WORKS, converged("target_encoder"),)),
    PaperClaim(
        "beam per domain lowers diversity",
        "Beam search increases both the mBLEU and the pairwise scores, i.e., it provides higher quality "
        "translations, but with lower diversity.",
        "\u00a74.7, Fig. 5 (En-Fr, K = 10, beams 3, 5, 10)",
        "target encoder, beam 10 per domain minus greedy per domain, pairwise BLEU; the test sources",
        "beam10_minus_greedy_pairwise", ">", 0.0, "direction only",
        (_WORKS, converged("target_encoder"),
         within("te_pairwise", 0.0, 100.0, "greedy per domain below the ceiling: the domains' outputs not all "
                                            "identical already (pairwise BLEU < 100), so it can rise"))),
    PaperClaim(
        "lambda = 1 prevents the collapse",
        "In practice, we found that setting \u03bb=0.1 or \u03bb=1 leads to similar results, and is enough to "
        "prevent the collapse scenario.",
        "\u00a74.7 (collapse: \"at training time all target sentences are mapped to the same domain\")",
        f"target encoder at lambda = {LAMBDA:g} (the paper's summed scale): domains taking more than 1% of the "
        "training targets in the last epoch", "lambda1_domains_used", ">", 1.5,
        "the paper's definition of collapse: all targets in one domain (1 domain used); not collapsed is 2 or more",
        (converged("target_encoder"),)),
    PaperClaim(
        "lambda = 0 collapse gives a poor mBLEU",
        "This means that only one of the K generated hypotheses will be valid, leading to a very poor mBLEU.",
        "\u00a74.7 (\"Without any regularization on the domain probabilities, i.e. when \u03bb=0, we sometimes "
        "encounter the \u201ccollapse\u201d scenario\")",
        f"target encoder at lambda = {LAMBDA:g} minus lambda = 0, mBLEU; {_TEST}", "te_minus_lambda0_mbleu", ">", 0.0,
        "direction only (the paper gives no mBLEU for the collapse)",
        (_WORKS, converged("target_encoder", "lambda0"),
         fact("lambda0 collapsed", "the premise: the lambda = 0 model collapsed as the paper defines it (every "
                                   "training target in one domain: one domain above 1% in the last epoch)"))),
    PaperClaim(
        "lambda too high: domains ignored",
        "This way, the decoder learns to ignore the domain, and will always output the same translation, "
        "independently of the input domain, which results in a pairwise score close to 100 (i.e. there is no "
        "diversity).",
        "\u00a74.7 (domain regularization)",
        f"target encoder at lambda = {LAMBDA_HIGH:,.0f} (summed scale): pairwise BLEU of its {K} greedy outputs; the "
        "test sources", "lambda_high_pairwise", ">", IGNORED_PAIRWISE,
        "\"close to 100\": the paper's only measured pairwise BLEU of a decoder that ignores its domain, 97.2 "
        "(\u00a74.7, source as input, En-De, 10 domains)",
        (converged("lambda_high"),
         fact("lambda high uniform", f"the premise \"the target encoder uniformly maps target sentences to all "
                                     f"available domains\": every domain takes more than {UNIFORM_SHARE:g} of its "
                                     "uniform share 1/K of the training targets in the last epoch"))),
    PaperClaim(
        "source as input: domains ignored",
        "[pairwise BLEU 97.197 with 10 domains on En-De,] which means that the model was not able to learn anything "
        "specific about each domain, and the decoder simply ignores the domain information.",
        "\u00a74.7 (source versus target encoding)",
        f"the target encoder reading the source (lambda = {LAMBDA:g}): pairwise BLEU of its {K} greedy outputs; "
        "the test sources", "source_input_pairwise", ">", IGNORED_PAIRWISE,
        "the paper's pairwise BLEU of this ablation, 97.2 (\u00a74.7, En-De, 10 domains): \"simply ignores\"",
        (converged("source_input"),)),
    PaperClaim(
        "diversity comes from the target",
        "This validates that learning the diversity form the target domains is important.",
        "\u00a74.7 (source versus target encoding: pairwise 97.2 against 46.2 for the model reading the target)",
        f"source-input model minus target encoder, pairwise BLEU; {_TEST}", "source_minus_te_pairwise", ">", 0.0,
        "direction only", (_WORKS, converged("source_input", "target_encoder"),)),
    PaperClaim(
        "training speed flat in K",
        "The training speed of our method is independent of the number of domains.",
        "\u00a74.6, Fig. 3 (K = 3 to 200)",
        f"target encoder's training tokens/s at the profile's largest K ({K_SPEED[1]} at lab) over K = {K_SPEED[0]}: "
        "fresh models, the same batches, taking turns round after round (10 rounds); geometric mean of the "
        "per-round ratios, t interval over the rounds",
        "te_speed_ratio", ">", 0.9,
        "the paper gives no number (\"constant\", Fig. 3's caption); fixed before the run: within 10% of K = 3's",
        (compute_bound(),)),
    PaperClaim(
        "Hard-MoE's training speed falls with K",
        "In contrast, the training speed of the MoE model of Shen et al. (2019) decreases drastically when the "
        "number of domains increases.",
        "\u00a74.6, Fig. 3 (\"the MoE model requires to perform K forward passes to determine the best domain\")",
        f"Hard-MoE's training tokens/s at the profile's largest K ({K_SPEED[1]} at lab) over K = {K_SPEED[0]}, "
        "timed as above",
        "moe_speed_ratio", "<", 0.5,
        "the paper gives no number (\"drastically\"); fixed before the run: below half of K = 3's",
        (compute_bound(),)),
)

SANITY = (
    Sanity("forward passes per step",
           f"counted in one training step at the profile's smallest and largest K ({K_SPEED[0]} and {K_SPEED[1]} at "
           "lab): Hard-MoE runs its decoder over the "
           "batch K + 1 times (K scoring passes in the E-step, one trained), the target-conditioned model once, "
           "plus one target-encoder pass, whatever K (the paper's reason for Fig. 3)", "passes_as_built"),
    Sanity("greedy per domain is the table's",
           "decoding each one-hot domain alone with greedy search writes the table's target-encoder hypotheses "
           "(at least 98% identical; the batched decoder pads differently)", "greedy_per_domain_same"),
)
