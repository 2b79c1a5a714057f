"""What an agent turn cost, estimated from its token counts, for CLIs that report no cost.

Claude Code and aider say what a turn cost; Codex, Gemini CLI and most commands only count
tokens. For those, loopctl prices each model request with, in this order:

1. the config's ``[prices.MODEL]`` table (US dollars per million tokens: ``input``, ``output``,
   and optionally ``cache_read`` and ``cache_write``, which default to ``input``), matched like
   the context-window table: exact name, then without a provider path (``openai/gpt-4o``), then
   the longest name the model's name starts with;
2. the ``genai-prices`` package (Pydantic's maintained price table for the major providers,
   installed by the ``loopctl-core[prices]`` extra; Python 3.11 or later), imported on the first
   turn that needs it.

The result is an estimate and is marked so (``TurnResult.cost_estimated``): tiered prices
(long-context surcharges, batch and priority tiers) and tokens the CLI does not report (its
helper calls on other models) may make the real bill differ. A turn whose model is unknown, or
has no price in either table, stays without a cost and :func:`estimate_cost` says why.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import attrs

from loopctl.model import Usage

#: What to install for the price table.
PRICES_EXTRA = "loopctl-core[prices]"
_MTOK = 1_000_000


@attrs.frozen
class CostEstimate:
    """A turn's estimated cost, or why there is none."""

    #: US dollars; None when the turn could not be priced.
    cost_usd: float | None
    #: Where the prices came from (``[prices] gpt-5``, ``genai-prices 0.2.3: openai gpt-5``), or
    #: why there are none (meant for a person).
    source: str


def estimate_cost(
    model: str | None,
    requests: Sequence[Usage],
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> CostEstimate:
    """The cost of ``requests`` (one :class:`~loopctl.model.Usage` per model request, cached
    tokens not counted in ``input_tokens``) on ``model``, priced by the config's ``prices`` table
    first, then by ``genai-prices``. Never raises."""
    if not requests:
        return CostEstimate(0.0, "no model requests")
    if not model or not model.strip():
        return CostEstimate(None, "the model is unknown (name one with --model)")
    table = configured_price(model, prices or {})
    if table is not None:
        name, price = table
        return CostEstimate(_priced(requests, price), f"[prices] {name}")
    return _genai_prices(model.strip(), requests)


def configured_price(
    model: str, prices: Mapping[str, Mapping[str, float]]
) -> tuple[str, Mapping[str, float]] | None:
    """The ``[prices]`` entry for ``model`` and its name: exact name first, then the name
    without a provider path, then the longest entry the name starts with (ignoring case)."""
    if not prices:
        return None
    by_name = {key.lower(): (key, value) for key, value in prices.items()}
    name = model.strip().lower()
    candidates = list(dict.fromkeys([name, name.rsplit("/", 1)[-1]]))
    for candidate in candidates:
        if candidate in by_name:
            return by_name[candidate]
    for candidate in candidates:
        prefixes = [key for key in by_name if key and candidate.startswith(key)]
        if prefixes:
            return by_name[max(prefixes, key=len)]
    return None


def _priced(requests: Sequence[Usage], price: Mapping[str, float]) -> float:
    per_input = float(price.get("input", 0.0))
    per_output = float(price.get("output", 0.0))
    per_read = float(price.get("cache_read", per_input))
    per_write = float(price.get("cache_write", per_input))
    total = 0.0
    for usage in requests:
        total += (
            usage.input_tokens * per_input
            + usage.output_tokens * per_output
            + usage.cache_read_input_tokens * per_read
            + usage.cache_creation_input_tokens * per_write
        )
    return total / _MTOK


def _genai_prices(model: str, requests: Sequence[Usage]) -> CostEstimate:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            genai_prices = importlib.import_module("genai_prices")  # optional: loopctl-core[prices]
    except Exception:  # noqa: BLE001 - absent, or broken: the cost stays unknown
        return CostEstimate(
            None,
            f"no price for {model!r}: install {PRICES_EXTRA!r} (the genai-prices table) or "
            f'set [prices."{model}"] input and output (US dollars per million tokens)',
        )
    version = getattr(genai_prices, "__version__", "")
    names = list(dict.fromkeys([model, model.rsplit("/", 1)[-1]]))
    for name in names:
        try:
            total, found = _genai_total(genai_prices, name, requests)
        except LookupError:
            continue
        except Exception as exc:  # noqa: BLE001 - a surprise inside the package: no estimate
            return CostEstimate(None, f"genai-prices failed for {model!r}: {exc}")
        return CostEstimate(total, f"genai-prices {version}: {found}".replace("  ", " "))
    return CostEstimate(
        None,
        f'genai-prices {version} has no price for {model!r}; set [prices."{model}"] input '
        "and output (US dollars per million tokens)",
    )


def _genai_total(module: Any, model: str, requests: Sequence[Usage]) -> tuple[float, str]:
    """The summed price of each request (one at a time: tiers depend on a request's size)."""
    total = Decimal(0)
    found = model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for usage in requests:
            cached = usage.cache_read_input_tokens
            written = usage.cache_creation_input_tokens
            calculation = module.calc_price(
                module.Usage(
                    input_tokens=usage.input_tokens + cached + written,  # theirs includes both
                    cache_read_tokens=cached,
                    cache_write_tokens=written,
                    output_tokens=usage.output_tokens,
                ),
                model_ref=model,
            )
            total += Decimal(calculation.total_price)
            found = f"{calculation.provider.id} {calculation.model.id}"
    value = float(total)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a price of {value}")
    return value, found
