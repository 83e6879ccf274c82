"""`vf-sglang`, the command line: one thin subcommand per job, and how results are shown.

Owns: the parser and entry point (`entry`; `__main__` for `python -m adapter.cli`), the job
commands (`commands`), the live server check (`check`) and its checks (`server_checks`), SIGTERM
ending a command as Ctrl-C does (`interrupts`), the look at a router before a run (`routing`),
argument checks (`arguments`), help texts (`help_text`), progress (`progress`) and results
(`results`), the compatibility table (`compat`), and the one composition point with the
reference engine (`reference_engine`).
May import: every other subpackage.
"""

from adapter.cli.entry import main

__all__ = ["main"]
