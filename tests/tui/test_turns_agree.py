"""Every command and screen counts turns the same way (sessions/turns.py): one session log with 6 user
messages, 18 tool results, a preamble and a subagent's prompt; session list/show --json, the sessions
screen, /compact KEEP, plan_compaction, rewind's numbering, search hits, export and replay all say 6 and
agree on which records make each turn."""

from __future__ import annotations

import json

from click.testing import CliRunner

from support.agent_support import agent, module_server, workspace
from support.fakellm import Reply
from support.sessions_support import fill_turns
from test_tui_screens import ScreenApp
from tui_support import settle, started
from workstation.commands import slash
from workstation.agent.checkpoints import history
from workstation.cli import main
from workstation.replay import Episode
from workstation.replay.render import render_state
from workstation.sessions.catalog import export_markdown, list_sessions, search
from workstation.sessions.compaction import plan_compaction
from workstation.sessions.turns import number
from workstation.tui.screens.sessions import COLUMNS, SessionsScreen

server_module, server = module_server()

SUMMARY = ("## Task & instructions\nsix questions\n## Decisions & conventions\n(none)\n"
           "## Files touched\n(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")


def _cli(root, *args) -> dict | list:
    result = CliRunner().invoke(main, ["-C", str(root), "session", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def _screen(ws) -> tuple[str, str]:
    """The sessions screen's turns cell and detail line for the one session."""
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        row = screen.table.get_row("six")
        return str(row[COLUMNS.index("turns")]), str(screen.query_one("#sessions-detail").render())


async def test_every_command_and_screen_counts_six_turns(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws, "six")
    session = a.session
    session.system("an imported system prompt, before any user message")
    records = fill_turns(session, 2, steps=4)  # a turn: user, 3 x (assistant calling, tool result), answer
    session.append("user", content="turn 2: a subagent's prompt is no turn of its own", sidechain="agent-1")
    records += fill_turns(session, 4, start=2, steps=4)
    view = session.read()
    assert sum(r["type"] == "tool" for r in view.records) == 18 and len(view.records) == 50
    turns = number(view.records)
    users = [r["id"] for r in records if r["type"] == "user"]
    assert turns.count == 6 and turns.starts == users

    # listings, the raw export and the sessions screen
    assert [(i.slug, i.turns, i.compacted) for i in list_sessions(ws.paths)] == [("six", 6, "")]
    assert [(s["slug"], s["turns"]) for s in _cli(ws.root, "list")] == [("six", 6)]
    assert (_cli(ws.root, "show", "six")["turns"], _cli(ws.root, "show", "six")["covered_turns"]) == (6, 0)
    markdown = export_markdown("six", view, "live")
    assert markdown.count("\n## Turn ") == 6 and "6 turns · live" in markdown
    cell, detail = await _screen(ws)
    assert cell == "6" and "six · live · 6 turns" in detail

    # rewind's user turn N is turn N
    h = history(view)
    assert h.users == turns.starts and h.turn_of(4) == turns.user_id(4) == users[3]

    # search hits: every record of turn 4 (its text starts "turn 4:") says turn 4, indexed or read
    for db in (None, ws.db):
        hits = search(ws.paths, "turn 4:", db=db)
        assert {h.turn for h in hits} == {4} and len(hits) == 8 and {h.type for h in hits} == {"user", "assistant",
                                                                                                  "tool"}
    assert {h.turn for h in search(ws.paths, "subagent's prompt")} == {2}
    assert {h.turn for h in search(ws.paths, "imported system prompt")} == {None}  # the preamble: no turn

    # replay numbers its steps in the same turns
    episode = Episode.load(ws.paths, "six")
    assert [s.turn for s in episode.steps if s.kind == "user" and not s.record.get("sidechain")] == [1, 2, 3, 4, 5, 6]
    assert all(s.turn == turns.of(s.record) for s in episode.steps if s.turn is not None)
    assert " 6 turns; no compaction" in render_state(episode, episode.state_at(len(episode) - 1))

    # /compact 2 keeps the newest 2 turns, as plan_compaction and the compact record say
    plan = plan_compaction(view, ws.config, force=True, keep=2)
    assert (plan.first_turn, plan.last_turn) == (1, 4) and plan.turns[-1]["id"] == records[-17]["id"]
    server.push(Reply(text=SUMMARY))
    done = slash.run(a, "/compact 2")
    assert done.ok and done.text.startswith("compacted turns 1–4 of six"), done.text
    covers = session.read().last_compact()["covers"]
    assert (covers["first_turn"], covers["last_turn"], covers["last_id"]) == (1, 4, plan.turns[-1]["id"])

    # after it, everything says turns 1-4 of 6 are summarized
    assert [(i.turns, i.compacted) for i in list_sessions(ws.paths)] == [(6, "1–4")]
    shown = _cli(ws.root, "show", "six")
    assert (shown["turns"], shown["covered_turns"]) == (6, 4)
    assert "Summary of turns 1–4" in export_markdown("six", session.read(), "live")
    cell, detail = await _screen(ws)
    assert cell == "6" and "turns 1–4 summarized" in detail
    episode = Episode.load(ws.paths, "six")
    compaction = next(s for s in episode.steps if s.kind == "compact")
    assert compaction.label().startswith("== compaction: turns 1–4 summarized")
    assert " 6 turns; turns 1–4 summarized" in render_state(episode, episode.state_at(compaction.index))
    a.close()
    ws.close()
