"""Solutions of notebook 09's exercises (nbs.exercises.solution("09_exact_search", N) prints one)."""

# %% exercise 1
ON = PROVEN or list(range(len(EXACT)))            # the proven sentences (every exact-search sentence if none is)
src_of = lambda g, i: torch.tensor([tasks[g].src_vocab.encode(test.src[EXACT[i]])], device=device)   # one source row
gap = {}
for g in gs:
    for n in MODELS:
        answer = raw[g][n]["exact"]["scores"]
        empty = [nbs.decode.token_scores(models[g, n], src_of(g, i), [[EOS]])[0][0] for i in ON]
        gap[g, n] = float(np.mean([answer[i] - e for i, e in zip(ON, empty)]))

# %% exercise 2
_, _, proven_without_bound, calls_without_bound = exact_dfs(nbs.search.ModelScorer(dfs_model, dfs_src), dfs_max_len,
                                                            (None, -np.inf), DFS_CALLS)
