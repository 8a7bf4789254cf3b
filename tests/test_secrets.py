"""No credential is ever written: the journal, `--json`, the snapshot, the cassette, stderr, stdout
and `--debug` tracebacks hold none, whether the model, a tool or an exception echoes it, whatever
characters it holds; files are created owner-only."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from flowtui.runtime.secrets import MARK, Redactor, found, redact, redact_data, restore, secret_values

ROOT = Path(__file__).resolve().parents[1]

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----")
ENV = {
    "OPENAI_API_KEY": "sk-test-OPENAIKEY1234567890",
    "ANTHROPIC_API_KEY": "anthropic-key-0987654321zyx",
    "DB_PASSWORD": 'pa"ss\\word-with"quote',
    "SSH_PRIVATE_KEY": PEM,
    "HF_TOKEN": "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "DATABASE_URL": "postgres://admin:Sup3rS3cretPW@db.internal/x",
}
# Shapes that are credentials whatever they are called (none of these is in the environment).
SHAPES = {
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "aws_id": "AKIAIOSFODNN7EXAMPLE",
    "hf": "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa987654",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "openai": "sk-proj-abcdefghijklmnop123456",
}
# Pieces of a key are credentials too: a tool printing a key's end, an error quoting one split in two.
PIECES = [ENV["OPENAI_API_KEY"][8:], ENV["AWS_SECRET_ACCESS_KEY"][7:]]
SECRET_PARTS = [*ENV.values(), *SHAPES.values(), *PIECES, "Sup3rS3cretPW",
                "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"]

FLOW = '''
import os
from pydantic import BaseModel
from flowtui import AgentContext, Context, FunctionProvider, Input, State, agent, tool, workflow

NAMES = {names!r}
SHAPES = {shapes!r}

def everything():
    aws = os.environ["AWS_SECRET_ACCESS_KEY"]
    return " | ".join([os.environ[n] for n in NAMES] + list(SHAPES.values())
                      + ["Authorization: Bearer " + SHAPES["bearer"], "url " + os.environ["DATABASE_URL"],
                         "the key ends " + os.environ["OPENAI_API_KEY"][8:], "split " + aws[:7] + " " + aws[7:]])

class S(BaseModel):
    note: str = ""
    notes: list[str] = []

class Args(BaseModel):
    text: str = ""

@tool(name="echo", description="echo", schema=Args)
class Echo:
    def execute(self, args: Args = Input(), ctx: AgentContext = Context(), s: S = State()):
        ctx.leak = everything()
        s.note = everything()
        s.notes.append(os.environ["DB_PASSWORD"])
        ctx.state.append("memory", everything())
        ctx.state.append("tasks", os.environ["SSH_PRIVATE_KEY"])
        return "tool says " + everything()

@tool(name="boom", description="raises", schema=Args)
class Boom:
    def execute(self, args: Args = Input()):
        raise RuntimeError("tool failed with " + everything())

def model(messages, tools):
    if not any(m.role == "tool" for m in messages):
        return {{"content": "model says " + everything(),
                "tool_calls": [{{"name": "echo", "args": {{"text": everything()}}}},
                               {{"name": "boom", "args": {{"text": os.environ["OPENAI_API_KEY"]}}}}]}}
    return "final " + everything()

@agent(provider=FunctionProvider(model), prompt="p", tools=[Echo, Boom])
class A:
    pass

class Crash:
    def after_response(self, response, ctx):
        raise RuntimeError("hook crashed with " + everything())

@agent(provider=FunctionProvider(model), prompt="p", tools=[Echo, Boom])
class B(Crash):
    pass

@workflow(steps=[A, A], state=S)
class W:
    pass

@workflow(steps=[A, B], state=S)
class Failing:
    pass
'''


@pytest.fixture
def leaky(tmp_path) -> Path:
    flow = tmp_path / "leaky.py"
    flow.write_text(FLOW.format(names=list(ENV), shapes=SHAPES))
    return flow


def flowtui(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **ENV}
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def leaks(text: str) -> list[str]:
    return [s[:12] for s in SECRET_PARTS if s in text]


def test_no_artefact_of_a_run_holds_a_credential(leaky, tmp_path):
    journal, snap, cassette = tmp_path / "j.jsonl", tmp_path / "snap.toml", tmp_path / "c.jsonl"
    res = flowtui("run", f"{leaky}:W", "--input", "go " + ENV["DB_PASSWORD"], "--journal", str(journal),
                  "--snapshot-out", str(snap), "--record", str(cassette), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    js = flowtui("run", f"{leaky}:W", "--input", "go", "--json", "--no-journal", cwd=tmp_path)
    for name, text in [("stdout", res.stdout), ("stderr", res.stderr), ("--json", js.stdout),
                       ("journal", journal.read_text()), ("snapshot", snap.read_text()),
                       ("cassette", cassette.read_text())]:
        assert leaks(text) == [], name
        assert MARK in text, name
    assert "Bearer [redacted]" in journal.read_text() and "postgres://admin:[redacted]@db.internal" in res.stdout
    for path in (journal, snap, cassette):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # what matching needs survives: the redacted cassette replays the same run
    again = flowtui("run", f"{leaky}:W", "--input", "go " + ENV["DB_PASSWORD"], "--replay", str(cassette),
                    "--no-journal", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == res.stdout


def test_a_failing_run_and_its_debug_traceback_hold_no_credential(leaky, tmp_path):
    res = flowtui("run", f"{leaky}:Failing", "--input", "go", "--debug", "--journal", str(tmp_path / "j.jsonl"),
                  cwd=tmp_path)
    assert res.returncode == 1
    assert "hook crashed with" in res.stderr and "Traceback" in res.stderr
    assert leaks(res.stderr + res.stdout + (tmp_path / "j.jsonl").read_text()) == []


def test_a_flow_failing_at_import_shows_no_credential(tmp_path):
    flow = tmp_path / "bad.py"
    flow.write_text('import os\nraise RuntimeError("cannot start with " + os.environ["OPENAI_API_KEY"])\n')
    res = flowtui("run", str(flow), "--debug", cwd=tmp_path)
    assert res.returncode == 2 and "cannot start with [redacted]" in res.stderr
    assert leaks(res.stderr) == []


def test_default_journals_are_unique_and_private(tmp_path):
    flow = tmp_path / "quick.py"
    flow.write_text(textwrap.dedent('''
        from flowtui import FunctionProvider, agent, workflow

        @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
        class A:
            pass

        @workflow(steps=[A])
        class Quick:
            pass
    '''))
    procs = [subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                               "--input", f"run {i}"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(12)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    runs = tmp_path / ".flowtui" / "runs"
    files = sorted(runs.iterdir())
    assert len(files) == 12  # one file per run, whatever second they started in
    for f in files:
        lines = f.read_text().splitlines()
        assert sum(1 for line in lines if '"type":"run.start"' in line) == 1
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / ".flowtui").stat().st_mode) == 0o700


# --- the rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,kept", [
    ("key " + SHAPES["github"], "key [redacted]"),
    ("pat " + SHAPES["github_pat"], "pat [redacted]"),
    ("slack " + SHAPES["slack"], "slack [redacted]"),
    ("aws " + SHAPES["aws_id"] + " ok", "aws [redacted] ok"),
    ("hf " + SHAPES["hf"], "hf [redacted]"),
    ("jwt " + SHAPES["bearer"], "jwt [redacted]"),
    ("Authorization: Bearer abc.DEF-ghi_123", "Authorization: Bearer [redacted]"),
    # the sentence's full stop stays (a server's "Incorrect API key provided: Bearer sk-....  You can find...")
    ("provided: Bearer tok1234abcd5678.  You can", "provided: Bearer [redacted].  You can"),
    ("dsn postgres://admin:hunter22@db/x", "dsn postgres://admin:[redacted]@db/x"),
    ("before\n" + PEM + "\nafter", "before\n[redacted]\nafter"),
    # glued to what comes before: JSON's escaped newline, a colour code, a name
    (json.dumps("keys:\n" + SHAPES["openai"] + "\n" + SHAPES["github"]), '"keys:\\n[redacted]\\n[redacted]"'),
    ("\x1b[33m" + SHAPES["openai"] + "\x1b[0m", "\x1b[33m[redacted]\x1b[0m"),
    # a key without a digit after a colour code (one with a digit was caught glued to anything)
    ("\x1b[31msk-abcdefghijklmnopqrstuvwx \x1b[1;32mpk-abcdefghijklmnop\x1b[m",
     "\x1b[31m[redacted] \x1b[1;32m[redacted]\x1b[m"),
    ("token_" + SHAPES["github"] + " aws_" + SHAPES["aws_id"] + " x_" + SHAPES["bearer"] + " my" + SHAPES["hf"],
     "token_[redacted] aws_[redacted] x_[redacted] my[redacted]"),
    ("dsn postgres://admin:p4ss/w0rd@db/x", "dsn postgres://admin:[redacted]@db/x"),
    # a query parameter named like a credential (an api_base "http://gw/v1?key=..." was said on stderr and journaled)
    ("at http://127.0.0.1:9/v1?key=zzqqhunter3: nothing listens", "at http://127.0.0.1:9/v1?key=[redacted]: nothing listens"),
    ("https://gw/v1?a=1&access_token=ya29.abc_def-ghi#top&x-api-key=Zz0-9aa",
     "https://gw/v1?a=1&access_token=[redacted]#top&x-api-key=[redacted]"),
    ("GET /blob?sv=2024&Signature=AbCdEf%2B123 HTTP/1.1", "GET /blob?sv=2024&Signature=[redacted] HTTP/1.1"),
    ("https://shop/?monkey=bananas&q=keyword&turkey=roasted", "https://shop/?monkey=bananas&q=keyword&turkey=roasted"),
    ("sk-abc", "sk-abc"),  # too short to be a key
    # Markdown around a key stays (the closing ** was taken for part of it); a provider's masked key goes
    ("**" + SHAPES["openai"] + "**", "**[redacted]**"),
    ("Incorrect API key provided: sk-proj-********************abcd.", "Incorrect API key provided: [redacted]."),
    # words that only look like the start of one
    ("desk-lamp-holder-with-a-long-name and task-management-system-overview",
     "desk-lamp-holder-with-a-long-name and task-management-system-overview"),
    ("with_hf_tokenizer_abcdefghijklmnop", "with_hf_tokenizer_abcdefghijklmnop"),
    ("https://example.com:443/users/@alice", "https://example.com:443/users/@alice"),
    ("see https://example.com/path and user@host", "see https://example.com/path and user@host"),
])
def test_credential_shapes(text, kept):
    assert redact(text, []) == kept


def test_environment_values_are_credentials_line_by_line(monkeypatch):
    monkeypatch.setenv("SSH_PRIVATE_KEY", PEM)
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to tell from ordinary text
    secrets = secret_values()
    line = PEM.splitlines()[1]
    assert line in secrets and "abc" not in secrets
    assert redact(f"a tool printed one line: {line}", secrets) == "a tool printed one line: [redacted]"


def test_a_variable_named_like_a_credential_that_holds_a_place_is_no_credential(monkeypatch, tmp_path):
    """litellm sets TIKTOKEN_CACHE_DIR to its own folder when imported: the path was taken for a key,
    hidden wherever it showed, and a streamed reply was held back at every three letters of it."""
    key_file = tmp_path / "service-account.json"
    key_file.write_text("{}")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/opt/tokenizers/cache")
    monkeypatch.setenv("HF_TOKEN_PATH", "/home/someone/.cache/hf/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    monkeypatch.setenv("DEPLOY_TOKEN", "/not/a/place/but-a-token-shaped-so")  # no such file: a credential
    secrets = secret_values()
    assert "/opt/tokenizers/cache" not in secrets and "/home/someone/.cache/hf/token" not in secrets
    assert str(key_file) not in secrets
    assert "/not/a/place/but-a-token-shaped-so" in secrets
    assert redact(f"cached in /opt/tokenizers/cache, key file {key_file}", secrets) == \
        f"cached in /opt/tokenizers/cache, key file {key_file}"


def test_a_credential_value_url_encoded_is_a_credential(monkeypatch):
    # a tool that builds a URL puts the key in its query string, encoded
    monkeypatch.setenv("VENDOR_API_KEY", "vK8/q+Zp=Lr0 tWm")
    secrets = secret_values()
    said = "GET https://api.example/v1?key=vK8%2Fq%2BZp%3DLr0%20tWm and ?k=vK8%2Fq%2BZp%3DLr0+tWm"
    assert redact(said, secrets) == "GET https://api.example/v1?key=[redacted] and ?k=[redacted]"


def test_a_piece_of_a_long_credential_is_redacted_and_restored_in_place():
    key = "sk-test-abcdefghijklmnop1234567890XYZ"
    said = f"tail {key[8:]} / split {key[:6]} {key[6:]} / whole {key} / short {key[10:25]}"
    shown = redact(said, [key])
    assert shown == f"tail {MARK} / split {key[:6]} {MARK} / whole {MARK} / short {key[10:25]}"
    # (a run of 19 characters or more is always found; this 15 is not, and is no key on its own)
    assert found(said, [key]) == [key[8:], key[6:], key]
    edited = shown.replace("tail", "the tail")
    assert restore(edited, said, [key]) == "the " + said  # each credential back where it was
    assert redact("a 24-character password with spaces is matched whole only", ["correct horse battery stap"]) \
        == "a 24-character password with spaces is matched whole only"


def test_redact_data_walks_keys_and_values():
    data = {"k": ["x " + SHAPES["hf"], {SHAPES["slack"]: 3}], "n": 1}
    assert redact_data(data, []) == {"k": ["x [redacted]", {"[redacted]": 3}], "n": 1}


def test_restore_puts_back_the_credentials_left_untouched():
    original = f"use {SHAPES['openai']} then Bearer abcdefghij"
    edited = redact(original, []).replace("use", "now use")
    assert restore(edited, original, []) == f"now use {SHAPES['openai']} then Bearer abcdefghij"
    assert found(original, []) == [SHAPES["openai"], "abcdefghij"]


def test_each_credential_goes_back_where_it_was_whatever_was_deleted_around_it():
    # filled in order, a deleted [redacted] let the next credential take its place: the panes said
    # 'new=[redacted]' while the model got the old key
    old, new = "sk-proj-" + "A" * 24, "sk-proj-" + "B" * 24
    original = f"hello old={old} new={new}"
    edited = redact(original, []).replace(" old=[redacted]", "")
    assert edited == "hello new=[redacted]"
    assert restore(edited, original, []) == f"hello new={new}"
    # a text that held '[redacted]' as it is keeps it there; the credential goes back to its own place
    held = f"literal [redacted] then {old}"
    assert restore(redact(held, []) + " X", held, []) == f"literal [redacted] then {old} X"
    # one typed by the person stands for nothing
    one = f"k={old} end"
    assert restore("k=[redacted] end and [redacted] too", one, []) == f"k={old} end and [redacted] too"


def test_an_edit_over_shown_control_characters_puts_each_back_where_it_was():
    from flowtui.runtime.inert import unvisible, visible

    original = "A \u241b B \x1b C"  # a literal picture of ESC, then a real ESC
    assert visible(original) == "A ␛ B ␛ C"
    assert unvisible("A ␛ B ␛ C X", original) == "A \u241b B \x1b C X"
    assert unvisible("A B ␛ C", original) == "A B \x1b C"  # the literal one deleted: the real one stays


@given(st.lists(st.sampled_from(["plain ", "x", SHAPES["openai"], SHAPES["hf"], "[redacted]", " "]), max_size=8))
def test_restore_gives_an_untouched_text_back_whole(pieces):
    original = "".join(pieces)
    assert restore(redact(original, []), original, []) == original


@given(st.text(), st.sampled_from(list(ENV.values())))
def test_a_value_is_redacted_wherever_it_sits_in_any_text(prefix, secret):
    text = prefix + secret + prefix
    out = redact(text, sorted(ENV.values(), key=len, reverse=True))
    assert secret not in out


@given(st.text(alphabet=st.characters(), max_size=50))
def test_journal_lines_never_hold_a_value_whatever_it_is_next_to(noise):
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.secrets import Redactor

    secret = ENV["DB_PASSWORD"]
    event = CtxSet(seq=1, ts=0, run_id="r", name="x", value={"value": noise + secret + noise, "list": [secret]})
    line = json.loads(encode_event(event, Redactor([secret])))["value"]
    assert secret not in line["value"] and line["list"] == [MARK]


def test_a_long_text_is_redacted_alike_each_time_and_for_the_secrets_given():
    """A long text redacted once is remembered, never for other secrets or another text."""
    from flowtui.runtime.secrets import redact

    key = "sk-proj-" + "Ab3d" * 12
    text = ("x" * 100 + " hunter2-value " + key + "\n") * 20_000  # 2.5 MB
    plain = redact(text, ())
    assert key not in plain and "hunter2-value" in plain
    assert redact(text, ()) == plain
    hidden = redact(text, ("hunter2-value",))
    assert "hunter2-value" not in hidden and key not in hidden
    other = text.replace("x", "y")
    assert redact(other, ()) == plain.replace("x", "y")


def test_a_credential_code_hands_over_is_redacted_from_then_on_even_where_the_redactor_was_made_before():
    """A key given as api_key=vault.key() (not shaped like one, in no variable) was shown and journaled
    when a server echoed it: only the provider knew it for a credential."""
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.construct import build
    from flowtui.runtime.secrets import Redactor, credentials_given

    import secrets as random_secrets

    key = f"vaultKEY{random_secrets.token_hex(12)}"  # its own: a credential handed over stays for the process
    journal_redactor = Redactor.from_environment()  # made as a run starts, before the provider is made
    event = build(CtxSet, dict(seq=1, ts=0.0, run_id="r", node_id=None, parent_id=None, origin="runtime",
                               name="output", value=f"your key is {key} ok"))
    assert key in encode_event(event, journal_redactor).decode()
    credentials_given({"api_key": key, "model": "openai/gpt-4o-mini", "token_budget": 12})
    again = build(CtxSet, dict(seq=2, ts=0.0, run_id="r", node_id=None, parent_id=None, origin="runtime",
                               name="output", value=f"your key is {key} ok"))
    line = encode_event(again, journal_redactor).decode()
    assert key not in line and "your key is [redacted] ok" in line
    assert journal_redactor.redact(f"the end of it: {key[-20:]}.") == "the end of it: [redacted]."
    assert key in secret_values() and "openai/gpt-4o-mini" not in secret_values()


def test_a_gateway_key_given_in_extra_headers_is_redacted_too():
    """LiteLLMProvider(extra_headers={"X-Gateway-Key": ...}): only string keywords named like a key
    were taken, so a gateway echoing its header had it journaled and printed."""
    from flowtui.runtime.secrets import Redactor, credentials_given

    import secrets as random_secrets

    key, bearer = f"gw{random_secrets.token_hex(12)}", f"Bearer tok{random_secrets.token_hex(10)}"
    redactor = Redactor.from_environment()
    credentials_given({"model": "openai/x", "extra_headers": {"X-Gateway-Key": key, "Authorization": bearer,
                                                              "X-Request-Id": "req-123456789"}})
    assert redactor.redact(f"gateway says {key}; auth {bearer}") == "gateway says [redacted]; auth [redacted]"
    assert "req-123456789" not in secret_values()  # a header not named like a credential stays


async def test_a_tool_error_cut_for_its_node_leaves_no_piece_of_a_key_the_cut_splits(monkeypatch):
    """The node's error is the result's first 200 characters: cut before redaction, a key that the cut
    split showed its first characters (too few for the redactor to know them)."""
    from fakes import call, run_collect, scripted
    from flowtui import agent, tool, workflow
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.secrets import Redactor

    key = "q8Zr2LmX4vNw7KpT9sYd3HfB6"
    monkeypatch.setenv("VAULT_API_KEY", key)

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        raise RuntimeError("x" * (200 - len("Tool fetch failed: ") - 9) + key)

    provider, _ = scripted(call("fetch", url="u"), when_done="done")

    @agent(provider=provider, tools=[fetch])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    _, events, _ = await run_collect(W)
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    line = encode_event(end, Redactor.from_environment()).decode()
    assert key[:9] not in line and end.error.endswith("[redacted]")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_a_stream_redactor_gives_out_no_three_characters_of_a_key_whatever_the_pieces(size):
    """The worker redacts a streamed reply piece by piece for the app, which joins the pieces: a key
    only the flow knows, split over pieces, must never be joined back on screen."""
    from flowtui.runtime.secrets import StreamRedactor

    key = "vaultQ7x9Lm2Pz4Kw8Rt6Yb3Nc"
    said = f"your key is {key} and again {key}! a vault, vaultQ7 alone is no key."
    stream = StreamRedactor()
    pieces = [stream.feed(said[i:i + size], (key,)) for i in range(0, len(said), size)]
    joined = "".join(pieces) + stream.end((key,))
    # at most a key's first two characters went out before it could be told from other text
    assert re.fullmatch(r"your key is (|v|va)\[redacted\] and again (|v|va)\[redacted\]! "
                        r"a vault, vaultQ7 alone is no key\.", joined), joined
    plain = StreamRedactor()
    assert "".join(plain.feed(said[i:i + size], ("zzzzzzzz",)) for i in range(0, len(said), size)) \
        + plain.end(("zzzzzzzz",)) == said


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 100])
def test_a_piece_of_a_key_from_its_middle_is_hidden_in_a_stream_as_in_the_whole_reply(size):
    """The last twelve characters of a key were shown live (redacted in the whole reply only), and where
    the piece completed after part of it went out the preview was garbled ("567890ted] end.")."""
    from flowtui.runtime.secrets import StreamRedactor, redact

    key = "sk-test-1234567890abcdef"
    said = "again sk-test-1234 567890abcdef end, then 1234567890abcdefXYZ."
    stream = StreamRedactor()
    joined = "".join(stream.feed(said[i:i + size], (key,)) for i in range(0, len(said), size)) + stream.end((key,))
    assert "567890ab" not in joined and "ted]" not in joined.replace("[redacted]", ""), joined
    # what went out is the whole reply redacted, but for at most two characters a piece began with
    assert re.fullmatch(r"again (|s|sk)\[redacted\] (|5|56)\[redacted\] end, then (|1|12)\[redacted\]XYZ\.",
                        joined), joined
    assert redact(said, (key,)) == "again [redacted] [redacted] end, then [redacted]XYZ."


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
def test_a_stream_redactor_gives_out_nothing_of_a_key_it_knows_only_by_its_shape(size):
    """A project key longer than the keys the flow knows, streamed a character at a time: once its
    start was redacted, its tail went out in clear ("[redacted]]oINzW9Cr..."), 85 characters of it."""
    from flowtui.runtime.secrets import StreamRedactor, redact

    known = "sk-" + "k" * 48  # the flow's own key, shorter than the one the model says
    other = "sk-proj-" + "oINzW9CrAbyvcQNVWXLq_gx2Ym4Fl55Wj28M0kyI5" * 4
    said = f"foreign {other} end, and sk-x too"
    stream = StreamRedactor()
    out = ""
    for i in range(0, len(said), size):
        out += stream.feed(said[i:i + size], (known,))
        body = out.replace("[redacted]", "\0")
        assert not any(other[j:j + 4] in body for j in range(8, len(other) - 4)), out  # not four of its own
    out += stream.end((known,))
    assert out == redact(said, (known,)) == "foreign [redacted] end, and sk-x too", out


def test_redacting_text_shaped_to_make_the_shapes_backtrack_takes_linear_time():
    """"ask-" * 30,000 (a 120 KB reply) took 212 s through a live run, and minutes in flowtui diff: a
    lookahead scanned to the end of the text at each "sk-". Each text here took seconds to minutes; all
    of them now take well under a second, so a generous bound (in a process of its own, killed when
    it passes) catches the quadratic time without timing anything finely."""
    texts = ["'ask-' * 80_000", "'a.' * 160_000 + ' ://'", "'eyJ' * 100_000", "'desk-' + 'a-' * 160_000",
             "'a://b:' * 50_000", "'eyJ_' * 80_000", "'?key=' * 60_000", "'&' + 'a_' * 150_000 + 'key'",
             "'?api_key=' + 'a' * 300_000 + ':' * 100_000"]
    code = "from flowtui.runtime.secrets import redact\n" + "".join(f"redact({t}, ())\n" for t in texts)
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("size", [1, 3, 7])
def test_a_stream_redacts_a_query_parameters_credential_as_the_whole_text_is(size):
    """The "?key=" went out before the value arrived, and the value was then given out whole, in clear."""
    from flowtui.runtime.secrets import StreamRedactor, redact

    said = "go http://gw/v1?a=1&api_key=abcdef123 now, what? ok & done"
    stream = StreamRedactor()
    out = "".join(stream.feed(said[i:i + size], ()) for i in range(0, len(said), size)) + stream.end(())
    assert out == redact(said, ()) == "go http://gw/v1?a=1&api_key=[redacted] now, what? ok & done"


@pytest.mark.parametrize("command", [
    ["run", "{flow}", "--input", "a", "--input", "{key}"],
    ["run", "{flow}", "--load-timeout", "{key}"],
    ["run", "{flow}", "--bogus", "{key}"],
    ["{flow}", "--model", "a/b", "--model", "{key}"],
])
def test_a_command_line_error_never_prints_a_credential_given_in_it(leaky, tmp_path, command):
    """argparse's own errors quoted the arguments as given: a key pasted as the second --input was printed whole."""
    key = ENV["OPENAI_API_KEY"]
    res = flowtui(*[part.format(flow=leaky, key=key) for part in command], cwd=tmp_path)
    assert res.returncode == 2 and "error:" in res.stderr, res.stderr
    assert key not in res.stderr and "[redacted]" in res.stderr, res.stderr


@pytest.mark.parametrize("text", [
    "see https://h/p?token=abcdef123&a=1", "https://h/p?api_key=abcdef1234", "x?sig=abcdef#frag",
    "x?key=abcdef).", "a?token=abc123. Next", "https://u:pw123456@h/?token=abc123&sig=xyz987 Bearer tok123456789",
    "sk-abcdefghijklmnopqrstuvwx", "postgres://user:hunter2pass@db/x"])
def test_a_redacted_text_redacted_again_is_the_same(text):
    """A recorded tool result given back by a re-execution is redacted again: a query value read
    `[redacted]]`, and the re-executed run differed from its journal there."""
    once = redact(text, [])
    assert MARK in once and redact(once, []) == once


def test_a_credential_across_a_seam_is_found_and_one_on_either_side_is_not_taken_for_one():
    """A long history is encoded part by part, each part looked at alone: what lies across the seam
    between two parts is looked for there (`straddles`), what lies wholly in one part is not."""
    key = "vault-TOKEN-Zx81Qp0aa77LmN3"
    redactor = Redactor([key])
    line = f'{{"a":"{key}"}},{{"b":"x"}}'.encode()
    inside = line.index(key.encode())
    assert [at for at in range(1, len(line)) if redactor.straddles(line, at)] == \
        list(range(inside + 1, inside + len(key)))  # (a mark: the key, or a shape's start such as "sk-")
    assert not redactor.straddles(b"sk-" + b"," + b"sk-", 3) and redactor.straddles(b"xsk-y", 2)


@pytest.mark.parametrize("value", ["GET /v1/items?access_token=Zk39fQpL2mX8",
                                   {"log": ["GET /v1/items?page=2&api_key=Zk39fQpL2mX8 200"]}])
def test_a_query_credential_with_no_url_before_it_is_redacted_in_a_line(tmp_path, value):
    """A request line a tool echoed ("GET /v1/items?access_token=...") went into the journal whole: the
    quick look for a credential's marks had none for a query parameter without "://" in the same event."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.journal import JournalWriter

    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer(build_event(CtxSet, dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="x", value=value)))
    writer.close()
    raw = path.read_text()
    assert "Zk39fQpL2mX8" not in raw and "=[redacted]" in raw, raw


@pytest.mark.parametrize("value", [839201938475610293847561, {"n": 839201938475610293847561, "ok": 1},
                                   [1, 839201938475610293847561], 10 * 839201938475610293847561])
def test_a_credential_of_digits_kept_as_a_number_is_redacted_in_a_line(tmp_path, monkeypatch, value):
    """An account token of digits the flow kept as an int (ctx.num = int(token)) was journaled whole: a number
    was never looked at for a credential, only text."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.journal import JournalWriter

    monkeypatch.setenv("BANK_TOKEN", "839201938475610293847561")
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer(build_event(CtxSet, dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="x", value=value)))
    writer(build_event(CtxSet, dict(seq=2, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="y", value=8392019384756)))  # (no credential: as it is)
    writer.close()
    raw = path.read_text()
    assert "39201938475610293847" not in raw and "[redacted]" in raw, raw
    assert raw.splitlines()[1].endswith('"name":"y","value":8392019384756}'), raw


@pytest.mark.parametrize("token,value", [
    ("8392019483721", 8392019483721.0), ("8392019483721", {"k": 8392019483721.0}),
    ("8392019483721", [0.5, 8392019483721.0]),
    # (17 digits or more: written 8.392019483721938e+19, its digits never whole, the first sixteen in clear)
    ("83920194837219384756", float("83920194837219384756")),
    ("83920194837219384756", {"k": -float("83920194837219384756")}),
])
def test_a_credential_of_digits_kept_as_a_float_is_redacted_in_a_line(tmp_path, monkeypatch, token, value):
    """ctx.num = float(token) was journaled whole (8392019483721.0): only an int was looked at."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.journal import JournalWriter

    monkeypatch.setenv("API_KEY", token)
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer(build_event(CtxSet, dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="x", value=value)))
    writer(build_event(CtxSet, dict(seq=2, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="y", value=839201948372.5)))  # (no credential: as it is)
    writer.close()
    raw = path.read_text()
    assert "8392019483721" not in raw and "839201948372193" not in raw and "[redacted]" in raw, raw
    assert raw.splitlines()[1].endswith('"name":"y","value":839201948372.5}'), raw


def test_a_number_in_a_variable_named_like_a_credential_is_a_setting_not_one(tmp_path, monkeypatch):
    """MAX_TOKENS=128000 made every 128000 a reply or a tool said `[redacted]`, and a budget's max_tokens was
    journaled so: a plain number in such a variable is a setting (a credential of digits alone is longer)."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import CtxSet
    from flowtui.runtime.journal import JournalWriter
    from flowtui.runtime.secrets import redact, secret_values

    monkeypatch.setenv("MAX_TOKENS", "128000")
    monkeypatch.setenv("TOKEN_BUDGET_USD", "12.5")
    monkeypatch.setenv("BANK_TOKEN", "839201938475610293847561")
    monkeypatch.setenv("DB_PASSWORD", "83920194")  # (a password of digits is one: only a count of tokens is not)
    monkeypatch.setenv("SMTP_SECRET_TOKEN", "123456")
    values = secret_values()
    assert "128000" not in values and "12.5" not in values and "839201938475610293847561" in values
    assert "83920194" in values and "123456" in values
    assert redact("a limit of 128000 tokens, 12.5 dollars", values) == "a limit of 128000 tokens, 12.5 dollars"
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer(build_event(CtxSet, dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime",
                                    name="budget", value={"max_tokens": 128000, "said": "128000 tokens"})))
    writer.close()
    assert path.read_text().endswith('"value":{"max_tokens":128000,"said":"128000 tokens"}}\n')
