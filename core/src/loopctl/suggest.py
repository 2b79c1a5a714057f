""" "Did you mean …?" for a name the user typed that loopctl does not know."""

from __future__ import annotations

from collections.abc import Iterable


def close_match(word: str, known: Iterable[str]) -> str | None:
    """The known name ``word`` most likely misspells (by :func:`difflib.get_close_matches`), or
    None: when nothing is close, and always when ``word`` is itself known (an exact name is not
    a typo)."""
    names = [name for name in known if isinstance(name, str)]
    if not isinstance(word, str) or word in names:
        return None
    import difflib

    found = difflib.get_close_matches(word, names, n=1)
    if not found:  # a typo in letter case: "Goal-Guard"
        folded = {name.casefold(): name for name in names}
        found = [folded[word.casefold()]] if word.casefold() in folded else []
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'NAME'?)`` for :func:`close_match`, or an empty string."""
    match = close_match(word, known)
    return f" (did you mean {match!r}?)" if match is not None else ""
