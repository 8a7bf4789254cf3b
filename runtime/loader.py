"""Loading a flow file: ``flows/revisao.py[:RevisaoWorkflow]`` → a bootstrapped App.

Every way a flow file can fail to load becomes one :class:`FlowLoadError`
naming the file, the line and the class: a syntax error, an exception while
importing, no workflow, two workflows without ``:Name``, a missing prompt
file, an injection error.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from flowtui.runtime.context import FLOW_MODULES
from flowtui.runtime.errors import FlowLoadError, FlowtuiError, deepest_user_frame, shown_path

_loaded = 0


def split_target(target: str) -> tuple[Path, str | None]:
    """``"flows/x.py:Name"`` → (path, "Name"). A file that exists under the whole name (``a:b.py``) is
    that file. ``"flows/x.py:"`` names the class ``""`` (refused by :func:`find_workflow`, not taken for
    no class: a name the shell or a script left out)."""
    path, sep, name = target.rpartition(":")
    if sep and path and not name.startswith(("\\", "/")) and not Path(target).is_file():
        return Path(path), name
    return Path(target), None


def folder_problem(path: Path) -> str:
    """What to say when the flow given is folder ``path``: the .py files it holds, and to name one."""
    found = sorted(p.name for p in path.glob("*.py") if p.is_file())
    holds = f" (it holds {', '.join(found[:5])}{', ...' if len(found) > 5 else ''})" if found else \
        " (it holds no .py file)"
    return (f"is a folder, not a flow file{holds}; name the .py file that defines the @workflow, "
            f"e.g. {path / (found[0] if found else 'flow.py')}")


def _user_frame(exc: BaseException, file: Path) -> tuple[int | None, str | None]:
    """The deepest traceback line inside the flow file, and its function name."""
    line = func = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == file:
            line, func = frame.lineno, frame.name
    return line, func


def load_module(path: Path) -> Any:
    """Import the flow file as a fresh module (a reload gets new classes)."""
    global _loaded
    file = path.resolve()
    if file.is_dir():
        raise FlowLoadError(folder_problem(path), file=str(path))
    if not file.is_file():
        if file.exists():  # reading a pipe or a device may never end
            raise FlowLoadError("is a pipe or a device, not a flow file; give the .py file of the flow",
                                file=str(path))
        raise FlowLoadError(f"no such flow file; check the path (resolved to {file})", file=str(path))
    _loaded += 1
    name = f"flowtui_flow_{file.stem}_{_loaded}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise FlowLoadError("not a Python file", file=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    FLOW_MODULES[name] = file.stem  # (a repr of one of its objects names the file, not this name)
    from flowtui.runtime.providers._litellm import offline_price_map

    offline_price_map()  # a flow that imports litellm itself
    added = str(file.parent)
    if added not in sys.path:
        sys.path.insert(0, added)  # so a flow can import its sibling modules
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        if not (exc.filename and Path(exc.filename).is_file()):  # raised by code (a `raise`, a compile() of a
            raise _raised(exc, path, file) from exc  # string), not a file that would not parse
        if Path(exc.filename).resolve() != file:  # in a module the flow imports: that one
            raise FlowLoadError(f"{_syntax(exc)}{_imported_by(exc, path, file)}",
                                file=shown_path(exc.filename), line=exc.lineno) from None
        raise FlowLoadError(_syntax(exc), file=str(path), line=exc.lineno) from None
    except FlowLoadError as exc:
        sys.modules.pop(name, None)
        if exc.file and Path(exc.file).resolve() == file:
            exc.file = str(path)
        elif exc.file:  # in a module the flow imports
            exc.file, exc.message = shown_path(exc.file), exc.message + _imported_by(exc, path, file)
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        raise _raised(exc, path, file) from exc  # --debug shows the flow's own traceback
    return module


def _raised(exc: Exception, path: Path, file: Path) -> FlowLoadError:
    """What the flow's import raised, said where it was raised (the flow's line, or the module's it imports)."""
    text = "" if isinstance(exc, SyntaxError) and exc.msg is None else str(exc)  # (str() of one says "None")
    line, func = _user_frame(exc, file)
    fault = file
    deepest = deepest_user_frame(exc)
    if deepest is not None and Path(deepest[0]).resolve() != file:  # in a module the flow imports
        fault, line, func = Path(deepest[0]).resolve(), deepest[1], deepest[2]
    if isinstance(exc, FlowtuiError):  # a decorator's or loop()'s own message: where it is, said once
        said_at = getattr(exc, "at", None)  # the def of a hook at fault, below its class's decorator
        if said_at and said_at[0] and said_at[1]:
            fault, line = Path(said_at[0]).resolve(), said_at[1]
        at = re.match(r"^(.+?):(\d+): ", text)
        if at and Path(at[1]).is_file():
            if Path(at[1]).resolve() != file:
                fault, line = Path(at[1]).resolve(), int(at[2])
            text = text[at.end():]
        message = text
    elif isinstance(exc, ImportError) and exc.name == "flowtui" \
            and (wrong := re.match(r"cannot import name '(\w+)' from 'flowtui'", text)):
        message = _not_exported(wrong[1])
    else:
        where_ = f" (in {func})" if func and func != "<module>" else ""
        message = f"{type(exc).__name__} while importing{where_}: {text}" if text.strip() else \
            f"{type(exc).__name__} while importing{where_} (raised with no message)"
        if isinstance(exc, NameError):
            message += _unknown_name(exc)
        elif isinstance(exc, TypeError):
            message += _unknown_keyword(exc)
    if fault != file:
        return FlowLoadError(message + _imported_by(exc, path, file), file=shown_path(str(fault)), line=line)
    return FlowLoadError(message, file=str(path), line=line)


def _syntax(exc: SyntaxError) -> str:
    """A syntax error as Python shows it: the line, and a caret under where it was found."""
    msg = str(exc.msg or "invalid syntax")
    said = f"syntax error: {msg}"
    if "codec can't decode" in msg:  # a file saved in Latin-1 or cp1252
        return said + "; save the file as UTF-8"
    exc = _in_characters(exc)
    text = exc.text.rstrip("\r\n") if isinstance(exc.text, str) else ""
    if not text.strip() or len(text) > 200 or exc.offset is None:
        return said
    shown = text.lstrip()  # (without its indent; a tab inside it as one space, so the caret stays under it)
    column = exc.offset - (len(text) - len(shown))
    return f"{said} (column {exc.offset})\n    {shown.replace(chr(9), ' ')}\n    {' ' * max(column - 1, 0)}^"


def _in_characters(exc: SyntaxError) -> SyntaxError:
    """The error found again in the file's text: compiled from its bytes (as an import does), Python gives
    some errors' column in bytes, so a line with an accent before the fault put the caret past it."""
    try:
        compile(Path(exc.filename or "").read_text(encoding="utf-8"), exc.filename or "", "exec")
    except SyntaxError as again:
        if (again.lineno, again.msg) == (exc.lineno, exc.msg):
            return again
    except (OSError, ValueError):
        pass
    return exc


def _imported_by(exc: BaseException, path: Path, file: Path) -> str:
    """`` (imported by flows/x.py:2)``: the flow file's line that led to a fault in another module."""
    line, _ = _user_frame(exc, file)
    return f" (imported by {path}{f':{line}' if line else ''})"


def find_workflow(module: Any, path: Path, name: str | None) -> type:
    from flowtui.runtime.decorators import WorkflowSpec, spec_of
    found = {obj.__name__: obj for obj in vars(module).values()
             if isinstance(obj, type) and isinstance(spec_of(obj), WorkflowSpec) and obj.__module__ == module.__name__}
    if not found:  # a flow may import its workflow from a sibling module
        found = {obj.__name__: obj for obj in vars(module).values()
                 if isinstance(obj, type) and isinstance(spec_of(obj), WorkflowSpec)}
    if name is not None:
        if not name.strip():
            raise FlowLoadError(f"nothing follows ':' where the @workflow class's name goes; name one of "
                                f"{', '.join(sorted(found)) or 'none'}, or leave ':' out", file=str(path), cls=name,
                                choices=tuple(sorted(found)))
        if name not in found:
            raise FlowLoadError(f"no @workflow class named {name!r}; the file defines: "
                                f"{', '.join(sorted(found)) or 'none'}", file=str(path), cls=name,
                                choices=tuple(sorted(found)))
        return found[name]
    if not found:
        raise FlowLoadError("no @workflow class found; decorate one with @workflow(steps=[...])", file=str(path))
    if len(found) > 1:
        # one that the others name among their steps is not the one to run (it is a mistake, said then)
        named = {id(s) for cls in found.values() for s in _steps_of(spec_of(cls).steps)}
        top = [cls for cls in found.values() if id(cls) not in named]
        if len(top) == 1:
            return top[0]
        names = sorted(found)
        # (each named: the first in order was the suggestion, and a parent's child came first, run alone)
        runs = " or ".join(f"{path}:{name}" for name in names[:4]) + (" …" if len(names) > 4 else "")
        raise FlowLoadError(f"{len(found)} workflows ({', '.join(names)}); name the one to run: {runs}",
                            file=str(path), choices=tuple(names))
    return next(iter(found.values()))


def _steps_of(steps: Any) -> list[Any]:
    """Every step, loops' and parallel blocks' walked into."""
    out = []
    for step in steps:
        inner = getattr(step, "steps", None)
        if isinstance(inner, tuple) and not isinstance(step, type):
            out += _steps_of(inner)
        else:
            out.append(step)
    return out


def load_flow(target: str, **bootstrap_config: Any):
    """Load ``FILE[:Class]`` and bootstrap it. Raises :class:`FlowLoadError`, or an
    :class:`~flowtui.runtime.errors.OptionError` for a file ``replies``, ``replay`` or ``record`` names."""
    from flowtui.runtime.app import bootstrap
    from flowtui.runtime.markers import where

    path, name = split_target(target)
    # Each option's file is read once, first, and a fault in it said as the option's, not the workflow's
    # (--replay was said at the workflow's line, unnamed); --record's place is fixed before the flow's
    # import may change folder.
    for key in ("replies", "replay", "record"):
        given = bootstrap_config.get(key)
        if isinstance(given, (str, Path)):
            bootstrap_config[key] = _option_file(key, given)
    module = load_module(path)
    cls = find_workflow(module, path, name)
    try:
        return bootstrap(cls, **bootstrap_config)
    except FlowLoadError as exc:
        if exc.file and Path(exc.file).resolve() == path.resolve():
            exc.file = str(path)
        raise
    except FlowtuiError as exc:
        file, line = where(cls)
        raise FlowLoadError(str(exc), file=str(path), line=line, cls=cls.__name__) from None


def _option_file(key: str, file: str | Path) -> Any:
    """The replies, or the cassette, the option ``--KEY`` names; a fault in its file raised as an
    :class:`OptionError` (its message starts with the option)."""
    from flowtui.runtime.errors import ConfigError, OptionError

    option = f"--{key}"
    try:
        if key == "replies":
            from flowtui.runtime.providers.scripted import load_replies

            return load_replies(file, base=Path.cwd(), who=option)
        from flowtui.runtime.providers.cassette import Cassette

        return Cassette.load(file) if key == "replay" else Cassette.new(file)
    except ConfigError as exc:
        said = str(exc)
        raise OptionError(said if said.startswith(option) else f"{option}: {said}", option=option,
                          file=str(file)) from None


def _unknown_name(exc: NameError) -> str:
    """What Python's own traceback suggests for a name not defined (``@agnet``: did you mean agent?), and
    the import a name flowtui exports needs (``@tool`` not imported)."""
    import builtins
    import difflib

    import flowtui

    name = getattr(exc, "name", None)
    if not isinstance(name, str):
        return ""
    if name in flowtui.__all__:
        return f"; import it: from flowtui import {name}"
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    own = set(tb.tb_frame.f_globals) | set(tb.tb_frame.f_locals) if tb is not None else set()
    for known in (own, set(flowtui.__all__), set(dir(builtins))):  # the flow's own names first (agent, not anext)
        close = difflib.get_close_matches(name, [n for n in known if not n.startswith("__")], n=1)
        if close:
            return f"; did you mean {close[0]}?" + (f" (from flowtui import {close[0]})"
                                                   if close[0] in flowtui.__all__ and close[0] not in own else "")
    return ""


def _unknown_keyword(exc: TypeError) -> str:
    """``ContextWindow(max_token=100)``: Python names the keyword, not the one meant; the parameter it is
    close to, and the parameters the callable takes (found from the name Python gives it, in the frame
    that made the call)."""
    import difflib
    import inspect

    said = re.match(r"([A-Za-z_][\w.]*)\(\) got an unexpected keyword argument '(\w+)'$", str(exc))
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if said is None or tb is None:
        return ""
    first, *rest = said[1].split(".")
    frame = tb.tb_frame
    target = frame.f_locals.get(first, frame.f_globals.get(first))
    bound = False  # called on its class or an object of it: its first parameter (self, cls) is given
    try:
        for part in rest:
            owner, target = target, inspect.getattr_static(target, part)
            bound = not inspect.ismodule(owner) and not isinstance(target, staticmethod)
            if isinstance(target, (staticmethod, classmethod)):
                target = target.__func__
        known = [p.name for p in inspect.signature(target).parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (AttributeError, TypeError, ValueError):  # (a name the frame does not hold; no signature)
        return ""
    if bound and inspect.isfunction(target):
        known = known[1:]
    if not known:
        return ""
    close = difflib.get_close_matches(said[2], known, n=1)
    return (f"; did you mean {close[0]}=?" if close else "") + f" (it takes {', '.join(k + '=' for k in known)})"


def _not_exported(name: str) -> str:
    """``from flowtui import agnet``: Python's message names where flowtui is installed, and no name
    that is."""
    import difflib

    import flowtui

    close = difflib.get_close_matches(name, flowtui.__all__, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return (f"flowtui has no {name!r} to import; {hint}what it exports is listed by "
            "python -c 'import flowtui; print(flowtui.__all__)'")
