"""The knowledge map pane: a lazy tree of folders → files → symbols, and a preview.

Data down: `set_root(entries)`, `set_children(dir_path, entries)`,
`set_symbols(file_path, symbols)`, `update_entry(entry)` (returns whether the
file's symbols are on screen, so the caller sends them again),
`update_freshness(path, state)`, `show_preview(path, start, end, text)`,
`set_progress(done, total, label)`.
A ✓ means the row shows what the index holds for a file the index has checked
against the disk; a change on its way in shows … until its new facts arrive.
Messages up: `ChildrenRequested(path)` (a folder opened for the first time),
`SymbolsRequested(path)` (a file opened for the first time), `FileSelected(path)`,
`SymbolSelected(path, name, start, end)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import ProgressBar, Static, Tree
from textual.widgets.tree import TreeNode

from ..messages import BackendRequest
from ..viewdata import FRESHNESS_STATES, MapEntry, SymbolEntry, coerce
from .turn_render import foreground_only

# glyphs differ by shape, not only colour, so the state reads in any theme
BADGES = {"fresh": "✓", "stale": "!", "indexing": "…", "deleted": "✗", "unknown": "?"}
SYMBOL_GLYPHS = {"class": "◆", "function": "ƒ", "method": "ƒ", "interface": "◇", "struct": "◆"}
PURPOSE_CHARS = 48


@dataclass
class MapNode:
    kind: str  # dir | file | symbol | pending
    path: str
    entry: MapEntry | SymbolEntry | None = None
    loaded: bool = False
    requested: bool = False  # asked the backend for children, answer pending


class KnowledgeTree(Tree[MapNode]):
    COMPONENT_CLASSES = {
        "knowledge-tree--fresh", "knowledge-tree--stale", "knowledge-tree--indexing",
        "knowledge-tree--deleted", "knowledge-tree--unknown", "knowledge-tree--meta",
    }
    DEFAULT_CSS = """
    KnowledgeTree {
        background: $surface;
        & > .knowledge-tree--fresh { color: $text-success; }
        & > .knowledge-tree--stale { color: $text-warning; text-style: bold; }
        & > .knowledge-tree--indexing { color: $text-accent; }
        & > .knowledge-tree--deleted { color: $text-error; text-style: bold; }
        & > .knowledge-tree--unknown { color: $text-muted; }
        & > .knowledge-tree--meta { color: $text-muted; }
    }
    """

    def render_label(self, node: TreeNode[MapNode], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        data = node.data
        if data is None:
            return text
        meta = self._component("meta")
        if isinstance(data.entry, MapEntry) and data.kind == "file":
            entry = data.entry
            if entry.lines is not None:
                text.append(f" {entry.lines}L", meta)
            state = entry.freshness
            text.append(f" {BADGES[state]}", self._component(state))
            if entry.purpose:
                purpose = entry.purpose if len(entry.purpose) <= PURPOSE_CHARS else \
                    entry.purpose[: PURPOSE_CHARS - 1] + "…"
                text.append(f"  {purpose}", meta)
        elif isinstance(data.entry, SymbolEntry):
            text.append(f" {data.entry.start}–{data.entry.end}", meta)
        return text

    def _component(self, name: str) -> Style:
        # labels are measured before the stylesheet reaches a new tree: no style then
        style = self.get_component_rich_style(f"knowledge-tree--{name}", default=Style())
        return foreground_only(style)


class MapPane(Vertical):
    ALLOW_MAXIMIZE = True
    BORDER_TITLE = "Knowledge map"
    DEFAULT_CSS = """
    MapPane {
        #index-progress-row { height: 1; display: none; background: $panel; padding: 0 1; }
        &.-indexing #index-progress-row { display: block; }  /* mounted on first use */
        #index-progress-label { width: auto; color: $text-muted; margin-right: 1; }
        #map-tree { height: 1fr; overflow-x: hidden; }
        #preview-title {
            height: 1;
            background: $panel;
            color: $text;
            padding: 0 1;
            text-overflow: ellipsis;
            text-wrap: nowrap;
        }
        #preview-box { height: 40%; background: $surface; }
        #preview { width: auto; }
    }
    """

    @dataclass(eq=False)
    class ChildrenRequested(BackendRequest):
        """A folder opened for the first time: the backend calls `set_children(path, entries)`."""

        path: str

    @dataclass(eq=False)
    class SymbolsRequested(BackendRequest):
        """A file opened for the first time (or again after it changed): `set_symbols(path, symbols)`."""

        path: str

    @dataclass(eq=False)
    class FileSelected(BackendRequest):
        """A file was chosen: the backend reads its head and calls `show_preview`."""

        path: str

    @dataclass(eq=False)
    class SymbolSelected(BackendRequest):
        """A symbol was chosen: the backend reads lines start..end and calls show_preview."""

        path: str
        name: str
        start: int
        end: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._by_path: dict[str, TreeNode[MapNode]] = {}
        self._live: dict[str, str] = {}  # newest freshness told per path, over older data
        self._progress: tuple[Static, ProgressBar] | None = None  # mounted on first use

    def compose(self) -> ComposeResult:
        tree = KnowledgeTree(".", MapNode("dir", "", loaded=True), id="map-tree")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree
        yield Static("", id="preview-title", markup=False)
        with VerticalScroll(id="preview-box"):
            yield Static("", id="preview")

    @property
    def knowledge_tree(self) -> KnowledgeTree:
        return self.query_one(KnowledgeTree)

    def node_for(self, path: str) -> TreeNode[MapNode] | None:
        return self._by_path.get(path)

    # ----------------------------------------------------------- data in
    def set_root(self, entries, label: str = ".") -> None:
        """Replace the tree with the workspace's top-level folders and files."""
        tree = self.knowledge_tree
        tree.clear()
        tree.root.set_label(label)
        self._by_path.clear()
        self._add_entries(tree.root, entries)
        tree.root.expand()
        tree.cursor_line = 0  # enter acts on the first row at once, as a person expects after F2

    def set_children(self, path: str, entries) -> bool:
        """Fill a folder; False if that folder is no longer in the tree."""
        node = self.knowledge_tree.root if path in ("", ".") else self._by_path.get(path)
        if node is None or node.data is None or node.data.kind != "dir":
            return False
        self._forget_below(node)
        node.remove_children()
        self._add_entries(node, entries)
        node.data.loaded = True
        return True

    def set_symbols(self, path: str, symbols) -> bool:
        """Fill a file with its symbols (flat, `parent` names the enclosing one)."""
        node = self._by_path.get(path)
        if node is None or node.data is None or node.data.kind != "file":
            return False
        node.remove_children()
        items = sorted((coerce(SymbolEntry, s) for s in symbols), key=lambda s: s.start)
        names = {s.name for s in items}
        children: dict[str, list[SymbolEntry]] = {}
        for sym in items:
            children.setdefault(sym.parent if sym.parent in names else "", []).append(sym)

        def add(parent: TreeNode[MapNode], syms: list[SymbolEntry], depth: int) -> None:
            for sym in syms:
                kids = children.get(sym.name, []) if depth < 8 else []
                glyph = SYMBOL_GLYPHS.get(sym.kind, "·")
                child = parent.add(f"{glyph} {sym.name}", MapNode("symbol", path, sym),
                                   allow_expand=bool(kids))
                if kids:
                    add(child, kids, depth + 1)

        add(node, children.get("", []), 0)
        if not items:
            node.add_leaf("(no symbols)", MapNode("pending", path))
        node.data.loaded = True
        node.data.requested = False
        if self._live.get(path) == "indexing":  # the symbols a changed file waited for have arrived
            self.update_freshness(path, "fresh")
        return True

    def update_entry(self, entry) -> bool:
        """New facts about a folder or file (purpose written, line count changed), with the freshness
        they carry. True when the file's symbols are on screen: they may have moved too, and the
        caller sends them with `set_symbols` (until then the badge says …). A file whose symbols were
        never shown asks for them again when opened."""
        entry = coerce(MapEntry, entry)
        self._live[entry.path] = entry.freshness
        node = self._by_path.get(entry.path)
        if node is None or node.data is None:
            return False
        data = node.data
        data.entry = entry
        symbols_shown = data.kind == "file" and data.loaded
        if symbols_shown:
            data.entry = replace(entry, freshness="indexing")
            self._live[entry.path] = "indexing"
        elif data.kind == "file" and not data.requested:
            node.remove_children()  # a stale "loading…" or old symbols: the next expand asks again
        node.refresh()
        return symbols_shown

    def update_freshness(self, path: str, state: str) -> bool:
        """Change a file's badge at once; remembered for the file if not loaded yet."""
        if state not in FRESHNESS_STATES:
            raise ValueError(f"freshness {state!r} is not one of {', '.join(sorted(FRESHNESS_STATES))}")
        self._live[path] = state
        node = self._by_path.get(path)
        if node is None or node.data is None or not isinstance(node.data.entry, MapEntry):
            return False
        node.data.entry = replace(node.data.entry, freshness=state)  # never mutate the caller's data
        node.refresh()
        return True

    def freshness(self, path: str) -> str | None:
        node = self._by_path.get(path)
        if node is None or node.data is None or not isinstance(node.data.entry, MapEntry):
            return None
        return node.data.entry.freshness

    def show_preview(self, path: str, start: int, end: int, text: str, *,
                     purpose: str = "", language: str | None = None) -> None:
        """Show lines start..end of a file (`text` holds exactly those lines)."""
        from textual.highlight import highlight  # lazy: pygments, +9 ms; loads on the first preview

        title = f"{path}:{start}–{end}" + (f" · {purpose}" if purpose else "")
        self.query_one("#preview-title", Static).update(title)
        expected = len(text.splitlines()) or 1
        lines = highlight(text, language=language, path=path).split("\n")[:expected]
        width = len(str(start + max(0, len(lines) - 1)))
        numbered = [Content.styled(f"{n:>{width}} ", "$text-muted") + line
                    for n, line in enumerate(lines, start)]
        self.query_one("#preview", Static).update(Content("\n").join(numbered))
        self.query_one("#preview-box", VerticalScroll).scroll_home(animate=False)

    def set_progress(self, done: int | None, total: int | None = None, label: str = "indexing") -> None:
        """Show indexing progress; `done=None` hides the bar."""
        if done is None:
            self.remove_class("-indexing")
            return
        if self._progress is None:
            self._progress = (Static(label, id="index-progress-label"),
                              ProgressBar(total=total, show_eta=False, id="index-progress"))
            self.mount(Horizontal(*self._progress, id="index-progress-row"), before=self.knowledge_tree)
        text, bar = self._progress
        text.update(label)
        bar.update(total=total, progress=done)
        self.add_class("-indexing")

    # ------------------------------------------------------------ internals
    def _add_entries(self, parent: TreeNode[MapNode], entries) -> None:
        items = [coerce(MapEntry, e) for e in entries]
        items.sort(key=lambda e: (e.kind != "dir", e.name.lower()))
        for entry in items:
            if entry.path in self._live:
                entry = replace(entry, freshness=self._live[entry.path])
            label = f"{entry.name}/" if entry.kind == "dir" else entry.name
            node = parent.add(label, MapNode(entry.kind, entry.path, entry), allow_expand=True)
            self._by_path[entry.path] = node

    def _forget_below(self, node: TreeNode[MapNode]) -> None:
        for child in node.children:
            self._forget_below(child)
            if child.data is not None and child.data.kind in ("dir", "file"):
                self._by_path.pop(child.data.path, None)

    @on(Tree.NodeExpanded, "#map-tree")
    def _expanded(self, event: Tree.NodeExpanded[MapNode]) -> None:
        data = event.node.data
        if data is None or data.loaded or data.requested or data.kind not in ("dir", "file"):
            return
        data.requested = True
        if not event.node.children:
            event.node.add_leaf("loading…", MapNode("pending", data.path))
        request = self.ChildrenRequested if data.kind == "dir" else self.SymbolsRequested
        self.post_message(request(data.path))

    @on(Tree.NodeSelected, "#map-tree")
    def _selected(self, event: Tree.NodeSelected[MapNode]) -> None:
        data = event.node.data
        if data is None:
            return
        if data.kind == "file":
            self.post_message(self.FileSelected(data.path))
        elif data.kind == "symbol" and isinstance(data.entry, SymbolEntry):
            sym = data.entry
            self.post_message(self.SymbolSelected(data.path, sym.name, sym.start, sym.end))

    def palette_commands(self):
        yield "Map: focus tree", "Browse folders, files and symbols", self.knowledge_tree.focus
        yield "Map: collapse all", "Fold every folder", self._collapse_all

    def _collapse_all(self) -> None:
        for node in self.knowledge_tree.root.children:
            node.collapse_all()
