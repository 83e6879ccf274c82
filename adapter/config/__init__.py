"""What the user asked for, validated before anything runs.

Owns: `Settings` (the trainer options, from Miles' args or the CLI), the fail-fast rules over
them (`rules`), and EnvConfig TOML loading (`env_config`).
May import: `adapter.errors` only.
"""
