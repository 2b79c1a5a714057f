"""Context windows of models, by name."""

from __future__ import annotations

from collections.abc import Mapping

from loopctl.config.schema import LoopctlConfig

#: Context windows in tokens of well-known models. Names match exactly, then by longest prefix
#: (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``); any name ending ``[1m]`` has
#: 1,000,000. ``[models]`` in the config extends and overrides this table.
DEFAULT_MODEL_WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "opus": 200_000,
    "sonnet": 200_000,
    "haiku": 200_000,
    # OpenAI (Codex reports what is usable of gpt-5-codex's window: 272k)
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5-codex": 272_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "openai/gpt-4o": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Google
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-3": 1_048_576,
}

#: Suffix some CLIs add to a model name to ask for its million-token context window.
ONE_MILLION_SUFFIX = "[1m]"


def context_window_for(model: str | None, table: Mapping[str, int]) -> int | None:
    """The context window of ``model`` in tokens, or None when it is not known.

    ``table`` (usually ``config.models``) extends and overrides :data:`DEFAULT_MODEL_WINDOWS`.
    Exact name first, then the ``[1m]`` suffix rule, then the longest known name that ``model``
    starts with. Matching ignores case and a provider path (``openrouter/google/…``).
    """
    if not model or not model.strip():
        return None
    name = model.strip().lower()
    windows = {key.lower(): value for key, value in {**DEFAULT_MODEL_WINDOWS, **table}.items()}
    candidates = list(dict.fromkeys([name, name.rsplit("/", 1)[-1]]))
    for candidate in candidates:
        if candidate in windows:
            return windows[candidate]
    if name.endswith(ONE_MILLION_SUFFIX):
        return 1_000_000
    for candidate in candidates:
        prefixes = [key for key in windows if key and candidate.startswith(key)]
        if prefixes:
            return windows[max(prefixes, key=len)]
    return None


def model_windows(config: LoopctlConfig) -> dict[str, int]:
    """The built-in context-window table with the config's ``[models]`` applied."""
    return {**DEFAULT_MODEL_WINDOWS, **config.models}
