"""SGLang's own code as the schema: pure pieces of an installed sglang tree, never its runtime.

Consumes: a directory holding an `sglang/` package tree (a wheel installed with
`uv pip install --no-deps --target DIR sglang==X`, or a full install). Emits an `SGLangSource`:

  * `sampling_params` — SGLang's `SamplingParams` class, imported from
    `sglang/srt/sampling/sampling_params.py` with empty parent packages, so
    `sglang/__init__.py` (which pulls the GPU runtime) never runs. It needs `msgspec`
    (and `torch` from 0.5.23 on, for its watermarking import);
  * `generate_fields` — the field names of `GenerateReqInput`, read from
    `sglang/srt/managers/io_struct.py` by AST (importing it needs zmq, CUDA kernels, ...);
  * `finish_classes` — SGLang's finish-reason classes (`FINISH_MATCHED_TOKEN`, `FINISH_LENGTH`,
    `FINISH_ABORT`, ...): their class definitions are taken from `schedule_batch.py`'s AST and
    executed alone, so `to_json()` is SGLang's own serialisation;
  * `detokenize_logprob_tokens` — the tokenizer manager's method that builds every
    `output_token_logprobs` entry, executed from its AST the same way;
  * `meta_info` — the `meta_info` keys `TokenizerManager._handle_batch_output` always sets on
    a finished generate output (and every key it can set), and the top-level output shapes.

Nothing here is copied from SGLang: every fact is read from the tree passed in, so a new
SGLang release is checked by installing it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapter.reference.errors import SGLangSourceError

SAMPLING_MODULE = "sglang.srt.sampling.sampling_params"
IO_STRUCT = "sglang/srt/managers/io_struct.py"
SCHEDULE_BATCH = "sglang/srt/managers/schedule_batch.py"
TOKENIZER_MANAGER = "sglang/srt/managers/tokenizer_manager.py"
HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
# Modules whose functions set `meta_info` keys for the tokenizer manager (0.5.23:
# `add_weight_versions_to_meta_info` sets `weight_versions`, the request-time stats
# `response_sent_to_client_ts`); read where the tree has them.
META_INFO_HELPERS = ("sglang/srt/utils/weight_versions.py", "sglang/srt/observability/req_time_stats.py")
FINISH_CLASS_PREFIX = ("BaseFinishReason", "FINISH")
# Branch conditions that hold for a finished, non-streaming `/generate` of a generation model on
# a default launch: the `meta_info` keys set under them are always present in such an output.
FINISHED_GENERATE_CONDITIONS = frozenset(
    {"state.finished", "not isinstance(recv_obj, BatchEmbeddingOutput)"}
)
_IMPORT_LOCK = threading.Lock()


@dataclass(frozen=True)
class MetaInfoShape:
    always: frozenset[str]  # set on every finished generate output
    with_logprobs: frozenset[str]  # added when the request sets return_logprob
    known: frozenset[str]  # every literal key the tokenizer manager can set
    output_shapes: tuple[frozenset[str], ...]  # top-level key sets of token outputs


@dataclass(frozen=True)
class SGLangSource:
    version: str
    root: Path
    sampling_params: type
    generate_fields: frozenset[str]
    finish_classes: dict[str, type]
    detokenize_logprob_tokens: Callable[..., list[Any]]
    meta_info: MetaInfoShape
    model_info_keys: frozenset[str]  # the keys of the server's model-info answer
    get_routes: dict[str, str]  # GET path → the function serving it

    @property
    def sampling_keys(self) -> frozenset[str]:
        """The keys `SamplingParams(**params)` accepts (internal fields included)."""
        return frozenset(self.sampling_params.__struct_fields__)  # type: ignore[attr-defined]  # msgspec.Struct's field table


def _parse(root: Path, relative: str) -> ast.Module:
    path = root / relative
    if not path.exists():
        raise SGLangSourceError(f"{path} is missing: is {root} an sglang install (uv pip install --target)?")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _class(module: ast.Module, name: str) -> ast.ClassDef:
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SGLangSourceError(f"class {name} not found")


def _function(owner: ast.ClassDef | ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in ast.walk(owner):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise SGLangSourceError(f"function {name} not found")


def _execute(nodes: list[ast.stmt], filename: str) -> dict[str, Any]:
    """Run bare definitions lifted from SGLang's source with only `typing` in scope."""
    namespace: dict[str, Any] = {name: getattr(typing, name) for name in typing.__all__}
    namespace["__name__"] = "sglang_source_extract"
    exec(compile(ast.Module(body=nodes, type_ignores=[]), filename, "exec"), namespace)
    return namespace


def version_of(root: Path) -> str:
    for dist in importlib.metadata.distributions(path=[str(root)]):
        if dist.metadata["Name"] == "sglang":
            return str(dist.version)
    raise SGLangSourceError(f"{root} has no sglang-*.dist-info: install with `uv pip install --target`")


def import_pure(root: Path, module: str) -> types.ModuleType:
    """Import one sglang module from `root` with empty parent packages (their `__init__` never
    runs); the process' own `sglang*` modules are restored afterwards."""
    with _IMPORT_LOCK:
        saved = {k: v for k, v in sys.modules.items() if k == "sglang" or k.startswith("sglang.")}
        for name in saved:
            del sys.modules[name]
        try:
            parts = module.split(".")
            for depth in range(1, len(parts)):
                package = types.ModuleType(".".join(parts[:depth]))
                package.__path__ = [str(root.joinpath(*parts[:depth]))]
                sys.modules[package.__name__] = package
            return importlib.import_module(module)
        finally:
            for name in [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]:
                del sys.modules[name]
            sys.modules.update(saved)


def generate_fields(root: Path) -> frozenset[str]:
    node = _class(_parse(root, IO_STRUCT), "GenerateReqInput")
    return frozenset(
        item.target.id for item in node.body if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    )


def finish_classes(root: Path) -> dict[str, type]:
    module = _parse(root, SCHEDULE_BATCH)
    nodes: list[ast.stmt] = [
        n for n in module.body if isinstance(n, ast.ClassDef) and n.name.startswith(FINISH_CLASS_PREFIX)
    ]
    namespace = _execute(nodes, str(root / SCHEDULE_BATCH))
    return {n.name: namespace[n.name] for n in nodes if isinstance(n, ast.ClassDef)}


def _detokenizer(root: Path) -> Callable[..., list[Any]]:
    manager = _class(_parse(root, TOKENIZER_MANAGER), "TokenizerManager")
    namespace = _execute([_function(manager, "detokenize_logprob_tokens")], str(root / TOKENIZER_MANAGER))
    method = namespace["detokenize_logprob_tokens"]

    def detokenize(logprobs: list[float], ids: list[int], tokenizer: Any = None) -> list[Any]:
        owner = types.SimpleNamespace(tokenizer=tokenizer)
        return list(method(owner, logprobs, ids, tokenizer is not None))

    return detokenize


def _string_keys(node: ast.Dict) -> set[str]:
    return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


class _MetaInfoKeys(ast.NodeVisitor):
    """Collects `meta_info` keys (literal, `meta_info[...] =`, `meta_info.update({...})`) with
    the branch conditions each is set under."""

    def __init__(self) -> None:
        self.conditions: list[str] = []
        self.keys: list[tuple[str, tuple[str, ...]]] = []
        self.outputs: list[frozenset[str]] = []

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        self.conditions.append(test)
        for child in node.body:
            self.visit(child)
        self.conditions[-1] = f"not ({test})"
        for child in node.orelse:
            self.visit(child)
        self.conditions.pop()

    def _add(self, keys: set[str]) -> None:
        self.keys.extend((key, tuple(self.conditions)) for key in keys)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == "meta_info" and isinstance(node.value, ast.Dict):
                self._add(_string_keys(node.value))
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and target.value.id == "meta_info" and isinstance(target.slice, ast.Constant)):
                self._add({str(target.slice.value)})
        if isinstance(node.value, ast.Dict) and "meta_info" in _string_keys(node.value):
            self.outputs.append(frozenset(_string_keys(node.value)))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "update" and isinstance(func.value, ast.Name)
                and func.value.id == "meta_info" and node.args and isinstance(node.args[0], ast.Dict)):
            self._add(_string_keys(node.args[0]))
        self.generic_visit(node)


def meta_info_shape(root: Path) -> MetaInfoShape:
    manager = _class(_parse(root, TOKENIZER_MANAGER), "TokenizerManager")
    batch, logprob, everything = _MetaInfoKeys(), _MetaInfoKeys(), _MetaInfoKeys()
    batch.visit(_function(manager, "_handle_batch_output"))
    logprob.visit(_function(manager, "add_logprob_to_meta_info"))
    everything.visit(manager)
    for helper in META_INFO_HELPERS:
        if (root / helper).exists():
            everything.visit(_parse(root, helper))
    always = {k for k, conds in batch.keys if set(conds) <= FINISHED_GENERATE_CONDITIONS}
    shapes = tuple(dict.fromkeys(s for s in batch.outputs if "output_ids" in s))
    if not always or not shapes:
        raise SGLangSourceError(f"{root / TOKENIZER_MANAGER}: no meta_info literal found in _handle_batch_output")
    return MetaInfoShape(
        always=frozenset(always),
        with_logprobs=frozenset(k for k, conds in logprob.keys if not conds),
        known=frozenset(k for k, _ in everything.keys),
        output_shapes=shapes,
    )


def get_routes(root: Path) -> dict[str, str]:
    """`GET` path → the function serving it, from the `@app.get(...)` decorators of SGLang's
    HTTP server."""
    routes = {}
    for node in _parse(root, HTTP_SERVER).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == "get" and decorator.args
                    and isinstance(decorator.args[0], ast.Constant) and isinstance(decorator.args[0].value, str)):
                routes[decorator.args[0].value] = node.name
    return routes


def model_info_keys(root: Path, routes: Mapping[str, str]) -> frozenset[str]:
    """The literal keys of the dict SGLang's model-info route answers (`/model_info`; releases
    before it answer on `/get_model_info` only); `routes` is `get_routes(root)`."""
    name = routes.get("/model_info") or routes.get("/get_model_info")
    if name is None:
        raise SGLangSourceError(f"{root / HTTP_SERVER}: no model-info route")
    route = _function(_parse(root, HTTP_SERVER), name)
    keys = {key for node in ast.walk(route) if isinstance(node, ast.Dict) for key in _string_keys(node)}
    if not keys:
        raise SGLangSourceError(f"{root / HTTP_SERVER}: {name} builds no dict literal")
    return frozenset(keys)


def load_source(root: Path) -> SGLangSource:
    """Everything the schema checks need from one sglang tree (see the module docstring)."""
    root = Path(root)
    routes = get_routes(root)
    return SGLangSource(
        version=version_of(root),
        root=root,
        sampling_params=import_pure(root, SAMPLING_MODULE).SamplingParams,
        generate_fields=generate_fields(root),
        finish_classes=finish_classes(root),
        detokenize_logprob_tokens=_detokenizer(root),
        meta_info=meta_info_shape(root),
        model_info_keys=model_info_keys(root, routes),
        get_routes=routes,
    )
