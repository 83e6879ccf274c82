"""What the user asked for, validated before anything runs.

Owns: `Settings` (`settings`: the trainer options, from Miles' args or the CLI), the fail-fast rules over
them (`rules`), EnvConfig TOML loading (`env_config`), and the numeric bounds several
subpackages share (`limits`: engine attempts per turn, requests in flight, sessions remembered).
May import: `adapter.errors` only.
"""
