"""A tool call resolved once (agent/tools/invocation.py): its arguments parsed once, a WRITE call's paths confined
once, and everything around its run (the .env guard, the checkpoint, the language-server check, the tool
itself) reading that one resolution. Driven through the real loop against the scripted model server.

The attack: a link the model writes through, swapped for another between the checkpoint and the write. When
each step resolved the path again, the checkpoint kept one file and the tool wrote another, which /undo then
could not give back."""

from __future__ import annotations

import os

import pytest

from support.agent_support import agent, module_server, workspace
from support.fakellm import Reply
from workstation.llm.result import ToolCall
from workstation.sandbox.protect import Protected

server_module, server = module_server()

A = "def a() -> int:\n    return 1\n"
B = "def b() -> int:\n    return 2\n"


@pytest.fixture
def setup(tmp_path, server):
    w = workspace(tmp_path, server.url, files={"a.py": A, "b.py": B})
    a = agent(w)
    yield w, a
    a.close()
    w.close()


def test_a_link_swapped_between_checkpoint_and_write_never_splits_them(setup, server):
    w, a = setup
    os.symlink("a.py", w.root / "cur")
    services = a.ctx.services
    keep = services.checkpoint
    kept: list[list[str]] = []

    def checkpoint_then_swap(rels: list[str]) -> None:
        kept.append(list(rels))
        assert keep is not None
        keep(rels)
        # another process points the link elsewhere once the checkpoint is taken, before the tool writes
        os.unlink(w.root / "cur")
        os.symlink("b.py", w.root / "cur")

    services.checkpoint = checkpoint_then_swap
    server.push(Reply(tool_calls=[("read_lines", {"path": "a.py", "start": 1, "end": 2}),
                                  ("read_lines", {"path": "b.py", "start": 1, "end": 2})]),
                Reply(tool_calls=[("write_file", {"path": "cur", "content": "changed\n"})]),
                Reply(text="Done."))
    assert a.run("rewrite cur").error is None
    assert kept == [["a.py"]]
    # the file written is the file checkpointed, as the call resolved it: the swap changed nothing it does
    assert (w.root / "a.py").read_text() == "changed\n"
    assert (w.root / "b.py").read_text() == B
    done = a.undo()
    assert done.files == ["a.py"]
    assert (w.root / "a.py").read_text() == A and (w.root / "b.py").read_text() == B


def test_a_call_is_parsed_once_and_its_paths_confined_once(setup, server, monkeypatch):
    """One write call in a response: its JSON parsed once (running it, the .env secrets it would write, the
    language-server batch), its path confined once (the .env guard, the checkpoint, the tool)."""
    w, a = setup
    parsed, confined = [], []
    parse, confine = ToolCall.parsed_arguments, Protected.confine_write

    def counting_parse(self: ToolCall) -> dict:
        parsed.append(self.name)
        return parse(self)

    def counting_confine(self: Protected, path: str):
        confined.append(path)
        return confine(self, path)

    monkeypatch.setattr(ToolCall, "parsed_arguments", counting_parse)
    monkeypatch.setattr(Protected, "confine_write", counting_confine)
    server.push(Reply(tool_calls=[("write_file", {"path": "new.env", "content": "TOKEN=abc\n"})]),
                Reply(text="Done."))
    assert a.run("create new.env").error is None
    assert parsed == ["write_file"]
    assert confined == ["new.env"]
