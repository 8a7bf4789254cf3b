"""What ``@agent``, ``@tool`` and ``@workflow`` refuse at import, each saying what to write: a
decorator on what it does not decorate, a hook that could never be called as written (not
callable, needing more than flowtui passes, a generator), a provider the engine cannot await.
A mistake found here is a load error naming the class; found mid-run, it would be a bare
``TypeError``."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.markers import is_marker, where
from flowtui.runtime.providers.base import Provider

HOOKS = ("before_prompt", "before_tool", "after_tool", "after_response", "on_error")


def refuse_unknown(call: str, unknown: Mapping[str, Any], fn: Any) -> None:
    """``call`` (function ``fn``) was given keyword arguments it does not take (``promt=``): say which,
    the one meant when the name is close to one it takes, and all it takes (read from its signature)."""
    if not unknown:
        return
    known = [p.name for p in inspect.signature(fn).parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    name = next(iter(unknown))
    close = difflib.get_close_matches(name, known, n=1)
    meant = f"did you mean {close[0]}=? " if close else ""
    if name in SAMPLING_KEYS and "sampling" in known:  # a model parameter: it goes in sampling={...}
        meant = f"a model parameter goes in sampling: sampling={{{name!r}: {unknown[name]!r}}}; "
    raise ConfigError(f"{call} has no parameter {name}=; {meant}it takes {', '.join(k + '=' for k in known)}")


def refuse_in_order(decorator: str, given: tuple[Any, ...], how: str) -> None:
    """A decorator given values in order: ``@agent`` alone (Python hands it the class), or values a person
    wrote without their names, ``@agent(script, "p")``: Python's "agent() takes from 0 to 1 positional
    arguments but 2 ..." named none of what to write."""
    if len(given) == 1 and isinstance(given[0], type):
        refuse_bare(decorator, given[0], how)
    values = ", ".join(f"{type(v).__name__} {v!r:.40}" if isinstance(v, (str, int, float)) else f"a {type(v).__name__}"
                       for v in given[:3]) + (", ..." if len(given) > 3 else "")
    raise ConfigError(f"{decorator}(...) takes its parameters by name: write {decorator}({how}); it was given "
                      f"{len(given)} value{'s' * (len(given) != 1)} in order ({values})")


def refuse_bare(decorator: str, target: Any, how: str) -> None:
    """``@agent`` written without its parentheses: Python hands it the class itself."""
    name = getattr(target, "__name__", None) or repr(target)
    file, line = where(target)
    at = f"{file}:{line}: " if file and line else ""
    raise ConfigError(f"{at}{decorator} takes its parameters in parentheses: write {decorator}({how}) above "
                      f"{name}, not {decorator} alone")


# Sampling parameters a chat completion takes (OpenAI's, and those litellm passes on to others).
SAMPLING_NUMBERS = {"temperature", "top_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "min_p"}
SAMPLING_COUNTS = {"max_tokens", "max_completion_tokens", "n", "top_k", "top_logprobs"}
SAMPLING_OTHER = {"stop", "seed", "logit_bias", "logprobs", "response_format", "tool_choice", "parallel_tool_calls",
                  "reasoning_effort", "user", "thinking", "modalities", "prediction", "audio", "service_tier",
                  "metadata", "store", "web_search_options", "verbosity", "extra_body", "safety_identifier",
                  "reasoning", "top_a", "typical_p", "repeat_penalty", "repeat_last_n", "num_ctx", "num_predict",
                  "mirostat", "mirostat_eta", "mirostat_tau", "tfs_z", "keep_alive", "safe_prompt", "random_seed",
                  "stop_sequences", "max_output_tokens", "candidate_count", "top_n_tokens", "guided_json",
                  "guided_regex", "guided_choice", "guided_grammar", "min_tokens", "max_new_tokens", "ignore_eos",
                  "best_of", "use_beam_search", "length_penalty", "stop_token_ids", "skip_special_tokens",
                  "include_stop_str_in_output", "prompt_logprobs", "do_sample", "return_full_text", "watermark",
                  "echo", "suffix", "truncate", "details", "num_beams", "early_stopping"}
SAMPLING_KEYS = SAMPLING_NUMBERS | SAMPLING_COUNTS | SAMPLING_OTHER


def check_sampling(sampling: Any, who: str) -> dict[str, Any]:
    """``sampling=`` as a dict, refused now when a provider would refuse the request with a 400 at
    the first call: not a mapping, a key that is a misspelling of a known one (``temprature``), a
    known number that is no number or a count that is no whole number of at least 1. A key flowtui
    does not know and that is close to none is passed on: providers take their own."""
    if sampling is None:
        return {}
    if not isinstance(sampling, Mapping):
        raise ConfigError(f"{who}: sampling= takes a dict of the model's parameters, such as "
                          f"sampling={{'temperature': 0.2}}, not {type(sampling).__name__} {sampling!r:.60}")
    for key, value in sampling.items():
        if not isinstance(key, str):
            raise ConfigError(f"{who}: sampling= has the key {key!r}; its keys are parameter names (str)")
        if key not in SAMPLING_KEYS:
            close = difflib.get_close_matches(key, sorted(SAMPLING_KEYS), n=1, cutoff=0.8)
            if close:
                raise ConfigError(f"{who}: sampling= has {key!r}, which no provider takes; did you mean "
                                  f"{close[0]!r}?")
            continue
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in SAMPLING_NUMBERS and not (number and math.isfinite(value)):
            raise ConfigError(f"{who}: sampling={{{key!r}: {value!r}}}: {key} is a number (say 0.2)")
        if key in SAMPLING_COUNTS and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ConfigError(f"{who}: sampling={{{key!r}: {value!r}}}: {key} is a whole number of at least 1")
        found = not_json(value, f"sampling[{key!r}]")
        if found:  # (the request is JSON: it failed at the first call, as a server's error)
            raise ConfigError(f"{who}: {found}, which a model request cannot carry (it is JSON); give text, "
                              "numbers, lists or dicts of them")
    return dict(sampling)


def not_json(value: Any, where: str, depth: int = 0) -> str | None:
    """Where in ``value`` (called ``where``) the first value JSON cannot hold is, and what it is:
    ``sampling['stop'] is a set``; None when it has none. A class or a pydantic model is taken as
    litellm takes it (``response_format=Answer``: its JSON schema)."""
    if value is None or isinstance(value, (str, bool, int, type, BaseModel)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, a number JSON cannot hold"
    if depth < 100 and isinstance(value, (list, tuple)):
        return next((found for i, v in enumerate(value) if (found := not_json(v, f"{where}[{i}]", depth + 1))),
                    None)
    if depth < 100 and isinstance(value, dict):
        for k, v in value.items():
            if not (k is None or isinstance(k, (str, int, float))):
                return f"{where} has the key {k!r:.40}, a {type(k).__name__}"
            found = not_json(v, f"{where}[{k!r:.40}]", depth + 1)
            if found:
                return found
        return None
    name = type(value).__name__
    return None if depth >= 100 else f"{where} is {'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def check_name(name: Any, who: str, *, blank: bool = True) -> None:
    """A ``name=`` is text: the panes, the journal and a watchpoint call the step by it. A number
    (``loop(name=7)``) loaded, and its events were refused as they reached the app and the journal,
    which then no replay, diff or re-execution could read whole. ``blank``: an empty one may stand
    for the default (an agent's or workflow's class name)."""
    if name is None or (isinstance(name, str) and (blank or name.strip())):
        return
    shown = "empty" if isinstance(name, str) else f"{type(name).__name__} {name!r:.60}"
    raise ConfigError(f"{who}: name= is the text the panes and the journal call it by, such as "
                      f"name=\"revisao\", not {shown}")


def check_class(obj: Any, decorator: str, how: str) -> None:
    """``decorator`` is put on a class; on anything else, say where and what to write."""
    if isinstance(obj, type):
        return
    name = getattr(obj, "__name__", None) or repr(obj)
    file, line = where(obj)
    at = f"{file}:{line}: " if file and line else ""
    kind = "a function" if inspect.isfunction(obj) or inspect.ismethod(obj) else type(obj).__name__
    raise ConfigError(f"{at}{decorator} decorates a class, and {name} is {kind}: write `class {name}:` {how}")


def check_hooks(cls: type) -> None:
    """A hook name bound to something that cannot be called (``after_response = "UPPER"``, a
    property) would be skipped in silence: refuse it, naming the agent and the hook. An async
    ``__init__`` would make a coroutine, not the agent."""
    if inspect.iscoroutinefunction(getattr(cls, "__init__", None)):
        raise ConfigError(f"@agent {cls.__name__}: __init__ is async, and Python cannot await a constructor; "
                          "make it a plain def (set-up that awaits belongs in before_prompt)")
    for hook in (*HOOKS, "run"):
        found = inspect.getattr_static(cls, hook, None)
        if found is None:
            continue
        if isinstance(found, property) or not callable(getattr(cls, hook, None)):
            what = "a property" if isinstance(found, property) else f"{type(found).__name__} {found!r}"
            raise ConfigError(f"@agent {cls.__name__}: {hook} is {what}, not a method; flowtui calls "
                              f"{hook} as a method: write def {hook}(self, ...)")
        _check_takes(cls, hook, found)
        check_returns(getattr(cls, hook), f"@agent {cls.__name__}: {hook}", "its value (a str, or None)")


def check_returns(fn: Any, who: str, what: str) -> None:
    """A generator function (``yield`` in a hook or tool) returns a generator, never the value it
    yields: the model would be sent ``<generator object ...>``."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ConfigError(f"{who} yields, so calling it makes a generator, not a result: return {what} "
                          "instead (join the pieces it yields)")


# What flowtui passes each hook (a hook may take fewer: the first ones are passed).
HOOK_ARGS = {"before_prompt": ("prompt", "ctx"), "before_tool": ("call", "ctx"), "after_tool": ("result", "ctx"),
             "after_response": ("response", "ctx"), "on_error": ("error", "ctx"), "run": ("input", "ctx")}


def needs_more(fn: Any, passed: tuple[str, ...], *, skip_first: bool = False) -> list[str]:
    """The parameters of ``fn`` it cannot do without that a call with ``passed`` leaves unfilled
    (none when its signature cannot be read: trusted). ``skip_first``: a plain method's ``self``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read: trust it
        return []
    if skip_first and params:
        params = params[1:]
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                                             p.POSITIONAL_OR_KEYWORD)]
    keyword = [p.name for p in params if p.default is p.empty and p.kind is p.KEYWORD_ONLY]
    return required[len(passed):] + keyword


def needs_more_said(fn: Any, extra: list[str], call: str, passed: tuple[str, ...], *, skip_first: bool = False) -> str:
    """What to say of ``fn``, called as ``call(passed...)``, needing ``extra`` too: taken by keyword only (after
    ``*``: flowtui passes in order) where taking out the ``*`` would do, or not passed at all.
    ``until=lambda ctx, *, s: ...`` was said to need s, "which flowtui does not pass: it calls until(ctx, s)"."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1 if skip_first else 0:]
    except (TypeError, ValueError):
        params = []
    keyword = {p.name for p in params if p.kind is p.KEYWORD_ONLY}
    in_order = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if set(extra) <= keyword and len(in_order) + len(extra) <= len(passed):
        return (f"takes {', '.join(extra)} by keyword only (after *), and flowtui passes them in order: it calls "
                f"{call}({', '.join(passed)}); take out the *")
    return (f"needs {', '.join(extra)}, which flowtui does not pass: it calls {call}({', '.join(passed)}); give "
            f"{extra[0]} a default or take it out")


def _check_takes(cls: type, hook: str, found: Any) -> None:
    """A hook that needs more than flowtui passes would fail at its first call, mid-run: said at import."""
    passed = HOOK_ARGS[hook]
    try:
        marked = [p for p in inspect.signature(getattr(cls, hook)).parameters.values() if is_marker(p.default)]
    except (TypeError, ValueError):
        marked = []
    at = where(found)  # (said at the hook's def, not at the class's decorator)
    if marked:
        p = marked[0]
        raise ConfigError(f"@agent {cls.__name__}: {hook} parameter {p.name!r} is marked {p.default!r}, but "
                          f"hooks are not injected: flowtui calls {hook}({', '.join(passed)}). Take the state in "
                          f"__init__ (def __init__(self, s: YourState = State()): self.s = s) and read self.s", at=at)
    if inspect.isfunction(found):
        _check_self(cls, hook, found, passed)
    # (a functools.partialmethod takes self too: it was refused as needing ctx, which flowtui does pass)
    method = inspect.isfunction(found) or isinstance(found, functools.partialmethod)
    extra = needs_more(getattr(cls, hook), passed, skip_first=method)
    if extra:
        said = needs_more_said(getattr(cls, hook), extra, hook, passed, skip_first=method)
        raise ConfigError(f"@agent {cls.__name__}: {hook} {said}", at=at)


def _check_self(cls: type, hook: str, fn: Any, passed: tuple[str, ...]) -> None:
    """A hook written without ``self`` gets the agent where its first parameter goes, and every other
    one shifted (``def after_response(response, ctx)``: response is the agent, ctx the response)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return
    names = [p.name for p in params]
    if names and (names[0] == "self" or not (names[0] in passed or ("ctx" in names and len(names) <= len(passed)))):
        return  # (def after_response(this, response, ctx) is a method too)
    if any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values()):
        return  # (*args takes whatever comes)
    raise ConfigError(f"@agent {cls.__name__}: {hook}({', '.join(names)}) has no self, so the agent would be "
                      f"passed as {names[0] if names else 'its first argument'}: write def {hook}(self"
                      f"{', ' if names else ''}{', '.join(names)})", at=where(fn))


def check_provider(provider: Any, agent: str) -> None:
    if isinstance(provider, Provider) or (isinstance(provider, type) and issubclass(provider, Provider)):
        cls = provider if isinstance(provider, type) else type(provider)
        if not inspect.iscoroutinefunction(cls.complete):
            raise ConfigError(f"{agent}: @agent(provider={cls.__name__}): {cls.__name__}.complete must be "
                              "async def complete(self, request) (the engine awaits it)")
        return
    what = ("must be a Provider class or instance (e.g. ScriptedProvider, FunctionProvider, "
            "LiteLLMProvider) or a function of no arguments returning one")
    if isinstance(provider, type) or not callable(provider):
        raise ConfigError(f"{agent}: @agent(provider=...) {what}, got {provider!r}")
    try:
        required = [p.name for p in inspect.signature(provider).parameters.values()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        required = []
    if required:
        raise ConfigError(f"{agent}: @agent(provider=...) {what}; this function needs {', '.join(required)}")
