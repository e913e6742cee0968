"""Token <-> id mappings with one interface: a closed word vocabulary for the toy task and
sentencepiece models (trained on training text only, cached) for the Bible.

Both reserve the same special ids: pad 0, bos 1, eos 2, unk 3.
"""
from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from ..cache import cached_file

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
_TOKEN = re.compile(r"\.\.\.|\w+|[^\w\s]")
_NO_SPACE_BEFORE = {",", ".", "!", ";", ":", "?", "..."}


def content_ids(ids: Iterable[int]) -> list[int]:
    """The ids up to the first EOS, without PAD and BOS."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i not in (PAD, BOS):
            out.append(i)
    return out


class WordVocab:
    """Words and punctuation marks as tokens (the toy task has a closed vocabulary)."""
    pad, bos, eos, unk = PAD, BOS, EOS, UNK

    def __init__(self, tokens: Sequence[str]):
        self.itos = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: Iterable[str], min_count: int = 1) -> "WordVocab":
        counts = Counter(tok for t in texts for tok in cls.tokenize(t))
        return cls(sorted(t for t, c in counts.items() if c >= min_count))

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return _TOKEN.findall(text)

    def __len__(self) -> int:
        return len(self.itos)

    def unknown_words(self, text: str) -> list[str]:
        """The tokens of ``text`` this vocabulary does not know (each would encode as <unk>)."""
        return [t for t in self.tokenize(text) if t not in self.stoi]

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        ids = [self.stoi.get(t, UNK) for t in self.tokenize(text)]
        return ids + [EOS] if add_eos else ids

    def decode(self, ids: Iterable[int]) -> str:
        out = []
        for i in content_ids(ids):
            tok = self.itos[i] if 0 <= i < len(self.itos) else SPECIALS[UNK]
            if out and tok in _NO_SPACE_BEFORE:
                out[-1] += tok
            else:
                out.append(tok)
        return " ".join(out)


class SpmVocab:
    """A trained sentencepiece model behind the same interface as :class:`WordVocab`."""
    pad, bos, eos, unk = PAD, BOS, EOS, UNK

    def __init__(self, model_path: Path):
        import sentencepiece as spm
        self.path = Path(model_path)
        self.sp = spm.SentencePieceProcessor(model_file=str(model_path))

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` with a character the model never saw in training (encoded as <unk>)."""
        return [w for w in text.split() if UNK in self.sp.encode(w)]

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        ids = self.sp.encode(text)
        return ids + [EOS] if add_eos else ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode(content_ids(ids))


def train_sentencepiece(texts: Sequence[str], vocab_size: int, model_type: str = "unigram",
                        name: str = "spm", character_coverage: float = 1.0) -> SpmVocab:
    """Train (or load from the cache) a sentencepiece model on ``texts``.

    The cache key holds the texts themselves (hashed), so a model is shared by every
    notebook that trains on the same text and is rebuilt when the text changes.
    Pass training text only: dev and test text must never shape the vocabulary.
    """
    import hashlib

    import sentencepiece as spm
    valid = ("unigram", "bpe", "char", "word")
    if model_type not in valid:
        raise ValueError(f"unknown sentencepiece model_type {model_type!r}; valid: {', '.join(valid)}")
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    key = {"texts": digest, "n": len(texts), "vocab_size": vocab_size, "model_type": model_type,
           "character_coverage": character_coverage}

    def build(tmp: Path) -> None:
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            pad_id=PAD, bos_id=BOS, eos_id=EOS, unk_id=UNK, hard_vocab_limit=False,
            input_sentence_size=200_000, shuffle_input_sentence=True, num_threads=2,
            minloglevel=2)
        tmp.write_bytes(model.getvalue())

    return cached_file(name, key, build, SpmVocab, suffix=".model")
