"""Character-level tokenizer with a fixed vocabulary.

Every micro task uses this one vocabulary, so any checkpoint saved with
`microlm.checkpoint.save` can be read by any micro grader.

Token ids:
    0 PAD   padding (never predicted; ignored by the loss helpers)
    1 BOS   start of every sequence; `generate` and `data` add it for you
    2 EOS   end of a completion; generation stops when the model emits it
    3 UNK   stands for a character outside the vocabulary
    4       newline "\\n"
    5..99   printable ASCII, " " (32) to "~" (126)
"""

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIAL_TOKENS = {"<pad>": PAD, "<bos>": BOS, "<eos>": EOS, "<unk>": UNK}

CHARS = "\n" + "".join(chr(c) for c in range(32, 127))
VOCAB_SIZE = len(SPECIAL_TOKENS) + len(CHARS)  # 100

_CHAR_TO_ID = {ch: i + len(SPECIAL_TOKENS) for i, ch in enumerate(CHARS)}
_ID_TO_CHAR = {i: ch for ch, i in _CHAR_TO_ID.items()}
_ID_TO_CHAR[UNK] = "\ufffd"  # the Unicode replacement character


def encode(text, unknown="error"):
    """Turn text into a list of token ids (no BOS/EOS added).

    unknown: what to do with a character outside the vocabulary (tabs,
    non-ASCII letters, ...): "error" raises ValueError naming it, "replace"
    maps it to UNK.
    """
    if unknown not in ("error", "replace"):
        raise ValueError(f'unknown must be "error" or "replace", not {unknown!r}')
    ids = []
    for pos, ch in enumerate(text):
        tok = _CHAR_TO_ID.get(ch)
        if tok is None:
            if unknown == "error":
                raise ValueError(
                    f"character {ch!r} at position {pos} is not in the vocabulary "
                    f"(newline and printable ASCII only); pass unknown='replace' to map it to UNK"
                )
            tok = UNK
        ids.append(tok)
    return ids


def decode(ids):
    """Turn token ids back into text. PAD, BOS and EOS are dropped; UNK becomes U+FFFD."""
    return "".join(_ID_TO_CHAR.get(int(i), "") for i in ids)
