"""What is installed and whether it is supported, decided before any episode.

Owns: the version gate (`gate`: supported, opt-in and refused releases of verifiers, renderers,
openai, transformers) and the co-install facts (`coinstall`: which openai each verifiers release
can share a process with), and the releases beside verifiers known to break it (`breaks`).
May import: `errors`, `config`, `wire`, `engine`, `bridge`.
"""
