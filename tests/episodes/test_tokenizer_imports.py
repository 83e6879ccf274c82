"""A renderer pool is built on threads; transformers' names are imported on the caller's thread first
(`adapter.episodes.tokenizer_imports`): two threads importing `AutoTokenizer` at once can fail one, and
the adapter then loses a trace to a 502 in the first group of a process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# A fresh process (nothing in it has touched transformers' lazy names yet): the pool's constructor is
# replaced by one that reports whether the names were already resolved when its threads would start.
PROBE = textwrap.dedent("""
    import sys
    import renderers.base
    from adapter.episodes.generations import a

    def reporting(self, factory, size):
        transformers = sys.modules.get("transformers")
        names = vars(transformers) if transformers is not None else {}
        print({name: name in names for name in ("AutoTokenizer", "PreTrainedTokenizerFast", "AutoConfig")})

    renderers.base.RendererPool.__init__ = reporting
    a._shared_pool(sys.argv[1], "Qwen/Qwen3-0.6B", "{}", 2)
""")


def test_the_tokenizer_names_are_imported_before_the_pool_threads_start(qwen3_tokenizer: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(qwen3_tokenizer)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(
        {"AutoTokenizer": True, "PreTrainedTokenizerFast": True, "AutoConfig": True})
