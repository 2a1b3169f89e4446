"""A context budget split among a request's segments: what of the text around the holes the model reads.

Pure functions, shared by the engine (at fill time) and training (which lays out its examples as
the engine will).
"""

from __future__ import annotations


def budget_split(lengths: list[int], budget: int, prefix_share: float) -> list[tuple[int, int]]:
    """How many tokens to keep of each segment, as (from_start, from_end) counts.

    The first segment (prefix) keeps its end, the last (suffix) its start, middle segments both
    ends. Middle segments get up to half the budget; the prefix gets ``prefix_share`` of the
    rest unless the suffix needs less.
    """
    if sum(lengths) <= budget:
        return [(0, n) if i == 0 else (n, 0) for i, n in enumerate(lengths)]
    middle = lengths[1:-1]
    mid_budget = min(sum(middle), budget // 2)
    keep_mid = [n if sum(middle) <= mid_budget else n * mid_budget // max(sum(middle), 1) for n in middle]
    rest = budget - sum(keep_mid)
    if len(lengths) == 1:
        return [(0, min(lengths[0], rest))]
    pre, suf = lengths[0], lengths[-1]
    keep_suf = min(suf, max(rest - pre, int(rest * (1 - prefix_share))))
    keep_pre = min(pre, rest - keep_suf)
    keep_suf = min(suf, rest - keep_pre)
    mids = [(k - k // 2, k // 2) for k in keep_mid]
    return [(0, keep_pre), *mids, (keep_suf, 0)]


def trim(tokens: list[int], keep: tuple[int, int]) -> list[int]:
    head, tail = keep
    if head + tail >= len(tokens):
        return tokens
    return tokens[:head] + (tokens[len(tokens) - tail :] if tail else [])
