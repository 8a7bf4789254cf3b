"""The text tool-call rescue parser and the <think> stripper (pure Python)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowtui.runtime.messages import ToolCall
from flowtui.runtime.providers.rescue import find_tool_calls, strip_think

NAMES = frozenset({"search", "read_file", "ler_arquivo"})


# --------------------------------------------------------------------------- examples


def test_tool_call_tag():
    text = 'Sure.\n<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>'
    calls, rest = find_tool_calls(text, NAMES)
    assert calls == [ToolCall(name="search", args={"q": "x"})]
    assert rest == "Sure."


def test_unclosed_tag_and_several_calls_in_one_tag():
    calls, _ = find_tool_calls('<tool_call>{"name": "search", "arguments": {}}', NAMES)
    assert [c.name for c in calls] == ["search"]
    text = ('<tool_call>{"name": "search", "arguments": {"q": 1}}\n'
            '{"name": "read_file", "arguments": {"path": "a"}}</tool_call>')
    calls, rest = find_tool_calls(text, NAMES)
    assert [c.name for c in calls] == ["search", "read_file"] and rest == ""


def test_fenced_json_and_plain_fence():
    for fence in ("```json", "```", "```tool_call", "~~~json"):
        close = fence[:3]
        text = f'I will read it.\n{fence}\n{{"tool": "read_file", "args": {{"path": "a.py"}}}}\n{close}\nThen answer.'
        calls, rest = find_tool_calls(text, NAMES)
        assert calls == [ToolCall(name="read_file", args={"path": "a.py"})], fence
        assert rest == "I will read it.\n\nThen answer."


def test_bare_json_in_prose():
    text = 'Calling {"name": "search", "parameters": {"q": "cats"}} now.'
    calls, rest = find_tool_calls(text, NAMES)
    assert calls == [ToolCall(name="search", args={"q": "cats"})]
    assert rest == "Calling  now."


def test_openai_function_envelope_with_string_arguments():
    text = json.dumps({"id": "call_7", "type": "function",
                       "function": {"name": "search", "arguments": json.dumps({"q": "é"})}})
    calls, _ = find_tool_calls(text, NAMES)
    assert calls == [ToolCall(name="search", args={"q": "é"}, id="call_7")]


def test_list_and_tool_calls_wrapper():
    items = [{"name": "search", "arguments": {"q": 1}}, {"name": "read_file", "arguments": {}}]
    for value in (items, {"tool_calls": items}):
        calls, rest = find_tool_calls(json.dumps(value), NAMES)
        assert [c.name for c in calls] == ["search", "read_file"] and rest == ""


def test_only_known_tool_names_count():
    text = '{"name": "delete_everything", "arguments": {}} and {"name": "Bob", "age": 3}'
    calls, rest = find_tool_calls(text, NAMES)
    assert calls == [] and rest == text


def test_json_that_is_not_a_call_is_left_alone():
    text = 'Config:\n```json\n{"search": true, "depth": 2}\n```'
    assert find_tool_calls(text, NAMES) == ([], text)


def test_bad_arguments_are_not_a_call():
    for args in ('"not json"', "[1, 2]", '"[1]"', "3"):
        text = '{"name": "search", "arguments": ' + args + "}"
        assert find_tool_calls(text, NAMES)[0] == [], args


def test_no_names_no_text():
    assert find_tool_calls('{"name": "search", "arguments": {}}', frozenset()) == (
        [], '{"name": "search", "arguments": {}}')
    assert find_tool_calls("", NAMES) == ([], "")


def test_strip_think_forms():
    assert strip_think("<think>plan</think>Answer") == ("Answer", "plan")
    assert strip_think("<THINKING>a</THINKING>x<think>b</think>y") == ("xy", "a\n\nb")
    # The opening tag was in the chat template: the reply starts inside the block.
    assert strip_think("plan here</think>\nAnswer") == ("Answer", "plan here")
    # Cut off while thinking.
    assert strip_think("Hi <think>still going") == ("Hi", "still going")
    assert strip_think("no reasoning") == ("no reasoning", None)
    assert strip_think("<think></think>ok") == ("ok", None)


# --------------------------------------------------------------------------- properties

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
args_st = st.dictionaries(st.text(min_size=1, max_size=10), json_value, max_size=4)
# Prose that cannot itself open a JSON value, fence, or tag.
prose = st.text(alphabet=st.characters(blacklist_characters="{}[]`~<>\x00",
                                       blacklist_categories=("Cs",)), max_size=40)

ENVELOPES = [
    lambda n, a, s: {"name": n, "arguments": s(a)},
    lambda n, a, s: {"name": n, "parameters": s(a)},
    lambda n, a, s: {"tool": n, "args": s(a)},
    lambda n, a, s: {"function": {"name": n, "arguments": s(a)}},
    lambda n, a, s: {"type": "function", "id": "c1", "function": {"name": n, "arguments": s(a)}},
]
WRAPPERS = [
    lambda j: f"<tool_call>{j}</tool_call>",
    lambda j: f"<tool_call>\n{j}\n</tool_call>",
    lambda j: f"```json\n{j}\n```",
    lambda j: f"```\n{j}\n```",
    lambda j: j,
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=400))
@example(text="[" * 5000)
@example(text="{" * 5000)
@example(text='<tool_call>{"name": "search", "arguments": "{\\"q\\": ' + "[" * 3000 + '"}')
@example(text="<think><tool_call>```json\n{\n```</tool_call></think>")
def test_never_raises_on_arbitrary_text(text):
    calls, rest = find_tool_calls(text, NAMES)
    assert isinstance(calls, list) and isinstance(rest, str)
    content, reasoning = strip_think(text)
    assert isinstance(content, str) and (reasoning is None or isinstance(reasoning, str))


jsonish = st.lists(st.sampled_from(['{', '}', '[', ']', '"', ':', ',', 'name', 'search', 'arguments',
                                    'tool', 'args', '<tool_call>', '</tool_call>', '```json\n',
                                    '```', '\n', ' ', '1', 'null', '"search"', '"name"',
                                    '<think>', '</think>', '\\', 'function']),
                   max_size=60).map("".join)


@settings(max_examples=300)
@given(text=jsonish)
def test_never_raises_on_json_like_noise(text):
    calls, rest = find_tool_calls(text, NAMES)
    assert all(c.name in NAMES for c in calls)
    assert isinstance(rest, str)


@settings(max_examples=400)
@given(name=st.sampled_from(sorted(NAMES)), args=args_st,
       envelope=st.sampled_from(range(len(ENVELOPES))), wrapper=st.sampled_from(range(len(WRAPPERS))),
       as_string=st.booleans(), before=prose, after=prose)
def test_finds_a_call_in_any_envelope(name, args, envelope, wrapper, as_string, before, after):
    encode = (lambda a: json.dumps(a)) if as_string else (lambda a: a)
    body = json.dumps(ENVELOPES[envelope](name, args, encode))
    text = before + "\n" + WRAPPERS[wrapper](body) + "\n" + after
    calls, rest = find_tool_calls(text, NAMES)
    assert len(calls) == 1
    assert calls[0].name == name and calls[0].args == args
    assert body not in rest  # the call's text is cut from the content


@settings(max_examples=200)
@given(name=st.text(min_size=1, max_size=12).filter(lambda n: n not in NAMES), args=args_st,
       envelope=st.sampled_from(range(len(ENVELOPES))), wrapper=st.sampled_from(range(len(WRAPPERS))))
def test_unknown_names_are_never_rescued(name, args, envelope, wrapper):
    body = json.dumps(ENVELOPES[envelope](name, args, lambda a: a))
    text = WRAPPERS[wrapper](body)
    calls, rest = find_tool_calls(text, NAMES)
    # A nested value may itself look like a call to a known tool; the outer one never counts.
    assert all(c.name in NAMES for c in calls)
    if not calls:
        assert rest == text


def test_a_request_rescues_calls_to_the_tools_it_sends_or_names():
    """A reply's text call is rescued for a tool the request sends, by its schema (a middleware's copy
    without a tool keeps the tool_names it came with), or names, when it sends no schemas."""
    from flowtui.runtime.providers.base import ChatReply, ChatRequest, finish_reply

    schema = {"type": "function", "function": {"name": "search", "parameters": {}}}
    text = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    sent = ChatRequest(messages=[], tools=[schema], tool_names=frozenset({"search", "delete"}))
    named = ChatRequest(messages=[], tool_names=frozenset({"search"}))
    dropped = ChatRequest(messages=[], tools=[schema], tool_names=frozenset({"search", "delete"}))
    for request in (sent, named):
        assert [c.name for c in finish_reply(request, ChatReply(content=text), rescue=True).tool_calls] == ["search"]
    other = text.replace("search", "delete")  # named by tool_names, but its schema is not sent
    assert finish_reply(dropped, ChatReply(content=other), rescue=True).tool_calls == []
