"""Checkpoints of the files the agent changes, and taking changes back: undo, rewind, fork, diff.

Before the first change to a file in a user turn, what the file holds (or that it does not exist)
is kept: its bytes as a content-addressed blob in the state folder (`checkpoints/<sha[:2]>/<sha>`,
written once, atomically) and a `checkpoint` record in the session log naming the turn, the path,
the hash and the mode (sessions/README.md). Blob first, then the record, then the tool writes: a
kill at any point leaves at worst a checkpoint of a change that never happened, which restores the
bytes the file still holds.

Everything else is derived from the log alone (so the CLI does it with no agent running):

* the *active* checkpoints are those no later `rewind` record with `files` took back;
* what the agent last left in each file is the `after` hash of the last tool record's `edits` entry
  (a checkpoint record also says what the file held when it was taken), so a file someone else
  changed since is found by its hash, and undo refuses in one line naming it rather than lose that
  change; a change made between two of the agent's turns, found when the later turn checkpoints it,
  refuses a rewind across both;
* restoring a file is an atomic replace (or an unlink of a file the agent created), its path resolved
  from the workspace root with no link followed at any part (fsutil.replace_beneath: a folder swapped for
  a link meanwhile stops the restore there, as a kill would), and the `rewind`
  record is appended after every file is restored. A kill midway leaves each file whole, either
  restored or not; the next undo accepts a file holding any content of the agent's own trail (a
  checkpoint or the result of one of its edits), so it finishes. Just before a tool changes a file,
  an `intent` record names what the file will hold (written without an fsync of its own: the tool
  record's fsync covers it, and a killed process loses no written line), so a file killed between the
  tool's write and its tool record holds bytes the trail knows, and undo takes them back too.

A conversation rewind appends a `rewind` record with `conversation`; sessions.modelview.seen takes those
turns out of every later request (and a summary that covers them), never out of the log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..errors import WorkstationError
from ..fsutil import (LinkOnTheWay, atomic_write, open_beneath, open_state, read_beneath, replace_beneath,
                      sha256_bytes, unlink_beneath)
from ..sandbox.protect import Protected
from ..paths import check_entry
from ..sessions.log import LogView, Session, SessionError
from ..sessions.records import Checkpoint as CheckpointRecord, Intent, Rewind, Tool
from ..sessions.turns import starts_turn
from ..textdiff import file_diff

if TYPE_CHECKING:
    from ..paths import Paths


class UndoRefused(WorkstationError):
    """A file to restore was changed by someone else since the agent's last change to it."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Checkpoint:
    turn: str  # id of the user record of the turn
    number: int  # that turn's number (sessions.turns: the log's user messages, 1-based)
    path: str
    before: str | None  # sha256 of the content, None: the file did not exist
    mode: int | None
    drift: bool = False  # the file was not what the agent had left in it when this was taken (History.drifts)


@dataclass
class History:
    """The checkpoints and file states a session log describes (`history`)."""

    users: list[str] = field(default_factory=list)  # user record ids in order: turn N is users[N-1]
    active: list[Checkpoint] = field(default_factory=list)
    expected: dict[str, str | None] = field(default_factory=dict)  # path -> what the agent left (sha)
    touched: dict[str, Checkpoint] = field(default_factory=dict)  # path -> its first active checkpoint
    # path -> turns whose checkpoint found the file changed since the agent's last change (kept after an
    # undo of that turn: the content it restores is someone else's, which a rewind further back would lose)
    drifts: dict[str, list[int]] = field(default_factory=dict)
    # path -> every content it is known to have held from the agent's side: checkpoints (whose bytes are
    # blobs) and the results of its edits. Bytes outside this set are someone else's.
    known: dict[str, set[str | None]] = field(default_factory=dict)

    def turn_of(self, number: int) -> str:
        if not 1 <= number <= len(self.users):
            raise WorkstationError(f"no user turn {number}: this session has {len(self.users)}")
        return self.users[number - 1]


def history(view: "LogView") -> History:
    h = History()
    for record in view.records:
        if starts_turn(record):  # user turn N is turn N as sessions.turns numbers them
            h.users.append(record.id)
        elif isinstance(record, CheckpointRecord):
            path = record.path
            if not path:
                continue
            before = record.before if record.existed is not False else None
            drift = path in h.expected and h.expected[path] != before
            cp = Checkpoint(record.turn, _number(h, record.turn), path, before, record.mode, drift)
            h.active.append(cp)
            if drift:
                h.drifts.setdefault(path, []).append(cp.number)
            h.expected[path] = before
            h.known.setdefault(path, set()).add(before)
        elif isinstance(record, Intent) and record.path:
            after = record.after if record.exists is not False else None
            h.known.setdefault(record.path, set()).add(after)
        elif isinstance(record, Tool) and record.ok:
            for entry in record.edits or ():
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    h.expected[entry["path"]] = entry.get("after")
                    h.known.setdefault(entry["path"], set()).add(entry.get("after"))
        elif isinstance(record, Rewind) and record.files is not None:
            number = _number(h, record.to)
            gone = [c for c in h.active if c.number >= number]
            h.active = [c for c in h.active if c.number < number]
            for cp in _earliest(gone).values():
                h.expected[cp.path] = cp.before
    h.touched = _earliest(h.active)
    return h


def _number(h: History, user_id) -> int:
    try:
        return h.users.index(user_id) + 1
    except ValueError:
        return len(h.users) or 1  # a turn whose user line is unreadable: the latest one


def _earliest(checkpoints: Iterable[Checkpoint]) -> dict[str, Checkpoint]:
    first: dict[str, Checkpoint] = {}
    for cp in checkpoints:
        first.setdefault(cp.path, cp)
    return first


def _current(protected: Protected, rel: str) -> bytes | None:
    """What `rel` holds now (None: nothing), read with no link followed at any part of its path."""
    _, now_rel = protected.confine_write(rel)
    if now_rel != rel:  # rel was recorded as its real path: a link now stands on the way (a planted one)
        raise WorkstationError(f"{rel} is now a link to {now_rel}; nothing was changed (never restored "
                               "through a link)")
    try:
        return read_beneath(protected.root, rel)
    except OSError as err:  # NOT_REGULAR: a folder, a FIFO, a device
        raise WorkstationError(f"{rel} is no longer a regular file ({err.strerror}); nothing was changed") from None


@dataclass
class Restored:
    """What an undo or rewind did."""

    to: str  # the user record id the files (and maybe the conversation) went back to
    turn: int
    files: list[str]
    conversation: bool
    how: str

    def describe(self) -> str:
        what = []
        if self.how == "undo" or self.files:
            what.append(f"{len(self.files)} file{'s' if len(self.files) != 1 else ''} restored"
                        + (f" ({', '.join(self.files[:6])}{', …' if len(self.files) > 6 else ''})" if self.files else ""))
        if self.conversation:
            what.append(f"the model no longer sees turns from user turn {self.turn} on")
        verb = "undid" if self.how == "undo" else "rewound to before"
        return f"{verb} user turn {self.turn}: " + "; ".join(what)


    def update_text(self) -> str:
        """What the model is told (agent.updates): which files are back as they were, and since when."""
        listed = ", ".join(self.files[:20]) + (f" and {len(self.files) - 20} more" if len(self.files) > 20 else "")
        what = "undid the file changes of" if self.how == "undo" else "rewound the files to before"
        return (f"The user {what} user turn {self.turn}: {listed} {'is' if len(self.files) == 1 else 'are'} back "
                f"as {'it was' if len(self.files) == 1 else 'they were'} before that turn. What you changed in "
                "them since no longer stands; read them again before relying on their content.")


class Checkpoints:
    """A session's checkpoints over one workspace: taken by the live agent, used by /undo and the CLI."""

    def __init__(self, paths: "Paths", session: "Session", private: Iterable[Path] = ()):
        self.paths = paths
        self.root = paths.root
        self.session = session
        self.protected = Protected(paths.root, tuple(private) or (paths.state,))
        self.blobs = paths.state / "checkpoints"
        self.staging = paths.staging
        self._taken: set[tuple[str, str]] = set()  # (turn id, path) kept already
        self._rewinds = 0  # rewind records in the log when _taken was last valid

    # ------------------------------------------------------------------ taking
    def take(self, turn: str, paths: Iterable[str], *, resolved: bool = False) -> None:
        """Keep what each path holds now, once per turn; a path the tools will refuse is skipped (they
        say why). `resolved`: the paths are workspace-relative as the call that writes them resolved them
        (tools.invocation.Target), kept as they are: resolving them again could name another file than the
        one the call will write (a link swapped in between)."""
        for path in paths:
            try:
                rel = path if resolved else self.protected.confine_write(path)[1]
            except WorkstationError:
                continue
            if (turn, rel) in self._taken and not self._rewound_elsewhere():
                continue
            try:  # no link followed at any part of the path (the tool's write will not follow one either)
                fd = open_beneath(self.protected.root, rel)
            except (FileNotFoundError, NotADirectoryError):
                fd = None
            except (OSError, LinkOnTheWay):
                continue  # a folder, a link, a FIFO, a link among its folders: no tool writes it
            fields: dict = {"turn": turn, "path": rel, "existed": fd is not None, "tokens": 0}
            if fd is not None:
                with os.fdopen(fd, "rb") as fh:
                    mode = os.fstat(fh.fileno()).st_mode & 0o7777
                    data = fh.read()
                fields.update(before=self.keep(data), mode=mode)
            self.session.append("checkpoint", **fields)
            self._taken.add((turn, rel))

    def intend(self, turn: str, rel: str, after: str | None) -> None:
        """Say, just before a tool changes `rel`, what it will hold (Services.intend)."""
        fields: dict = {"after": after} if after is not None else {"exists": False}
        self.session.append("intent", sync=False, turn=turn, path=rel, tokens=0, **fields)

    def _rewound_elsewhere(self) -> bool:
        """Whether another process (`workstation session undo`) took changes back since this one last
        looked: its files then hold restored bytes, which a change in this turn must checkpoint again."""
        rewinds = sum(1 for r in self.session.read().records if isinstance(r, Rewind))
        if rewinds == self._rewinds:
            return False
        self._rewinds = rewinds
        self._taken.clear()
        return True

    def keep(self, data: bytes) -> str:
        """Store `data` as a blob named by its hash (once), atomically through the staging folder. A kill
        leaves no blob or a whole one (and at worst a temporary file fsutil.sweep_staging removes); the
        folder is not fsynced here: the checkpoint record appended next is fsynced like every log line,
        which commits the rename on a journalling filesystem. `content` checks the hash anyway, so a blob
        a power cut damaged is reported by name, never restored."""
        sha = sha256_bytes(data)
        blob = self._blob(sha)
        check_entry(blob, folder=False)  # a planted link there would stand for these bytes
        if blob.exists():
            return sha
        blob.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(blob, data, 0o600, staging=self.staging, sync_dir=False)
        return sha

    def _blob(self, sha: str) -> Path:
        return self.blobs / sha[:2] / sha

    def content(self, sha: str) -> bytes:
        try:  # never through a link or from a FIFO: a blob may come with a cloned repository
            with os.fdopen(open_state(self._blob(sha), os.O_RDONLY), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise WorkstationError(f"checkpoint blob {sha[:12]} is missing from {self.blobs}") from None
        if sha256_bytes(data) != sha:
            raise WorkstationError(f"checkpoint blob {sha[:12]} is damaged; nothing was changed")
        return data

    # ------------------------------------------------------------------ taking back
    def undo(self) -> Restored:
        """Restore the files of the newest user turn that changed any."""
        h = history(self.session.read())
        if not h.active:
            raise WorkstationError("nothing to undo: no file change of this session is left to take back")
        number = max(c.number for c in h.active)
        return self._restore(h, number, conversation=False, how="undo")

    def rewind(self, number: int, *, files: bool = True, conversation: bool = True) -> Restored:
        """Back to before user turn `number`: its files, the model's view of the conversation, or both."""
        if not files and not conversation:
            raise WorkstationError("rewind what? files, conversation or both")
        h = history(self.session.read())
        h.turn_of(number)
        return self._restore(h, number, conversation=conversation, how="rewind", files=files)

    def _restore(self, h: History, number: int, *, conversation: bool, how: str, files: bool = True) -> Restored:
        to = h.turn_of(number)
        plan = _earliest(c for c in h.active if c.number >= number) if files else {}
        work = []
        for path, cp in plan.items():
            now = _current(self.protected, path)
            now_sha = None if now is None else sha256_bytes(now)
            crosses = any(cp.number < turn for turn in h.drifts.get(path, ()))
            # a file holding what the agent left, or any content of the agent's trail (an undo a kill cut
            # short left some files restored), loses nothing someone else wrote
            if crosses or (now_sha != h.expected.get(path) and now_sha not in h.known.get(path, ())):
                raise UndoRefused(f"{how} refused: {path} was changed by someone else since the agent's last "
                                  f"change to it; nothing was restored (/diff {path} shows the difference)", path)
            if now_sha != cp.before:
                work.append((cp, None if cp.before is None else self.content(cp.before)))
        for done_count, (cp, data) in enumerate(work):  # every check passed and every blob read: now change files
            try:  # resolved from the root with no link followed: a folder swapped for a link since is refused
                if data is None:
                    unlink_beneath(self.protected.root, cp.path)
                else:
                    replace_beneath(self.protected.root, cp.path, data, cp.mode, staging=self.staging, create=True)
            except LinkOnTheWay as err:  # as a kill midway: the next undo finishes (the trail knows each file)
                raise WorkstationError(f"{how} stopped: {err}; {done_count} of {len(work)} files were restored, "
                                       f"run it again when the link is gone") from None
        restored = sorted(plan)
        self._taken.clear()  # a file changed again in this turn needs a checkpoint of its restored bytes
        self.session.append("rewind", to=to, turn=number, files=restored if files else None,
                            conversation=conversation or None, how=how, tokens=0)
        done = Restored(to, number, restored, conversation, how)
        if restored:  # the model learns of it at the end of its next request, not by an edit of what it saw
            self.session.system(done.update_text(), update={"restored": restored, "turn": number, "how": how})
        self._rewinds = sum(1 for r in self.session.read().records if isinstance(r, Rewind))
        return done

    # ------------------------------------------------------------------ looking
    def diff(self, path: str | None = None) -> list[dict]:
        """The session's net change per file: the first active checkpoint against the file now."""
        h = history(self.session.read())
        out = []
        for rel, cp in sorted(h.touched.items()):
            if path is not None and rel != path:
                continue
            now = _current(self.protected, rel)
            before = None if cp.before is None else self.content(cp.before)
            if before == now:
                continue
            d = file_diff(before, now, rel)
            agent_left = h.expected.get(rel)
            out.append({"path": rel, "before": cp.before, "after": None if now is None else sha256_bytes(now),
                        "added": d.added, "removed": d.removed, "diff": d.text,
                        "changed_outside": (None if now is None else sha256_bytes(now)) != agent_left})
        if path is not None and not out and path not in h.touched:
            raise WorkstationError(f"{path}: this session did not change it")
        return out


def fork(paths: "Paths", session: "Session", number: int | None = None, slug: str | None = None) -> "Session":
    """A new session holding this one's records up to before user turn `number` (all of them when None);
    the files are left as they are."""
    view = session.read()
    records = view.records
    if number is not None:
        to = history(view).turn_of(number)
        records = records[: next(i for i, r in enumerate(records) if r.id == to)]
    if slug is not None:
        new = Session.create(paths, slug)
    else:
        for n in range(1, 1000):
            try:
                new = Session.create(paths, f"{session.slug[:88]}-fork" + (f"-{n}" if n > 1 else ""))
                break
            except SessionError as err:
                if "already exists" not in str(err):
                    raise
        else:
            raise WorkstationError(f"no free name for a fork of {session.slug}")
    new.append_records(records)
    new.system(f"[forked from {session.slug}" + (f" before user turn {number}]" if number else "]"),
               notice="fork", forked_from=session.slug)
    return new
