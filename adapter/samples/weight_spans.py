"""Weight versions per model turn, at absolute token offsets: the shape of Miles' `Sample.weight_versions`
from Miles #1891 on (`list[WeightVersionsPerCall]`, each a list of `WeightVersionSpan(version,
abs_start, abs_end)`), built from what the engine reported per call (`adapter.bridge.stats.TurnVersions`).

Pure: consumes a branch's `sampled_mask` (its model turns are the runs of sampled tokens) and the
session's calls in order; emits one list of `(version, abs_start, abs_end)` per model turn. A turn
takes the next unused call whose output starts where the turn starts (the prompt it was sampled
from is everything before it), its spans anchored there and clipped to the turn, as Miles'
`WeightVersionsPerCall.from_meta_info` anchors them at `output_end - len(output)`. A turn no call
matches (an engine that reports no version, or a call the bridge did not see) gets no spans: an
empty `WeightVersionsPerCall`, as Miles builds for such an answer. Spans come out ordered and
inside the tokens, which Miles' `Sample.validate()` asserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from adapter.bridge.stats import TurnVersions

Span = tuple[str, int, int]


def model_turns(mask: Sequence[bool]) -> list[tuple[int, int]]:
    """The runs of sampled tokens, as [start, end) offsets into the branch's tokens."""
    turns, position = [], 0
    for sampled, run in groupby(mask):
        length = sum(1 for _ in run)
        if sampled:
            turns.append((position, position + length))
        position += length
    return turns


def turn_spans(mask: Sequence[bool], calls: Sequence[TurnVersions]) -> list[list[Span]]:
    """One span list per model turn of the branch whose sampled mask is `mask`."""
    out: list[list[Span]] = []
    cursor = 0
    for start, end in model_turns(mask):
        match = next((i for i in range(cursor, len(calls)) if calls[i].output_start == start), None)
        if match is None:
            out.append([])
            continue
        cursor = match + 1
        out.append([(version, start + rel_start, min(start + rel_end, end))
                    for version, rel_start, rel_end in calls[match].spans if start + rel_start < end])
    return out
