"""The run loop: train batches and eval through the installed Verifiers generation.

Owns: a job's composition root (`job`: checks, tokenizer, taskset, then the orchestrator), train
batches and eval (`orchestrator`), what a resumed run needs (`run_state`), the async contexts a
rollout function holds across calls (`held`), and the trainer's reward/filter hooks (`hooks`).
May import: everything to its left: `errors`, `config`, `wire`, `engine`, `bridge`, `versions`,
`samples`, `episodes`.
"""
