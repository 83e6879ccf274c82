"""The Miles binding: the rollout-function ABIs Miles loads by path, and the launcher.

    --rollout-function-path adapter.miles.VerifiersRolloutFn     (class ABI, the default)
    --rollout-function-path adapter.miles.generate_rollout       (legacy function ABI)

Owns: those entry points (`binding`), Miles' rollout-function types or field-compatible stand-ins
(`abi`), the rollout function's own checkpoint beside Miles' (`checkpoint`), which Miles the
launcher targets (`flavor`), and the training command builder (`launcher`).
May import: everything but `adapter.cli`.
"""

from adapter.miles.binding import VerifiersRolloutFn, build_orchestrator, generate_rollout

__all__ = ["VerifiersRolloutFn", "build_orchestrator", "generate_rollout"]
