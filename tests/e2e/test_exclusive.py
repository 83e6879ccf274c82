"""One machine-wide turn (`e2e.common.exclusive`): the twin waits while the lock is held, a hung
holder is named after the wait allowed, and a released lock is taken at once."""

from __future__ import annotations

import pytest

from e2e.common.exclusive import TurnTimeoutError, machine_turn


def test_a_held_turn_makes_the_twin_wait_then_names_the_lock_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VF_SGLANG_LOCKS_DIR", str(tmp_path))
    with machine_turn("decode", wait_s=5) as waited:
        assert waited < 1
        with pytest.raises(TurnTimeoutError, match=r"decode\.lock is still held after 0 s"), \
                machine_turn("decode", wait_s=0.2, poll_s=0.05):
            pass
    with machine_turn("decode", wait_s=0.2) as waited:  # released: taken at once
        assert waited < 0.2
