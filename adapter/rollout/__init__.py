"""Episodes to samples: run a Verifiers environment's groups and turn traces into Miles samples.

Owns: the job's composition root (`job`), the version gate and one shim per Verifiers API
generation (`versions`, `generations/`), orchestration of train batches and eval
(`orchestrator`), trace → samples (`samples`, `sample_type`), reward/filter hooks (`hooks`),
metrics, renderer identity, the tokenizer imports a renderer pool needs first (`tokenizer_imports`), the
harness program's uv environment (`harness_uv`), and the bundled
tasksets (`bundled/`).
May import: everything above it: `errors`, `config`, `wire`, `engine`, `bridge`.
"""
