"""Solutions of notebook 07's exercises (nbs.exercises.solution("07_ibm3_synthetic_ambiguity", N) prints one)."""

# %% exercise 1
EOS = nbs.data.vocab.EOS                          # the end-of-sentence token id
ON = PROVEN or list(range(len(EXACT)))            # the proven sentences (every exact-search sentence if none is)
src_of = lambda g, i: torch.tensor([tasks[g].src_vocab.encode(test.src[EXACT[i]])], device=device)   # one source row
gap = {}
for g in gs:
    for n in MODELS:
        answer = raw[g][n]["exact"]["scores"]
        empty = [nbs.decode.token_scores(models[g, n], src_of(g, i), [[EOS]])[0][0] for i in ON]
        gap[g, n] = float(np.mean([answer[i] - e for i, e in zip(ON, empty)]))

# %% exercise 2
spread = {}
for g in gs:
    refs = tasks[g].corpus.test.refs[0]
    pairs = [(i, j) for i in range(len(refs)) for j in range(len(refs)) if i != j]
    spread[g] = nbs.metrics.corpus_bleu([refs[i] for i, j in pairs], [refs[j] for i, j in pairs])
