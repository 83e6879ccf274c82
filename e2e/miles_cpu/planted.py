"""The miles lane's planted defect: the adapter's rollout class with every train batch's first
sample given a loss mask one token short. Real Miles must refuse it in its own conversion
(`_convert_samples_to_train_data`: "loss mask length ... != response length"); the lane fails if
that case passes (e2e.miles_cpu.lane). Never part of the package: a test fixture for Miles' judge.
"""

from __future__ import annotations

from typing import Any

from adapter.miles import VerifiersRolloutFn


class LossMaskShortRolloutFn(VerifiersRolloutFn):
    async def __call__(self, rollout_input: Any) -> Any:
        output = await super().__call__(rollout_input)
        if not rollout_input.evaluation:
            first = output.samples[0][0]
            first = first[0] if isinstance(first, list) else first
            first.loss_mask = first.loss_mask[:-1]
        return output
