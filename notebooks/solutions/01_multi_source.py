"""Solutions of notebook 01's exercises (nbs.exercises.solution("01_multi_source", N) prints one)."""

# %% exercise 1
fr_merged = [n for n in NOUNS if len(senses(["fr"], n)) > 1]
decided = [n for n in fr_merged if len(senses(["fr", "close"], n)) == 1]

# %% exercise 2
outside = {D: int((weights(D)[1] == 0).sum()) for D in (2, 10)}

# %% exercise 3
de_original = test.sources[code["de"]][ex]
other_de = words[code["de"]][NOUNS.index(other)]           # the German word for the other sense
subject_de = words[code["de"]][meaning.subj]                # the German word of the reference's subject
de_edited = " ".join(other_de if w == subject_de else w for w in de_original.split())
