"""One agent on a litellm model (openai/gpt-4o-mini), served by the loopback OpenAI server a test
starts (its address in ``FLOWCAPTURE_API_BASE``): a tool call, then an answer."""

import os

from flowtui import LiteLLMProvider, agent, loop, tool, until_answered, workflow
from flowtui.runtime.providers.litellm import Retry


@tool(name="somar", description="Adds two integers.")
def somar(a: int, b: int) -> str:
    return str(a + b)


class Loopback(LiteLLMProvider):
    model = "openai/gpt-4o-mini"
    api_base = os.environ.get("FLOWCAPTURE_API_BASE")
    retry = Retry(attempts=1)


@agent(provider=Loopback(api_key="sk-loopback-FAKE-0123456789"), prompt="Use somar for arithmetic.", tools=[somar])
class Calc:
    pass


@workflow(steps=[loop(steps=[Calc], until=until_answered, max_iterations=3)])
class CalcWorkflow:
    """Arithmetic with a tool, on a real litellm path."""
