"""Solutions of notebook 00's exercises (nbs.exercises.solution("00_data_and_metrics", N) prints one)."""

# %% exercise 1
copies = [refs1[0]] * 4
copies_scores = {"pairwise_bleu": pairwise([copies]), "avg_oracle_bleu": avg_oracle([copies], [refs1]),
                 "ref_coverage": coverage([copies], [refs1])}

# %% exercise 2
subtle = nbs.data.toy(n_train=0, n_dev=0, n_test=cfg.toy_test, style_strength="subtle", seed=SEED).test.refs
same_mark_pbleu = pairwise([[r.rstrip(".!;") + "." for r in rs] for rs in subtle])

# %% exercise 3
pairs = []
for hyps, rs in zip(sets["D"], refs):
    for h in hyps:
        rest = list(rs)
        rest.remove(h)                                   # leave this hypothesis's own copy out
        pairs.append((h, max(rest, key=lambda r: sentence_bleu(h, r))))
d_loo = corpus_bleu([h for h, _ in pairs], [r for _, r in pairs])
