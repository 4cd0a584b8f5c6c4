"""Model names as people and forgers write them: one normal form for catalog lookups, and the
confusable near-misses of a catalog name that must not pass for another model.

A report names its policy, reward model and judges; the validator ties a catalog name to the
catalog's spec (PHYS-007). Compared as exact strings, `Qwen2.5-7B-Instruct` followed by a
zero-width space, `Qwen/Qwen2.5-7B-Instruct/` (a trailing slash) or `Qwеn2.5-7B-Instruct` (a
Cyrillic е) is "not a catalog name", so a smaller model's spec rides under it. `normal_name`
folds what is the same name (NFKC, format characters, case, hub prefixes, revisions, trailing
slashes); `skeleton` folds what only looks the same (Cyrillic and Greek letters, digit/letter
lookalikes, separators), so a name whose skeleton is a catalog name's but whose normal form is
not is a lookalike, refused wherever a model is named (PHYS-011).

Used by suite.validate (PHYS-007, PHYS-011) and meant for the one catalog lookup
(suite.accounting.modelspec / traced): call `normal_name` before comparing.
"""

from __future__ import annotations

import re
import unicodedata

_HUB = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/", re.IGNORECASE)
_REVISION = re.compile(r"/(?:tree|blob|resolve|commit)/[^/]*(?:/.*)?$")

# Letters of other scripts that render like Latin ones (Unicode's confusables.txt, the ones a
# model name can hide), and digits/letters that read alike in a name.
_CONFUSABLE = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l",
    "з": "3", "б": "6",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "γ": "y", "ζ": "z", "μ": "u",
    # look-alike digits and letters (after casefolding)
    "0": "o", "1": "l", "i": "l", "|": "l", "5": "s", "8": "b",
    # separators: a dash, an underscore, a space or none read the same
    "-": None, "_": None, " ": None, "‐": None, "‑": None, "‒": None, "–": None, "—": None, "−": None,
})


def _strip_format(s: str) -> str:
    """Without format characters (zero-width spaces and joiners, bidi marks: category Cf),
    control characters and surrounding whitespace."""
    return "".join(ch for ch in s if unicodedata.category(ch) not in ("Cf", "Cc")).strip()


def hub_id(name: str) -> str:
    """`name` as a hub id without a host, a revision or trailing slashes
    (https://huggingface.co/Qwen/Qwen2.5-7B/tree/main -> Qwen/Qwen2.5-7B; org/model@rev ->
    org/model)."""
    s = _strip_format(unicodedata.normalize("NFKC", str(name)))
    s = _HUB.sub("", s).rstrip("/")
    s = _REVISION.sub("", s)
    if "@" in s:
        s = s.split("@", 1)[0]
    return s.rstrip("/").strip()


def normal_name(name: str) -> str:
    """The name a catalog lookup compares: NFKC, format characters stripped, the hub id's last
    part (no host, organisation, revision or trailing slash), casefolded."""
    return hub_id(name).split("/")[-1].strip().casefold()


def skeleton(name: str) -> str:
    """What `name` looks like: its normal form with confusable letters of other scripts mapped to
    Latin, digit/letter lookalikes (0/o, 1/l/i, 5/s, 8/b) and separators folded. Two names with
    one skeleton read the same to a person."""
    s = unicodedata.normalize("NFKD", normal_name(name))
    s = "".join(ch for ch in s if not unicodedata.combining(ch))    # accents: é reads as e
    return s.translate(_CONFUSABLE).translate(_CONFUSABLE)    # twice: Cyrillic і -> i -> l, as a Latin i


def canonical(name: str, names) -> str | None:
    """The one of `names` (catalog names) that `name` is, normalised; None when it is none."""
    key = normal_name(name)
    for n in names:
        if normal_name(n) == key:
            return n
    return None


def lookalike(name: str, names) -> str | None:
    """The one of `names` that `name` only looks like (the same skeleton, another normal form),
    or None: `Qwеn2.5-7B` (Cyrillic е) looks like Qwen2.5-7B; Qwen2.5-7B is it, not a lookalike."""
    if canonical(name, names) is not None:
        return None
    sk = skeleton(name)
    if not sk:
        return None
    for n in names:
        if skeleton(n) == sk:
            return n
    return None


def has_hidden_characters(name: str) -> bool:
    """True when `name` holds format or control characters, or differs from its NFKC form:
    text a reader does not see."""
    s = str(name)
    return s != unicodedata.normalize("NFKC", s) or any(unicodedata.category(ch) in ("Cf", "Cc") for ch in s)


__all__ = ["hub_id", "normal_name", "skeleton", "canonical", "lookalike", "has_hidden_characters"]
