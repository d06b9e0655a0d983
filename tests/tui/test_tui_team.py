"""The team toggles of the reflection and sessions screens, and the status line's sync state, over a
replica filled as `workstation team pull` fills it (replica.apply_pulled on the server's CSV)."""

from __future__ import annotations

import csv

import pytest
from textual.app import App
from tui_support import settle, started

from workstation.runtime import Workspace
from workstation.team import replica, sync
from workstation.tui.screens.reflection import ReflectionScreen
from workstation.tui.screens.sessions import SessionsScreen


class ScreenApp(App):
    def __init__(self, screen) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


@pytest.fixture
def ws(tmp_path):
    workspace = Workspace(tmp_path)
    yield workspace
    workspace.close()


def pulled(ws, kind: str, rows: list[list]) -> None:
    """Rows as the server's COPY writes them (seq, origin, author, then server.COLUMNS), into the replica."""
    path = ws.paths.state / f"pulled-{kind}.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([["" if v is None else v for v in row] for row in rows])
    ws.db.call(replica.apply_pulled, kind, str(path))


def teammate_history(ws) -> None:
    pulled(ws, "events", [[i + 1, "laptop:/src/shop", "bob", f"e{i}", "2026-11-01 10:00:00", "bob-s1", "main", 1,
                           None, "tool_call", "grep", 3.5, None, None, None, "t", '{"outcome": "ok"}']
                          for i in range(4)])
    pulled(ws, "session_lines", [[1, "laptop:/src/shop", "bob", "fix-login", 1, '{"type": "user"}'],
                                 [2, "desk:/src/shop", "carol", "add-cart", 1, '{"type": "user"}']])


async def test_the_reflection_screen_toggles_to_the_teams_rows(ws):
    mem = ws.memory("mine")
    mem.record("tool_call", "read_lines", ok=True)
    mem.close()
    teammate_history(ws)
    app = ScreenApp(ReflectionScreen(ws, query="tool_errors"))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        assert [r["tool"] for r in screen.result.records()] == ["read_lines"]
        await pilot.press("t")
        await settle(pilot)
        assert {r["tool"]: r["calls"] for r in screen.result.records()} == {"grep": 4, "read_lines": 1}
        assert "team" in str(screen.query_one("#reflection-title").render())
        assert "grep" in screen.tools.tools


async def test_the_sessions_screen_toggles_to_teammates_sessions(ws):
    teammate_history(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        screen = app.screen
        assert {screen.table.get_row_at(i)[1] for i in range(screen.table.row_count)} == {
            "bob/fix-login", "carol/add-cart"}
        # the filter applies to what is shown: the teammates' sessions, by author, slug or origin
        await pilot.press("slash", *"laptop")
        await settle(pilot)
        assert screen.table.row_count == 1
        row = screen.table.get_row_at(0)
        assert row[1] == "bob/fix-login" and row[2] == "team" and "laptop:/src/shop" in row[7]
        assert "2 shared by teammates · 1 match 'laptop'" in str(screen.query_one("#sessions-title").render())
        assert screen.selected is None  # read-only: nothing to resume or archive
        await pilot.press(*"zz")
        await settle(pilot)
        assert screen.table.row_count == 0 and "holds 'laptopzz'" in str(screen.query_one("#sessions-detail").render())


@pytest.fixture
def local_zone(monkeypatch):
    """Set the process's time zone (a POSIX TZ string: no tz database needed); put back after."""
    import time

    def set_zone(tz: str) -> None:
        monkeypatch.setenv("TZ", tz)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def test_the_status_lines_sync_state(local_zone):
    local_zone("UTC0")
    assert sync.label({}) == "team: not pushed yet"
    assert sync.label({"last_push": "2026-11-27T09:12:02Z"}) == "team ↑09:12"
    assert sync.label({"last_push": "2026-11-27T09:12:02Z",
                       "last_error": "2026-11-27T09:20:00Z team push failed: ..."}) == "team ✗ 09:20"
    # the sidecar notes UTC; the badge says the user's own time, as the timeline and the clock on the wall do
    local_zone("CET-1")
    assert sync.label({"last_push": "2026-11-27T09:12:02Z"}) == "team ↑10:12"
    assert sync.label({"last_push": "2026-11-27T23:30:00Z",
                       "last_error": "2026-11-27T23:40:00Z team push failed: ..."}) == "team ✗ 00:40"


def same_slug_history(ws) -> None:
    """Two teammates at two origins whose sessions have this workspace's session's slug (slugs are date-based:
    teammates get the same ones)."""
    for origin, author, n in (("laptop:/src/shop", "bob", 4), ("desk:/src/shop", "alice", 2)):
        pulled(ws, "events", [[i + 1, origin, author, f"{author}-e{i}", "2026-11-01 10:00:00", "2026-11-01-chat",
                               "main", 1, None, "tool_call", "grep", 3.5, None, None, None, "t", None]
                              for i in range(n)])
        pulled(ws, "session_lines", [[1, origin, author, "2026-11-01-chat", 1, '{"type": "user"}']])


async def test_this_session_in_team_mode_is_never_a_teammates_of_the_same_slug(ws):
    mem = ws.memory("2026-11-01-chat")
    mem.record("tool_call", "read_lines", ok=True)
    mem.close()
    same_slug_history(ws)
    app = ScreenApp(ReflectionScreen(ws, session="2026-11-01-chat", query="sessions"))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        screen = app.screen
        assert [(r["session"], r["events"]) for r in screen.result.records()] == [("2026-11-01-chat", 1)]
        await pilot.press("s")  # every session: the three of that slug, apart, each with whose it is
        await settle(pilot)
        assert sorted((r["session"], r["events"]) for r in screen.result.records()) == [
            ("2026-11-01-chat", 1), ("2026-11-01-chat · alice desk:/src/shop", 2),
            ("2026-11-01-chat · bob laptop:/src/shop", 4)]


async def test_the_sessions_screen_shows_teammates_sessions_of_one_slug_apart(ws):
    same_slug_history(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        table = app.screen.table
        rows = sorted((table.get_row_at(i)[1], table.get_row_at(i)[7]) for i in range(table.row_count))
        assert rows == [("alice/2026-11-01-chat", "desk:/src/shop"), ("bob/2026-11-01-chat", "laptop:/src/shop")]


async def test_the_team_badge_follows_the_sidecar_back_to_sent_without_a_turn(tmp_path):
    """Broken for users: with the server away the badge said `team ✗` until the next turn after the server
    came back. In the real app with its real sidecar process and a real PostgreSQL: the server stopped,
    then started again; the badge goes back to `team ↑` while nobody types."""
    from support import pg_support
    from support.fakellm import ScriptedLLM
    from test_tui_live import make_repo, wait_for, write_config
    from support.trust_support import trust

    from workstation.team.server import ADMIN_SQL
    from workstation.tui.app import WorkstationApp
    from workstation.tui.backend import LiveBackend

    folder, why = pg_support.find_bin()
    if folder is None:
        pytest.skip(why)
    pg = pg_support.start()
    try:
        pg.sql(ADMIN_SQL)
        pg.sql("CREATE ROLE alice LOGIN IN ROLE workstation_engineer")
        pg.sql("INSERT INTO workstation.members VALUES ('shop', 'alice')")
        pg.stop()
        make_repo(tmp_path)
        with ScriptedLLM([]) as llm:
            write_config(tmp_path, llm.url)
            (tmp_path / ".workstation" / "config.toml").write_text(
                f'[team]\nurl = "{pg.url("alice")}"\nproject = "shop"\npush_every_s = 1\n')
            trust(tmp_path)
            backend = LiveBackend(str(tmp_path), sidecar=True)
            app = WorkstationApp(backend)
            async with started(app) as pilot:
                await wait_for(pilot, lambda: app.chat._team.startswith("team ✗"), timeout=60)
                pg.start()
                await wait_for(pilot, lambda: app.chat._team.startswith("team ↑"), timeout=60)
                assert not [t for t in app.chat.transcript.turns if t.role == "user"]  # no turn was needed
    finally:
        pg_support.stop_and_remove(pg)


async def test_at_80_columns_the_sessions_screen_says_whose_and_where_the_highlighted_teammates_session_is(ws):
    """At 80x24 the table clips the origin column away, and two sessions of one slug are only told apart by the
    author prefix (the same author at two desks: not at all): the detail line names author and origin in full."""
    same_slug_history(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app, size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        detail = app.screen.query_one("#sessions-detail")
        said = []
        for _ in range(2):
            said.append(str(detail.render()))
            await pilot.press("down")
            await pilot.pause()
        assert sorted(line.splitlines()[0] for line in said) == [
            "2026-11-01-chat · alice at desk:/src/shop · 1 line",
            "2026-11-01-chat · bob at laptop:/src/shop · 1 line"]
        assert all("read-only" in line for line in said)
        # nothing here resumes or changes a teammate's session: those keys leave the footer (they did nothing)
        keys = {b.binding.action for b in app.screen.active_bindings.values()}
        assert "replay" not in keys and "compact" not in keys and "toggle_team" in keys
        await pilot.press("t")  # back to mine: the detail line is the own session's again, never a teammate's
        await settle(pilot)
        assert "desk:" not in str(detail.render()) and "laptop:" not in str(detail.render())
        assert "replay" in {b.binding.action for b in app.screen.active_bindings.values()}


async def test_where_the_status_line_has_no_room_for_the_team_badge_its_failing_and_return_are_toasts():
    """At 80x24 the chat is too narrow for the team badge beside branch and gauge: with the server stopped the
    app showed nothing at all. The change is said in a toast there, once each way; where the badge fits, the
    badge alone says it."""
    from workstation.tui.app import WorkstationApp

    for size, toasts in (((80, 24), 2), ((200, 50), 0)):
        app = WorkstationApp()
        async with started(app, size=size) as pilot:
            chat = app.chat
            chat.set_status("session 2026-11-28-chat · model anthropic/claude-sonnet-4-5-20250929")
            chat.set_git("main")
            chat.set_team("team ↑12:52")
            chat.set_team("team ✗ 12:53")
            chat.set_team("team ✗ 12:53")  # the same state again (the badge's next look): nothing new to say
            await pilot.pause()
            shown = "team ✗ 12:53" in chat.status_bar.right.plain
            chat.set_team("team ↑12:54")
            await pilot.pause()
            said = [str(n.message) for n in app._notifications if "team" in str(n.message)]
            assert len(said) == toasts, (size, said)
            assert shown == (toasts == 0)
            if toasts:
                assert said[0].startswith("team ✗ 12:53: the team server takes no pushes")
                assert said[1].startswith("team ↑12:54: the team server takes pushes again")


async def test_at_80_columns_the_reflection_screen_says_whose_the_highlighted_session_is(ws):
    """The team's sessions of one slug are apart in the table, but at 80x24 the origin is cut off (and at any
    width a long one is clipped): the highlighted row's session is on the status line in full."""
    mem = ws.memory("2026-11-01-chat")
    mem.record("tool_call", "read_lines", ok=True)
    mem.close()
    same_slug_history(ws)
    app = ScreenApp(ReflectionScreen(ws, session="2026-11-01-chat", query="sessions"))
    async with started(app, size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("t", "s")
        await settle(pilot)
        screen = app.screen
        screen.table.focus()
        said = set()
        for _ in range(3):
            await pilot.pause()
            said.add(screen.status.left.plain)
            await pilot.press("down")
        assert {"sessions: 3 rows · 2026-11-01-chat · alice desk:/src/shop",
                "sessions: 3 rows · 2026-11-01-chat · bob laptop:/src/shop"} <= said
        bob = "sessions: 3 rows · 2026-11-01-chat · bob laptop:/src/shop"
        assert not any("laptop" in line for line in said - {bob})
