"""The chat pane: transcript, the reply being streamed, what the agent is doing, a context gauge and the prompt.

Data down: `set_turns`/`add_turn(s)`/`update_turn`/`insert_turns` (before a turn: what another process wrote),
`mark_taken_back(marks)`, `begin_reply`/`stream_fragment`/`end_reply`/`discard_reply` (async: a thread worker calls them through
`app.call_from_thread`), `set_activity(kind, what)` (the agent's state, shown
with the time it has taken so far), `set_context(used, window, estimated=False)`,
`set_commands`, `set_files(paths)` (what `@` completes), `set_status`, `set_bill(text)` (what the session cost as billed and the last
request's cache hit, after the session's line: "cache 97% · $0.042"), `set_job(text)` (a background
job's one line after those: file descriptions), `set_git(label)` (beside the gauge: "main ±3"),
`set_plan(items)` (the agent's plan, [{text, status}], as a checklist above the status
line that updates in place; [] hides it), `set_mode(mode)` (the permission mode, first on the status line, working
or not) and `set_budget(text)` (what is left of agent.max_budget_usd, after the bill).
Messages up: `Submitted(text)`, `CommandSubmitted(name, args, text)`, `CancelRequested()`
(Escape while the agent works: a model call, a tool, a command, a reply),
`OriginalRequested(turn)` (enter on a redaction marker).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Static

from ...terminal import safe
from ..messages import BackendRequest
from ..viewdata import SlashCommand, Turn, coerce, human_count
from .bar import MIN_LEFT, StatusBar
from .completion import PromptSuggester, file_token, path_hints
from .md_parser import textual_parser
from .transcript import Transcript

if TYPE_CHECKING:
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownStream

# The agent's slash commands (issue 5); the backend may replace them with set_commands.
DEFAULT_COMMANDS = [
    SlashCommand("/map", "[FILE [TOKENS]]", "knowledge map of a file or the repository"),
    SlashCommand("/read", "FILE 10-40", "read lines of a file"),
    SlashCommand("/impact", "NAME", "every reference to a symbol"),
    SlashCommand("/find", "QUERY", "find files and symbols"),
    SlashCommand("/grep", "PATTERN [PATH]", "search file contents (under PATH)"),
    SlashCommand("/qmem", "TIER KEY", "read memory"),
    SlashCommand("/umem", "TIER KEY VALUE", "write memory"),
    SlashCommand("/fence", "TIER", "make earlier writes durable"),
    SlashCommand("/decisions", "", "the decision log"),
    SlashCommand("/pin", "TEXT", "an instruction kept in every context"),
    SlashCommand("/reflect", "NAME", "run a reflection query"),
    SlashCommand("/compact", "", "compact this session now"),
    SlashCommand("/archive", "", "archive this session; a new session starts"),
    SlashCommand("/new", "", "start a new session (this one stays as it is)"),
    SlashCommand("/clear", "", "the same as /new"),
    SlashCommand("/model", "NAME", "switch model"),
    SlashCommand("/help", "", "list commands"),
]
MAX_HINTS = 6
# the permission mode on the status line (agent.modes): a mark and a colour that say how free the agent is
MODE_MARKS = {"ask": "?", "edits": "✎", "plan": "⏸", "auto": "⏵⏵"}
MODE_STYLES = {"ask": "bold $text-success", "edits": "bold $text-primary", "plan": "bold $text-warning",
               "auto": "bold $text-error"}
GAUGE_BAR = 12  # cells of the context gauge's bar
WIDE = 70  # a chat narrower than this shows the gauge without its bar
# what the status line says while the agent works (AgentEvents.on_activity kinds, and the pane's own)
ACTIVITY = {"busy": "working", "model": "waiting for {what}", "tool": "running {what}",
            "approval": "waiting for your answer: {what}", "stopping": "stopping"}


def activity_text(kind: str, what: str, seconds: float) -> str:
    """'⧗ 12s running run_command: pytest -q · escape stops': the time first, the hint last (a narrow
    bar cuts from the right); no hint once stopping."""
    label = ACTIVITY.get(kind, kind + (" {what}" if what else "")).format(what=what or "?")
    elapsed = f"{seconds:.0f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"⧗ {elapsed} {label}" + ("" if kind == "stopping" else " · escape stops")


def gauge_text(used: int, window: int, bar: int = 12, estimated: bool = False) -> str:
    """'ctx 61k/128k ██████░░░░░░  48%': tokens of the next request against the window; '~' when they are an
    estimate (before the session's first request); 'ctx –' when no window is known (no model)."""
    if not window:
        return f"ctx {'~' if estimated else ''}{human_count(used)}" if used else "ctx –"
    ratio = min(1.0, used / window)
    filled = round(ratio * bar)
    gauge = f"{'█' * filled}{'░' * (bar - filled)} " if bar else ""
    return f"ctx {'~' if estimated else ''}{human_count(used)}/{human_count(window)} {gauge}{ratio:4.0%}"


PLAN_ITEMS = 6  # checklist lines shown at most; the rest are counted
PLAN_MARKS = {"done": "✓", "in_progress": "▸", "pending": "○"}
PLAN_STYLES = {"done": "$text-muted", "in_progress": "bold $text-accent", "pending": ""}


def plan_lines(items: list[dict], limit: int = PLAN_ITEMS) -> tuple[str, list[tuple[str, str]], str]:
    """(header, [(status, line)], footer) of the plan block: 'Plan · 2 of 5 done', at most `limit` items
    from just before the first one not done (what the agent works on stays in view), '… 3 more' for the rest."""
    done = sum(1 for item in items if item.get("status") == "done")
    header = f"Plan · {done} of {len(items)} done"
    first_open = next((i for i, item in enumerate(items) if item.get("status") != "done"), len(items))
    start = max(0, min(first_open - 1, len(items) - limit))
    shown = items[start:start + limit]
    lines = [(str(item.get("status")), f"{PLAN_MARKS.get(item.get('status'), '?')} {item.get('text', '')}")
             for item in shown]
    hidden = [f"{start} done above"] if start else []
    if len(items) > start + limit:
        hidden.append(f"{len(items) - start - limit} more")
    return header, lines, ("… " + ", ".join(hidden)) if hidden else ""


def gauge_level(used: int, window: int) -> str:
    """ok, warn (compaction is near: 80%) or full (95%)."""
    ratio = used / window if window else 0.0
    return "full" if ratio >= 0.95 else "warn" if ratio >= 0.8 else "ok"


class PromptInput(Input):
    """The prompt: up/down walk through what was sent before."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous prompt", show=False),
        Binding("down", "history(1)", "Next prompt", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: list[str] = []
        self._position = 0

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":  # here, in the order the keys came: a binding's action runs after the
            event.stop()  # keys queued behind it are typed in (the next line, typed ahead while the app was
            event.prevent_default()  # busy, joined this one)
            self.action_submit()
            return
        await super()._on_key(event)

    def action_submit(self) -> None:
        """Enter: the line is taken at once, cleared and kept in the history before the next key is read (the
        chat clearing it when the Submitted reached it wiped the keys typed after it)."""
        value = self.value
        if value.strip():
            self.remember(value.strip())
            self.value = ""
        self.post_message(self.Submitted(self, value))

    def remember(self, text: str) -> None:
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self._position = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self._position = max(0, min(len(self.history), self._position + step))
        self.value = self.history[self._position] if self._position < len(self.history) else ""
        self.cursor_position = len(self.value)


class ChatPane(Vertical):
    ALLOW_MAXIMIZE = True
    BORDER_TITLE = "Chat"
    DEFAULT_CSS = """
    ChatPane {
        #reply-box {
            height: auto;
            max-height: 60%;
            background: $surface;
            padding: 0 1 0 3;
            border-top: hkey $panel;
            Markdown { margin: 0; padding: 0; background: $surface; }
        }
        #plan-box {
            display: none;
            height: auto;
            background: $surface;
            padding: 0 1 0 3;
            border-top: hkey $panel;
        }
        &.-plan #plan-box { display: block; }
        #prompt { border: tall $panel; background: $surface; }
        #prompt:focus { border: tall $primary; }
        #command-hints {
            display: none;
            height: auto;
            max-height: 7;
            padding: 0 1;
            color: $text-muted;
            background: $panel;
        }
        &.-hints #command-hints { display: block; }
    }
    """

    @dataclass(eq=False)
    class Submitted(BackendRequest):
        """The user sent a prompt (not a slash command)."""

        text: str

    @dataclass(eq=False)
    class CommandSubmitted(BackendRequest):
        """The user sent a slash command: `name` with its slash, `args` the rest of the line."""

        name: str
        args: str
        text: str

    @dataclass(eq=False)
    class CancelRequested(BackendRequest):
        """Escape while the agent works: stop the model call, the tool or the command."""

    @dataclass(eq=False)
    class OriginalRequested(BackendRequest):
        """Enter on a redaction marker: the backend may fetch the original output
        and call `update_turn(turn.id, turn_with_result)`."""

        turn: Turn

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._commands: list[SlashCommand] = list(DEFAULT_COMMANDS)
        self._paths: list[str] = []  # indexed files, for `@` completion (set_files)
        self._reply: Markdown | None = None
        self._stream: MarkdownStream | None = None
        self._reply_parts: list[str] = []
        self._context_tokens = (0, 0)
        self._context_estimated = False  # the tokens are an estimate (no request built yet: set_context)
        self._status = ""  # the session's line, shown while the agent is idle
        self._bill = ""  # the session's cost as billed and the last request's cache hit, after it
        self._job = ""  # a background job's line, after the session's
        self._mode = ""  # the permission mode (agent.modes), first on the line; "" before the agent is there
        self._budget = ""  # "$4.21 of $5.00 left" (agent.max_budget_usd), after the bill
        self._git = ""  # "main ±3", beside the gauge
        self._team = ""  # "team ↑09:12" or "team ✗ 09:12" ([team] sync state), beside the branch
        self._team_shown = False  # the badge fits on the status line (else its failing or recovering is a toast)
        self._plan: list[dict] = []
        self._activity: tuple[str, str, float] | None = None  # (kind, what, monotonic start)
        self._ticker = None  # the timer that refreshes the elapsed time

    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        yield Static("", id="plan-box", markup=False)  # the reply box mounts above it while a reply streams
        yield StatusBar(id="chat-status")
        yield PromptInput(placeholder="Ask, or / for commands", id="prompt",
                          suggester=self._suggester())
        yield Static("", id="command-hints", markup=False)

    def on_mount(self) -> None:
        self.set_context(*self._context_tokens, estimated=self._context_estimated)

    @property
    def transcript(self) -> Transcript:
        return self.query_one(Transcript)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one("#chat-status", StatusBar)

    @property
    def context_level(self) -> str:
        return gauge_level(*self._context_tokens)

    @property
    def streaming(self) -> bool:
        return self._stream is not None

    @property
    def busy(self) -> bool:
        """The agent is working (or stopping) on a turn of this chat."""
        return self._activity is not None or self.streaming

    @property
    def activity(self) -> tuple[str, str] | None:
        """(kind, what) of the agent's current activity, None when idle."""
        return None if self._activity is None else self._activity[:2]

    @property
    def reply_text(self) -> str:
        """Everything streamed into the current reply so far."""
        return "".join(self._reply_parts)

    # ----------------------------------------------------------- data in
    def set_turns(self, turns) -> None:
        self.transcript.set_turns(turns)

    def add_turn(self, turn) -> int:
        return self.transcript.append(turn)

    def add_turns(self, turns) -> None:
        self.transcript.extend(turns)

    def update_turn(self, key: int | str, turn) -> None:
        self.transcript.update_turn(key, turn)

    def insert_turns(self, index: int, turns) -> None:
        self.transcript.insert(index, turns)

    def mark_taken_back(self, marks: dict[str, str]) -> None:
        """Dim the turns a rewind or undo took back, saying what did (record id -> "undone by /undo")."""
        self.transcript.mark_taken_back(marks)

    def scroll_to_turn(self, key: int | str) -> None:
        """Select a turn (index or id) and bring it to the top: the timeline's jump."""
        self.transcript.select(key, top=True)

    def set_context(self, used: int, window: int, *, estimated: bool = False) -> None:
        """Tokens of the context (the request being sent, or the next one as measured) and the model's window
        (0: unknown); `estimated`: a count before the session's first request, shown with '~'."""
        self._context_tokens = (max(0, int(used)), max(0, int(window)))
        self._context_estimated = estimated
        self._show_gauge()

    def set_git(self, label: str) -> None:
        """The repository's branch and dirty count ("main ±3"), left of the gauge; "" for none."""
        self._git = label
        self._show_gauge()

    def set_team(self, label: str) -> None:
        """The team sync state (workstation.team.sync.label), beside the branch; "" for none. Where the status
        line has no room for it (a narrow chat), the server failing or taking pushes again is said in a toast."""
        was_failing = "✗" in self._team
        self._team = label
        self._show_gauge()
        failing = "✗" in label
        if failing != was_failing and not self._team_shown:
            if failing:
                self.notify(f"{label}: the team server takes no pushes (`workstation team status` says why); "
                            "local work goes on", severity="warning", timeout=10)
            else:
                self.notify(f"{label}: the team server takes pushes again", timeout=6)

    def _show_gauge(self) -> None:
        """The git label and the gauge on the right of the status line: the gauge without its bar in a
        narrow chat, and both left out there while the agent works (what it does is worth the room more)."""
        narrow = self.size.width < WIDE
        self._team_shown = False
        if narrow and self._activity is not None:
            self.status_bar.set(right="")
            return
        style = {"ok": "", "warn": "$text-warning", "full": "bold $text-error"}[self.context_level]
        gauge = Content.styled(gauge_text(*self._context_tokens, bar=0 if narrow else GAUGE_BAR,
                                          estimated=self._context_estimated), style)
        room = self.size.width - 2  # the bar's padding
        for text, style in ((self._git and f"⎇ {self._git}", "$text-secondary"),
                            (self._team, "$text-error" if "✗" in self._team else "$text-secondary")):
            if text:
                both = Content.assemble(Content.styled(text, style), " │ ", gauge)
                if both.cell_length + 1 + MIN_LEFT <= room:  # else without: the gauge matters more
                    gauge = both
                    self._team_shown = self._team_shown or text == self._team
        self.status_bar.set(right=gauge)

    def on_resize(self) -> None:
        self._show_gauge()
        if self._plan:
            self._show_plan()

    def set_status(self, text: str) -> None:
        """The session's line under the transcript (session, model); the agent's activity shows over it."""
        self._status = text
        if self._activity is None:
            self.status_bar.set(left=self._idle_line())

    def set_bill(self, text: str) -> None:
        """The session's cost as billed and the last request's cache hit share, with why it dropped
        ("cache 12% (compaction) · $0.051"; costs.billing.Bill.line), after the session's line; "" for none."""
        self._bill = text
        if self._activity is None:
            self.status_bar.set(left=self._idle_line())

    def set_job(self, text: str) -> None:
        """One line of a background job (the model describing files: progress, then cost), shown after
        the session's line while the agent is idle; "" removes it."""
        self._job = text
        if self._activity is None:
            self.status_bar.set(left=self._idle_line())

    def set_mode(self, mode: str) -> None:
        """The permission mode (ask, edits, plan, auto), first on the status line whatever the agent does."""
        self._mode = mode
        self.set_class(mode == "plan", "-plan-mode")
        if self._activity is None:
            self.status_bar.set(left=self._idle_line())
        else:
            self._show_activity()

    @property
    def mode(self) -> str:
        return self._mode

    def set_budget(self, text: str) -> None:
        """What is left of the session's budget ("$4.21 of $5.00 left"), after the bill; "" for no budget."""
        self._budget = text
        if self._activity is None:
            self.status_bar.set(left=self._idle_line())

    def _mode_chip(self, then: bool) -> Content:
        """The mode's mark and name, with a separator when `then` something follows."""
        if not self._mode:
            return Content("")
        chip = Content.styled(f"{MODE_MARKS.get(self._mode, '')} {self._mode}", MODE_STYLES.get(self._mode, ""))
        return Content.assemble(chip, " · ") if then else chip

    def _idle_line(self) -> Content:
        # the mode, then the bill: a narrow pane cuts the line's end, and the model's long name matters less
        rest = " · ".join(part for part in (self._bill, self._budget, self._status, self._job) if part)
        return Content.assemble(self._mode_chip(bool(rest)), rest)

    @property
    def bill(self) -> str:
        return self._bill

    @property
    def plan(self) -> list[dict]:
        """The plan the block shows ([] when hidden)."""
        return list(self._plan)

    def set_plan(self, items) -> None:
        """Show the agent's plan ([{text, status}]) as a checklist above the status line, replacing the one
        shown; [] or None hides it."""
        self._plan = [dict(item) for item in items or ()]
        self.set_class(bool(self._plan), "-plan")
        self._show_plan()

    def _show_plan(self) -> None:
        box = self.query_one("#plan-box", Static)
        if not self._plan:
            box.update("")
            return
        # a short chat keeps most of its height for the conversation
        header, lines, footer = plan_lines(self._plan, max(2, min(PLAN_ITEMS, self.size.height // 6)))
        parts = [Content.styled(header, "bold $text-muted")]
        parts += [Content.styled(line, PLAN_STYLES.get(status, "")) for status, line in lines]
        if footer:
            parts.append(Content.styled(footer, "$text-muted"))
        box.update(Content("\n").join(parts))

    def set_activity(self, kind: str, what: str = "") -> None:
        """What the agent does now: ("model", name), ("tool", "run_command: pytest -q"), ("busy", ""),
        or ("idle", "") when the turn is over. Shown with the seconds it has taken so far."""
        if kind == "idle":
            self._activity = None
            if self._ticker is not None:
                self._ticker.stop()
                self._ticker = None
            self.remove_class("-busy")
            self.status_bar.set(left=self._idle_line())
            self._show_gauge()
            return
        if self._activity is not None and self._activity[0] == "stopping" and kind != "stopping":
            return  # the turn is being stopped: later news of it does not matter
        if self._activity is None or self._activity[:2] != (kind, what):
            self._activity = (kind, what, time.monotonic())
        self.add_class("-busy")
        if self._ticker is None:
            self._ticker = self.set_interval(1.0, self._show_activity)
            self._show_gauge()
        self._show_activity()

    def _show_activity(self) -> None:
        if self._activity is not None:
            kind, what, since = self._activity
            self.status_bar.set(left=Content.assemble(
                self._mode_chip(True), Content.styled(activity_text(kind, what, time.monotonic() - since), "$text-accent")))

    def set_commands(self, commands) -> None:
        """Slash commands offered for completion: SlashCommand, mappings of its fields, or names."""
        self._commands = [SlashCommand(c) if isinstance(c, str) else coerce(SlashCommand, c)
                          for c in commands]
        self.prompt.suggester = self._suggester()

    def set_files(self, paths: list[str]) -> None:
        """The workspace's indexed paths, which `@` completes in the prompt."""
        self._paths = sorted(paths)
        self.prompt.suggester = self._suggester()

    def _suggester(self) -> PromptSuggester:
        return PromptSuggester([f"{c.name} " if c.usage else c.name for c in self._commands], self._paths)

    # ---------------------------------------------------------- streaming
    async def begin_reply(self) -> None:
        """Show an empty reply that `stream_fragment` fills."""
        from textual.widgets import Markdown  # lazy: markdown-it, +40 ms; loads when the first reply starts

        if self._stream is not None:
            await self.end_reply()
        self._reply_parts = []
        self._reply = Markdown(parser_factory=textual_parser)  # `__init__.py` stays as written
        box = VerticalScroll(self._reply, id="reply-box")
        await self.mount(box, before=self.query_one("#plan-box"))
        box.anchor()
        self._stream = Markdown.get_stream(self._reply)
        self.add_class("-streaming")

    async def stream_fragment(self, fragment: str) -> None:
        """Append a fragment of the reply; only the last block is re-parsed."""
        if self._stream is None:
            await self.begin_reply()
        assert self._stream is not None
        self._reply_parts.append(fragment)
        await self._stream.write(safe(fragment))  # an escape in a reply is shown, never obeyed

    async def end_reply(self, *, id: str = "", tokens: int | None = None, ts: float | None = None,
                        text: str | None = None) -> Turn | None:
        """Finish the reply: it moves into the transcript as an assistant turn (`text`, when given, is
        what was recorded, in place of what streamed)."""
        if self._stream is None:
            return None
        streamed = await self.discard_reply()
        turn = Turn("assistant", streamed if text is None else text, id=id, tokens=tokens,
                    ts=time.time() if ts is None else ts)
        self.transcript.append(turn)
        return turn

    async def discard_reply(self) -> str:
        """Take the reply being streamed off the screen (a retry voids it); returns what had streamed."""
        if self._stream is None:
            return ""
        await self._stream.stop()
        self._stream = None
        text = self.reply_text
        self._reply_parts = []
        if self._reply is not None:
            await self.query_one("#reply-box").remove()
            self._reply = None
        self.remove_class("-streaming")
        return text

    # ------------------------------------------------------------- input
    @on(Input.Changed, "#prompt")
    def _show_hints(self, event: Input.Changed) -> None:
        value = event.value
        hints = ""
        if value.startswith("/") and " " not in value:
            typed = value.lower()
            matches = [c for c in self._commands if c.name.lower().startswith(typed)][:MAX_HINTS]
            hints = "\n".join(f"{c.name} {c.usage}".rstrip().ljust(24) + f" {c.help}"
                              for c in matches) or f"no command starts with {value}"
        elif (typed := file_token(value)) is not None and self._paths:
            hints = "\n".join(path_hints(self._paths, typed, MAX_HINTS)) or f"no indexed file holds {typed}"
        self.query_one("#command-hints", Static).update(hints)
        self.set_class(bool(hints), "-hints")

    @on(Input.Submitted, "#prompt")
    def _submit(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if text.startswith("/"):
            name, _, args = text.partition(" ")
            known = {c.name.lower(): c.name for c in self._commands}
            if name.lower() not in known:
                # said in the chat; the prompt was cleared for what comes next: up brings the line back
                self.add_turn(Turn("error", f"unknown command {name}: /help lists them (up brings the line "
                                            "back to fix it)", ts=time.time()))
                return
            message: BackendRequest = self.CommandSubmitted(known[name.lower()], args.strip(), text)
        else:
            message = self.Submitted(text)
        self.transcript.action_last()  # what was sent, and the answer to it, are what matter now
        self.post_message(message)

    @on(Transcript.TurnActivated)
    def _turn_activated(self, event: Transcript.TurnActivated) -> None:
        if event.turn.role == "redaction" and not event.turn.result:
            self.post_message(self.OriginalRequested(event.turn))

    def action_cancel(self) -> None:
        """Stop the agent, whatever it is doing (the app binds escape to this while it works)."""
        if self.busy:
            self.post_message(self.CancelRequested())
            self.set_activity("stopping")

    def palette_commands(self):
        yield "Chat: focus prompt", "Type a prompt or a slash command", self.prompt.focus
        yield "Chat: browse turns", "Select turns; enter expands tool calls", self.transcript.focus
        yield "Chat: jump to latest", "Scroll to the newest turn", self.transcript.action_last
        yield ("Chat: expand/collapse turn", "Toggle the selected tool call or marker",
               self.transcript.action_toggle_turn)
        yield "Chat: stop the agent", "Stop the model call, tool or command running now", self.action_cancel
        for command in self._commands:
            usage = f"{command.name} {command.usage}".rstrip()
            if command.usage and not command.usage.startswith("["):  # arguments to give: the prompt takes them
                yield f"Command {command.name}", f"{usage}: {command.help} (typed in the prompt for you to " \
                      "finish)", partial(self._type_command, command.name)
            else:
                yield f"Command {command.name}", f"{usage}: {command.help}", partial(self._run_command, command.name)

    def _type_command(self, name: str) -> None:
        self.prompt.value = f"{name} "
        self.prompt.cursor_position = len(self.prompt.value)
        self.prompt.focus()

    def _run_command(self, name: str) -> None:
        """Send `name` as if typed in the prompt and entered (what was there before is kept in its history)."""
        if self.prompt.value.strip():
            self.prompt.remember(self.prompt.value)
        self.prompt.value = name
        self.prompt.focus()
        self.prompt.action_submit()
