"""Which Miles the launcher targets, and the one environment variable that selects its rollout ABI.

    main    Miles from #2522 on (2026-08-13, Miles' image): the class ABI is the default, and
            MILES_USE_LEGACY_ROLLOUT_V1=1 selects the legacy function.
    0.0.2   the published `miles-rl==0.0.2` (and Miles before #2522): the legacy function is the
            default, and MILES_EXPERIMENTAL_ROLLOUT_REFACTOR=1 opts into the class ABI (only then
            does Miles call the class' `add_arguments`, i.e. accept `--verifiers-config`).

Both read their variable as `bool(int(value))` in the driver and in every Ray worker, so a value
`int()` cannot parse (`true`, `yes`, the empty string) crashes Miles at start-up: `selector_value`
refuses it first, naming the variable and the values it accepts.

`detect_flavor()` reads the installed Miles (`miles.utils.environ`, a module of `os` only); with
no Miles importable it answers None and the caller needs `--miles-version`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from adapter.errors import ConfigurationError, UnknownMilesError

Flavor = Literal["main", "0.0.2"]
FLAVORS: tuple[Flavor, ...] = ("main", "0.0.2")
LEGACY_FLAG = "MILES_USE_LEGACY_ROLLOUT_V1"  # Miles main: 1 = legacy function
REFACTOR_FLAG = "MILES_EXPERIMENTAL_ROLLOUT_REFACTOR"  # miles-rl 0.0.2: 1 = class ABI
SELECTORS = (LEGACY_FLAG, REFACTOR_FLAG)


def detect_flavor() -> Flavor | None:
    """The installed Miles' flavour, or None when no `miles` is importable."""
    try:
        environ = importlib.import_module("miles.utils.environ")
    except ImportError:
        return None
    if hasattr(environ, "use_legacy_rollout_v1"):
        return "main"
    if hasattr(environ, "enable_experimental_rollout_refactor"):
        return "0.0.2"
    raise UnknownMilesError(
        f"the importable miles ({getattr(environ, '__file__', '?')}) reads neither {LEGACY_FLAG} nor "
        f"{REFACTOR_FLAG}: pass --miles-version {{{','.join(FLAVORS)}}} for the Miles the job will run"
    )


def selector_value(name: str, value: str) -> bool:
    """`value` as Miles reads it (`bool(int(value))`), or ConfigurationError before Miles would crash."""
    try:
        return bool(int(value))
    except ValueError:
        raise ConfigurationError(
            f"{name}={value!r}: Miles reads it with int() in the driver and every Ray worker and would "
            f"crash at start-up; use {name}=0 or {name}=1"
        ) from None


@dataclass(frozen=True)
class Selection:
    legacy: bool  # True: Miles calls the legacy function; False: it builds the class
    env: dict[str, str]  # the selector variables the driver and the workers get


def select_abi(flavor: Flavor, given: Mapping[str, str]) -> Selection:
    """Which ABI the selector variables in `given` (ambient, then explicit, merged) choose for
    `flavor`, and the variables to export. `MILES_USE_LEGACY_ROLLOUT_V1` is the adapter's one
    knob for both flavours; on 0.0.2 it is translated into 0.0.2's own variable."""
    values = {name: selector_value(name, given[name]) for name in SELECTORS if name in given}
    if flavor == "main":
        if REFACTOR_FLAG in values:
            raise ConfigurationError(
                f"{REFACTOR_FLAG} is set, but Miles main no longer reads it (#2522): unset it and choose the "
                f"ABI with {LEGACY_FLAG}=0 (class) or {LEGACY_FLAG}=1 (legacy function); for miles-rl 0.0.2 "
                "pass --miles-version 0.0.2"
            )
        legacy = values.get(LEGACY_FLAG, False)
        return Selection(legacy, {LEGACY_FLAG: given.get(LEGACY_FLAG, "0")})
    if LEGACY_FLAG in values and REFACTOR_FLAG in values and values[LEGACY_FLAG] == values[REFACTOR_FLAG]:
        raise ConfigurationError(
            f"{LEGACY_FLAG}={given[LEGACY_FLAG]} and {REFACTOR_FLAG}={given[REFACTOR_FLAG]} disagree about the "
            f"rollout ABI on miles-rl 0.0.2: set only one of them"
        )
    legacy = values.get(LEGACY_FLAG, not values.get(REFACTOR_FLAG, True))
    env = {REFACTOR_FLAG: "0" if legacy else "1"}
    if LEGACY_FLAG in given:
        env[LEGACY_FLAG] = given[LEGACY_FLAG]
    return Selection(legacy, env)
