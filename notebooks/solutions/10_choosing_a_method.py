"""Solutions of notebook 10's exercises (nbs.exercises.solution("10_choosing_a_method", N) prints one)."""

# %% exercise 1
human_pw = pairwise([source_refs])
human_mr = sum(nbs.metrics.corpus_bleu([source_refs[m]], [[r for j, r in enumerate(source_refs) if j != m]])
               for m in range(S)) / S

# %% exercise 2
MODEL = "vnmt"
sets = hyps[MODEL, K_EX]
repeated = sum(len(set(hs)) < K_EX for hs in sets) / len(sets)
