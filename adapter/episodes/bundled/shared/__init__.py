"""What both generations' bundled tasksets share: rows, scoring, tool servers (package data).

The modules Verifiers imports by name (`a/tasksets/<id>.py`, `b/tasksets/<id>.py`) hold only what
differs between Verifiers API generations: how a task declares its tool server (0.2.x `Task.tools`,
0.3.x/0.4.0 `Task.toolsets(config)`) and how a group reward is written (0.2.x `@group_reward`,
0.3.x/0.4.0 an `Env` whose `finalize` sees the group). Everything else is here, once. These modules
use only the V1 API both generations share (`TaskData`, `Task`, `Toolset`, `@reward`, `@metric`).
"""
