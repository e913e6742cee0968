"""The three run profiles every notebook accepts.

* ``ci``   smoke run: 90 s or less per notebook on 2 CPU cores (what `make test` runs);
* ``lab``  the default: shows the phenomenon on a 2-core CPU in 10 minutes or less, on the
           synthetic toy tasks (a small Bible model reaches only BLEU 2-7 in 3-8 CPU minutes,
           so no lab lesson rests on the Bible);
* ``full`` the real corpus (the Bible) on one GPU in 15 minutes or less.
"""
from __future__ import annotations

from dataclasses import dataclass

PROFILE_NAMES = ("ci", "lab", "full")


@dataclass(frozen=True)
class Profile:
    name: str
    budget_s: int             # wall-clock budget of one notebook
    toy_train: int            # toy training pairs
    toy_test: int             # toy test (and dev) sources
    bible_test: int | None    # Bible test verses evaluated (None: all, about 500)
    spm_vocab: int            # sentencepiece vocabulary size per language
    spm_sentences: int | None  # training sentences used to train sentencepiece (None: all)
    uses_bible_training: bool  # does this profile train models on the Bible?

    def __str__(self) -> str:
        return f"profile {self.name!r} (budget {self.budget_s} s)"


PROFILES = {
    "ci": Profile("ci", 90, toy_train=2000, toy_test=50, bible_test=60, spm_vocab=2000,
                  spm_sentences=3000, uses_bible_training=False),
    "lab": Profile("lab", 600, toy_train=20000, toy_test=200, bible_test=None, spm_vocab=8000,
                   spm_sentences=None, uses_bible_training=False),
    "full": Profile("full", 900, toy_train=20000, toy_test=200, bible_test=None, spm_vocab=8000,
                    spm_sentences=None, uses_bible_training=True),
}


def profile(name: str) -> Profile:
    """The settings of a profile; an unknown name is an error naming the valid ones."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILE_NAMES)} "
                         "(set PROFILE in the notebook's parameters cell, or papermill -p PROFILE ...)")
    return PROFILES[name]
