"""The replay screen: the shipped demo episode and a log with a compaction and a redaction, stepped and played."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.app import App
from tui_support import SIZE, RecordingBackend, settle, started

from workstation.paths import Paths
from workstation.replay import Episode, ReplayError
from workstation.sessions.log import Session
from workstation.tui.app import WorkstationApp
from workstation.tui.screens.replay import SPEEDS, ReplayApp, ReplayScreen, recall_text

REPO_TOP = Path(__file__).resolve().parents[2]
DEMOS = sorted((REPO_TOP / "sessions").glob("demo-*.jsonl"))
SUMMARY = ("## Task & instructions\nLook at the loader.\n## Decisions & conventions\n(none)\n## Files touched\n"
           "- src/loader.py\n## Open to-dos\n(none)\n## Errors seen\n(none)")


class FakeClock:
    """The player's clock, moved by the test: playback without waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def assert_panes_match(screen: ReplayScreen) -> None:
    """Chat, timeline, memory and status all show the state the episode has at the player's position."""
    state = screen.episode.state_at(screen.position)
    turns = screen.chat.transcript.turns
    assert [(t.role, t.text, t.id) for t in turns] == [(t["role"], t["text"], t["id"]) for t in state.transcript]
    assert [e.id for e in screen.timeline.shown] == [e["id"] for e in state.timeline]
    assert [e.key for e in screen.memory.entries("stm")] == [e["key"] for e in state.memory.stm]
    assert screen.status.text.startswith(f"step {state.step.number}/{len(screen.episode.steps)} ")
    assert state.step.label().strip()[:40] in screen.status.text
    assert str(screen.query_one("#replay-recall-text").render()) == recall_text(state.memory)


@pytest.fixture
def demo() -> Episode:
    assert DEMOS, "the repository ships a demo episode in sessions/"
    return Episode.load(str(DEMOS[0]))


def compacted_log(root: Path) -> tuple[Paths, Session]:
    """A session with a tool read, a redaction of it, a compaction of turn 1 (its 4 records), and turns after."""
    paths = Paths.for_root(root)
    s = Session.create(paths, "compacted")
    first = s.user("Look at the loader")
    call = {"id": "c1", "name": "read_lines", "arguments": json.dumps({"path": "src/loader.py", "start": 1, "end": 40})}
    s.assistant("Reading it.", [call], context_tokens=1200)
    tool = s.tool("c1", "read_lines", "def load(path):\n    ...\n" * 40, path="src/loader.py", lines=[1, 40])
    last = s.assistant("It loads lazily.", context_tokens=1900)
    s.user("And the cache?")
    s.assistant("Cached per path.", context_tokens=2100)
    s.append("redaction", targets=[{"id": tool["id"], "name": "read_lines", "chars": len(tool["content"]),
                                    "key": "src/loader.py"}], at_turn=6)
    s.append("compact", summary=SUMMARY, files=["src/loader.py"], model="openai/compact", reason="manual",
             covers={"first_id": first["id"], "last_id": last["id"], "first_turn": 1, "last_turn": 1,
                     "new_first_turn": 1, "new_first_id": first["id"]})
    s.user("Now the writer")
    s.assistant("The writer appends.", context_tokens=900)
    return paths, s


async def test_the_demo_episode_steps_forward_and_back_through_every_step(demo, warm_renderer):
    app = ReplayApp(demo)
    async with started(app) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ReplayScreen) and screen.position == 0
        assert app.theme == "workstation-dark"
        assert_panes_match(screen)
        for n in range(1, len(demo.steps)):
            if n <= 4:
                await pilot.press("right" if n % 2 else "n")
            else:  # the same action without waiting for a frame per step
                screen.action_step(1)
            assert screen.position == n
            assert_panes_match(screen)
        await pilot.press("right")  # the last step stays the last
        assert screen.position == len(demo.steps) - 1
        assert "■ end" in screen.status.text
        for key in ("left", "p"):
            await pilot.press(key)
            assert_panes_match(screen)
        assert screen.position == len(demo.steps) - 3
        await pilot.press("home")
        assert screen.position == 0
        assert_panes_match(screen)
        await pilot.press("end")
        await pilot.pause()
        assert_panes_match(screen)
        # what the demo did is in the recall panel at the end: the decision, the files read and edited
        recall = str(screen.query_one("#replay-recall-text").render())
        assert "Decisions (1)" in recall and "shop/api.py: 4×" in recall
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_compaction_and_redaction_markers_show_where_they_happened(tmp_path):
    paths, _ = compacted_log(tmp_path)
    episode = Episode.load(paths, "compacted")
    kinds = [s.kind for s in episode.steps]
    app = ReplayApp(episode)
    async with started(app) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.seek(kinds.index("redaction") - 1)
        await pilot.pause()
        assert {t.role for t in screen.chat.transcript.turns} <= {"user", "assistant", "tool"}
        assert "summarized" not in screen.chat.status_bar.text
        await pilot.press("right")  # the redaction
        redaction = screen.chat.transcript.turns[-1]
        assert redaction.role == "redaction" and "[REDACTED: Output of read_lines" in redaction.text
        assert redaction.result.startswith("def load(path):")  # the original is in the replay, no backend asked
        assert "1 outputs redacted" in screen.chat.status_bar.text
        await pilot.press("right")  # the compaction
        marker = screen.chat.transcript.turns[-1]
        assert marker.role == "compaction" and "turns 1–1 summarized by openai/compact" in marker.text
        assert "Look at the loader." in marker.result
        assert screen.chat.transcript.cursor == len(screen.chat.transcript.turns) - 1  # the step is selected
        assert "turns 1–1 summarized" in screen.chat.status_bar.text
        assert screen.timeline.shown[-1].type == "compaction"
        assert "compaction" in screen.status.text
        assert_panes_match(screen)
        # from here on the model is given the summary in place of turn 1
        context = episode.state_at(screen.position).context
        assert context.messages[0]["content"].startswith("Summary of the earlier conversation (turns 1–1")
        assert f"{len(context.messages)} messages" in screen.chat.status_bar.text
        await pilot.press("left", "left", "end")
        assert_panes_match(screen)


async def test_play_follows_the_recorded_pace_at_the_chosen_speed(demo):
    clock = FakeClock()
    screen = ReplayScreen(demo, clock=clock)
    app = App()
    async with started(app) as pilot:
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("plus", "plus")  # 1× -> 2× -> 4×
        assert screen.player.speed == 4.0 and "4×" in screen.status.text
        await pilot.press("minus")
        assert screen.player.speed == 2.0
        await pilot.press("space")
        assert screen.player.playing and "▶ playing" in screen.status.text
        target = demo.steps[5].offset_s
        clock.now += target / 2.0 + 1e-6  # at 2×, half the recorded time has passed
        screen.tick()
        assert screen.position == max(i for i, s in enumerate(demo.steps) if s.offset_s <= target + 1e-6)
        assert_panes_match(screen)
        await pilot.press("space")
        assert not screen.player.playing and "❚❚ paused" in screen.status.text
        clock.now += 1000
        screen.tick()
        assert screen.position <= 5 + 1  # paused: the clock moving changes nothing
        await pilot.press("space")
        clock.now += 1000
        screen.tick()
        assert screen.position == len(demo.steps) - 1 and not screen.player.playing
        assert_panes_match(screen)
        for _ in SPEEDS:
            await pilot.press("plus")
        assert screen.player.speed == SPEEDS[-1]


async def test_play_in_real_time_reaches_the_end(demo):
    app = ReplayApp(demo)
    async with started(app) as pilot:
        await pilot.pause()
        screen = app.screen
        for _ in SPEEDS:
            await pilot.press("plus")  # the fastest: the demo's 4 s of replay clock in well under a second
        await pilot.press("space")
        for _ in range(300):
            if screen.player.at_end:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        assert screen.player.at_end and not screen.player.playing
        assert_panes_match(screen)


async def test_replay_inside_the_app_is_read_only(demo):
    backend = RecordingBackend()
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await pilot.pause()
        main_turns = len(app.chat.transcript.turns)
        app.map.set_progress(1, 10)  # textual's ProgressBar brings a `Bar { width: 32 }` rule along
        app.push_screen(ReplayScreen(demo))
        await pilot.pause()
        screen = app.screen
        assert screen.status.region.width == SIZE[0]
        assert screen.chat.status_bar.region.width == screen.chat.content_region.width
        await pilot.press("end")
        screen.timeline.table.focus()
        screen.timeline.table.move_cursor(row=0)
        await pilot.pause()
        await pilot.press("enter")  # selecting an event jumps the replay's chat, not the app's
        await settle(pilot)
        first = screen.timeline.shown[0].turn_id
        assert screen.chat.transcript.cursor == screen.chat.transcript.index_of(first)
        screen.memory.show_tier("episodic")
        screen.memory.table.focus()
        await pilot.press("n")  # the memory pane's "new entry" key steps the replay instead
        assert app.screen is screen
        screen.memory._edit("stm", "title", "k", 1, "")
        await settle(pilot)
        assert app.screen is screen
        assert any("read-only" in n.message for n in app._notifications)
        assert backend.calls == []
        assert len(app.chat.transcript.turns) == main_turns
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]


def test_seeking_outside_the_episode_is_an_error_naming_the_range(demo):
    screen = ReplayScreen(demo)
    with pytest.raises(ReplayError, match=f"has steps 1–{len(demo.steps)}; there is no step {len(demo.steps) + 1}"):
        screen.player.seek(len(demo.steps))


@pytest.mark.parametrize("size, side", [((80, 24), 40), ((200, 50), 58), ((50, 20), 0)])
async def test_the_chat_keeps_a_usable_width_on_a_small_terminal(demo, size, side):
    """At 80x24 the side column gives way to the chat (it took 58 of 80 columns once, leaving the chat 22)."""
    from workstation.tui.layout import MIN_CHAT

    app = ReplayApp(demo)
    async with started(app, size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        column = screen.query_one("#replay-side")
        assert column.region.width == side and column.display == (side > 0)
        assert screen.chat.region.width == size[0] - side >= min(MIN_CHAT, size[0])
        await pilot.press("end")
        assert_panes_match(screen)
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert column.region.width == 58 and screen.chat.region.width == 142
