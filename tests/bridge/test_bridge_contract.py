"""Contract: the real verifiers 0.2.0 TrainClient + real Renderers Qwen3 renderer + real Qwen3
tokenizer, through the bridge, against the scripted SGLang engine (docs/contract.md §2, §3, §5).

These fail if the bridge re-tokenized, dropped or mislabelled a logprob, or retried a 4xx.
Regenerate the request snapshot with `uv run pytest tests/bridge/test_bridge_contract.py --snapshot-update`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from renderers.base import create_renderer, load_tokenizer
from verifiers.v1.dialects import ChatDialect
from verifiers.v1.errors import OverlongPromptError, ProviderError
from verifiers.v1.graph import prepare_turn
from verifiers.v1.task import WireTaskData
from verifiers.v1.trace import Trace, TraceTask
from verifiers.v1.types import AssistantMessage, SamplingConfig, ToolCall, ToolMessage, UserMessage

from adapter.bridge.handler import create_app
from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient
from adapter.episodes.generations.a import AdapterRequestError, BridgeTrainClient, make_train_client
from conformance.engine import Completion, Fault
from conformance.plugin import loaded_tokenizer

MODEL = "Qwen/Qwen3-0.6B"
IM_END = 151645
SAMPLING = SamplingConfig(temperature=0.7, max_tokens=64)
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look a key up",
                                           "parameters": {"type": "object",
                                                          "properties": {"key": {"type": "string"}}}}}]


@dataclass
class Stack:
    client: BridgeTrainClient
    engine: SGLangClient
    tokenizer: Any

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def completion(self, text: str, finish: str = "stop", logprob: float = -0.5) -> Completion:
        ids = self.encode(text) + ([IM_END] if finish == "stop" else [])
        return Completion(ids, [logprob - 0.01 * i for i in range(len(ids))], finish)

    async def ask(self, content: str, *, session: str | None = "trace-1", **body: Any):
        request = {"messages": [{"role": "user", "content": content}], **body}
        return await self.client.get_response(ChatDialect(), request, MODEL, SAMPLING, session_id=session)


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer) -> Any:
    return loaded_tokenizer(qwen3_tokenizer)


@pytest.fixture
async def stack_factory(sglang_mock, qwen3_tokenizer, tokenizer) -> AsyncIterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def make(**settings: Any) -> Stack:
        engine = SGLangClient(sglang_mock.url, retry=RetryPolicy(initial_backoff=0.0, max_backoff=0.0))
        app = create_app(Settings(**settings), engine, model=MODEL)
        client = make_train_client(app, tokenizer_path=str(qwen3_tokenizer))
        stacks.append(Stack(client, engine, tokenizer))
        return stacks[-1]

    yield make
    for stack in stacks:
        await stack.client.close()
        await stack.engine.aclose()


def renderer_ids(tokenizer_dir: Any, messages: list[dict[str, Any]]) -> list[int]:
    """What a freshly built Qwen3 renderer (not the client's) renders for `messages`."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    tokenizer.name_or_path = MODEL
    return list(create_renderer(tokenizer).render_ids(messages, add_generation_prompt=True))


async def test_single_turn_is_exact_and_the_request_is_snapshot_locked(
    stack_factory, sglang_mock, qwen3_tokenizer, snapshot
) -> None:
    stack = stack_factory(rollout_max_context_len=2048)
    scripted = stack.completion("The answer is 4.")
    sglang_mock.script(scripted)
    response = await stack.ask("What is 2+2?")
    (call,) = sglang_mock.generate_requests()
    assert {"body": call.body, "headers": call.headers} == snapshot
    assert response.tokens.prompt_ids == renderer_ids(qwen3_tokenizer, [{"role": "user", "content": "What is 2+2?"}])
    assert call.body["input_ids"] == response.tokens.prompt_ids
    assert response.tokens.completion_ids == scripted.ids
    assert response.tokens.completion_logprobs == scripted.logprobs
    assert response.message.content == "The answer is 4."
    assert response.finish_reason == "stop"


async def test_reasoning_is_parsed(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(stack.completion("<think>\n2 plus 2 is 4\n</think>\n\n4"))
    response = await stack.ask("2+2?")
    assert response.message.reasoning_content.strip() == "2 plus 2 is 4"
    assert response.message.content.strip() == "4"


async def test_multi_turn_tool_call_reuses_turn_one_ids_exactly(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    call_text = '<tool_call>\n{"name": "lookup", "arguments": {"key": "x"}}\n</tool_call>'
    turn1_completion = stack.completion(call_text)
    sglang_mock.script(turn1_completion, stack.completion("The value is 42."))

    trace = Trace(task=TraceTask(type="Task", data=WireTaskData(idx=0, prompt="Look up x")))
    user = UserMessage(content="Look up x")
    turn1 = prepare_turn(trace, [user])
    first = await stack.client.get_response(ChatDialect(), {"messages": [{"role": "user", "content": "Look up x"}],
                                                             "tools": TOOLS},
                                            MODEL, SAMPLING, session_id=trace.id, turn=turn1)
    (tool_call,) = first.message.tool_calls
    assert (tool_call.name, json.loads(tool_call.arguments)) == ("lookup", {"key": "x"})
    assert first.finish_reason == "tool_calls"
    turn1.commit(first)

    assistant = AssistantMessage(content=first.message.content, tool_calls=[
        ToolCall(id=tool_call.id, name="lookup", arguments=tool_call.arguments)])
    tool = ToolMessage(tool_call_id=tool_call.id, content="42", name="lookup")
    turn2 = prepare_turn(trace, [user, assistant, tool])
    second = await stack.client.get_response(ChatDialect(), {"messages": [], "tools": TOOLS}, MODEL, SAMPLING,
                                             session_id=trace.id, turn=turn2)
    prefix = first.tokens.prompt_ids + turn1_completion.ids
    assert second.tokens.prompt_ids[: len(prefix)] == prefix
    requests = sglang_mock.generate_requests()
    assert requests[1].body["input_ids"][: len(prefix)] == prefix
    assert second.message.content == "The value is 42."


async def test_finish_length_is_reported_as_length(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(stack.completion("one two three", finish="length"))
    response = await stack.ask("count")
    assert response.finish_reason == "length"


async def test_abort_is_an_error_never_a_complete_turn(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(stack.completion("partial", finish="abort"))
    with pytest.raises(ProviderError) as caught:
        await stack.ask("hi")
    assert caught.value.status_code == 410  # no SDK retries it: the abort stands
    assert "aborted" in str(caught.value)


@pytest.mark.parametrize(
    "settings",
    [{"rollout_max_context_len": 8}, {"rollout_max_context_len": 9}, {"rollout_max_prompt_len": 8}],
    ids=["renderers_preflight_max_model_len", "no_budget_left_in_the_bridge", "first_turn_prompt_cap"],
)
async def test_overlong_prompt_is_a_clean_truncation_not_a_provider_error(
    settings, stack_factory, sglang_mock
) -> None:
    """Verifiers ends a rollout as a context-length truncation on OverlongPromptError (its
    interception server); "hi" renders to 9 tokens."""
    stack = stack_factory(**settings)
    with pytest.raises(OverlongPromptError):
        await stack.ask("hi")
    assert sglang_mock.generate_requests() == []


async def test_a_5xx_then_success_is_retried(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(Fault(status=503, body={"error": "warming up"}), stack.completion("ok"))
    response = await stack.ask("hi")
    assert response.message.content == "ok"
    assert len(sglang_mock.generate_requests()) == 2


async def test_a_4xx_is_not_retried_and_its_400_is_surfaced(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(Fault(status=400, body={"error": "bad sampling param"}), stack.completion("never"))
    with pytest.raises(ProviderError, match="bad sampling param") as caught:
        await stack.ask("hi")
    assert caught.value.status_code == 400
    assert not isinstance(caught.value, AdapterRequestError)
    assert len(sglang_mock.generate_requests()) == 1


async def test_an_engine_timeout_is_a_typed_504(stack_factory, sglang_mock) -> None:
    stack = stack_factory()
    sglang_mock.script(*[Fault(timeout=True)] * 3)
    with pytest.raises(ProviderError, match="no answer in time") as caught:
        await stack.ask("hi")
    assert caught.value.status_code == 504


async def test_consistent_hashing_routes_by_session_id(stack_factory, sglang_mock) -> None:
    stack = stack_factory(sglang_router_policy="consistent_hashing")
    sglang_mock.script(stack.completion("ok"))
    await stack.ask("hi", session="trace-abc")
    (call,) = sglang_mock.generate_requests()
    assert call.headers["x-smg-routing-key"] == "trace-abc"


async def test_routing_policy_without_session_is_a_typed_configuration_error(stack_factory, sglang_mock) -> None:
    stack = stack_factory(sglang_router_policy="manual")
    with pytest.raises(AdapterRequestError, match="X-Session-ID") as caught:
        await stack.ask("hi", session=None)
    assert caught.value.status_code == 400
    assert sglang_mock.generate_requests() == []


async def test_streaming_relay_is_refused_with_the_setting_to_change(stack_factory) -> None:
    stack = stack_factory()
    with pytest.raises(AdapterRequestError, match="stream=false"):
        await stack.client.relay(ChatDialect(), {}, MODEL, SAMPLING)
    with pytest.raises(AdapterRequestError, match="auxiliary route"):
        await stack.client.relay_aux(ChatDialect(), "/count_tokens", {})


async def test_non_chat_dialect_is_refused(stack_factory) -> None:
    from verifiers.v1.dialects import ResponsesDialect

    stack = stack_factory()
    with pytest.raises(AdapterRequestError, match="chat-completions only"):
        await stack.client.get_response(ResponsesDialect(), {"input": "hi"}, MODEL, SAMPLING)


@pytest.mark.parametrize(("flags", "advice"), [
    (None, "pass --renderer-model-name with a registered model id"),  # Miles
    ({"renderer_model_name": "--model"}, "pass --model with a registered model id"),  # vf-sglang rollout
    ({"sglang_router_policy": "--router-policy"}, "use a model Renderers registers"),  # vf-sglang check: no flag
])
async def test_tools_with_a_renderer_that_cannot_parse_them_are_refused(sglang_mock, qwen3_tokenizer, flags,
                                                                         advice) -> None:
    engine = SGLangClient(sglang_mock.url)
    app = create_app(Settings(flag_names=flags), engine, model="my-org/unregistered")
    client = make_train_client(app, tokenizer_path=str(qwen3_tokenizer), renderer_model_name="my-org/unregistered")
    client.bridge = app.state.bridge  # as GenerationA.make_client wires it
    with pytest.raises(AdapterRequestError, match=f"cannot parse tool calls: {advice}"):
        await client.get_response(ChatDialect(), {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS},
                                  "my-org/unregistered", SAMPLING, session_id="t")
    await client.close()
    await engine.aclose()
    assert sglang_mock.generate_requests() == []
