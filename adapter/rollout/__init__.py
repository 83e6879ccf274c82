"""The run loop: train batches and eval through the installed Verifiers generation.

Owns: a job's composition root (`job`: checks, tokenizer, taskset, then the orchestrator), train
batches and eval (`orchestrator`), the one owner of what a rollout function opens and its state
diagram (`lifetime`: engine sessions, the env's serving, bridges; closed once, the one `atexit`),
the task that holds those contexts across calls (`held`), where a run is in its taskset and what a
resumed run needs (`run_state`), and the trainer's reward/filter hooks (`hooks`).
May import: everything to its left: `errors`, `config`, `wire`, `engine`, `bridge`, `versions`,
`samples`, `episodes`.
"""
