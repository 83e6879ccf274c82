"""The canary lane (`tox -e canary`): every release we depend on, judged the day it is published.

    python -m tools.canary run [--write]      resolve the newest releases, run the cells, write the report
    python -m tools.canary bump PACKAGE       move a pin, regenerate docs/compatibility.md, name the lanes

`releases` asks the package index (through uv) for the newest release of each package; `cells`
(pure) turns those into the cells to run and decides, from the version gate, which of them may fail
the build: a release inside a range the gate accepts that breaks the contract fails the lane (a
user meets it tomorrow); a release the gate refuses is reported, with its result when run past the
gate under the opt-in. `runner` builds a cell's venv and runs the contract suite (and the sglang
schema checks) with a JUnit report; `junit` reads the first failing check from it; `report` writes
the "newest published" section of docs/compatibility.md. `rules` is each package's gate rule, pin
location and lanes (docs/versions.md's bump table).
"""
