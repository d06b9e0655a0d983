"""Themes: loaded from data files, registered, readable; styles use theme variables only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.color import Color

from workstation.tui import themes as themes_module
from workstation.tui.themes import load_themes, theme_dirs

SHIPPED = {"workstation-dark", "workstation-light", "workstation-high-contrast"}
TUI = Path(themes_module.__file__).parent

# (text, background) pairs the app draws; non-text pairs need 3:1 (WCAG 1.4.11)
TEXT_PAIRS = [("text", "background"), ("text", "surface"), ("text", "panel"),
              ("text-muted", "surface"), ("text-muted", "panel"), ("text-primary", "surface"),
              ("text-secondary", "surface"), ("text-accent", "surface"), ("text-warning", "surface"),
              ("text-error", "surface"), ("text-success", "surface"),
              ("block-cursor-foreground", "block-cursor-background"),
              ("footer-key-foreground", "footer-background"),
              ("footer-foreground", "footer-background")]
FRAME_PAIRS = [("border", "surface"), ("border-blurred", "surface")]


def luminance(color: Color) -> float:
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast(a: Color, b: Color) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def resolve(variables: dict[str, str], name: str, over: str) -> Color:
    """A design variable as the terminal shows it over `over` ('auto N%' and alpha blended)."""
    value = variables[name]
    under = resolve(variables, over, "background") if name != over else Color(0, 0, 0)
    if value.startswith("auto"):
        parts = value.split()
        alpha = float(parts[1].rstrip("%")) / 100 if len(parts) > 1 else 1.0
        return under + under.get_contrast_text(alpha)
    color = Color.parse(value)
    return under + color if color.a < 1 else color


def test_shipped_themes_load_from_the_themes_folder():
    themes, problems = load_themes()
    assert problems == []
    assert SHIPPED <= set(themes)
    assert {themes[name].dark for name in SHIPPED} == {True, False}
    assert theme_dirs()[0].name == "themes" and (theme_dirs()[0] / "workstation-dark.toml").exists()


@pytest.mark.parametrize("name,minimum", [("workstation-high-contrast", 7.0),
                                          ("workstation-dark", 4.5), ("workstation-light", 4.5)])
def test_text_contrast(name, minimum):
    """High contrast reaches WCAG AAA (7:1) everywhere; the others at least AA (4.5:1)."""
    themes, _ = load_themes()
    variables = themes[name].to_color_system().generate()
    low = {f"{a} on {b}": round(contrast(resolve(variables, a, b), resolve(variables, b, "background")), 2)
           for a, b in TEXT_PAIRS}
    assert {pair: r for pair, r in low.items() if r < minimum} == {}
    frames = {f"{a} on {b}": contrast(resolve(variables, a, b), resolve(variables, b, "background"))
              for a, b in FRAME_PAIRS}
    assert min(frames.values()) >= 3.0, frames


def test_a_bad_theme_file_is_reported_and_the_rest_still_load(tmp_path):
    (tmp_path / "good.toml").write_text('name = "good"\nprimary = "#336699"\n')
    (tmp_path / "typo.toml").write_text('name = "typo"\nprimary = "#336699"\nprimray = "#000"\n')
    (tmp_path / "colour.toml").write_text('name = "colour"\nprimary = "blurple"\n')
    (tmp_path / "broken.toml").write_text('name = "broken\n')
    themes, problems = load_themes([tmp_path])
    assert list(themes) == ["good"]
    assert len(problems) == 3
    assert any("typo.toml: unknown key 'primray'" in p for p in problems)
    assert any("colour.toml: primary: 'blurple' is not a colour" in p for p in problems)
    assert any("broken.toml: not valid TOML" in p for p in problems)
    assert all("\n" not in p for p in problems)


def test_a_user_theme_overrides_and_joins(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path))
    (tmp_path / "themes").mkdir()
    (tmp_path / "themes" / "mine.toml").write_text('name = "mine"\nprimary = "#ff00ff"\ndark = false\n')
    themes, problems = load_themes()
    assert problems == [] and "mine" in themes and SHIPPED <= set(themes)


def _stylesheets() -> dict[str, str]:
    sheets = {str(p.relative_to(TUI)): p.read_text() for p in TUI.rglob("*.tcss")}
    for path in TUI.rglob("*.py"):
        for n, block in enumerate(re.findall(r'DEFAULT_CSS = """(.*?)"""', path.read_text(), re.S)):
            sheets[f"{path.relative_to(TUI)}#{n}"] = block
    return sheets


def test_styles_reference_theme_variables_only():
    sheets = _stylesheets()
    assert "app.tcss" in sheets and len(sheets) >= 8
    colour_props = re.compile(
        r"^\s*(color|background|border(?:-[a-z]+)*|outline(?:-[a-z]+)*|tint|background-tint|"
        r"scrollbar-[a-z-]*color|link-[a-z-]*)\s*:\s*([^;]+);", re.M)
    literal = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(|\b(red|green|blue|white|black|"
                         r"yellow|cyan|magenta|gray|grey|orange|purple)\b")
    offenders = []
    for where, css in sheets.items():
        for prop, value in colour_props.findall(css):
            if literal.search(value.split("/*")[0]):
                offenders.append(f"{where}: {prop}: {value}")
            elif prop in ("color", "background") and "$" not in value and value.strip() not in (
                    "transparent", "initial", "inherit", "auto"):
                offenders.append(f"{where}: {prop}: {value}")
    assert offenders == []


async def _pick(root, theme: str) -> None:
    from test_tui_live import wait_for
    from tui_support import settle, started
    from workstation.tui.app import WorkstationApp
    from workstation.tui.backend import LiveBackend
    from workstation.tui.run import configured_theme

    backend = LiveBackend(str(root), sidecar=False)
    app = WorkstationApp(backend, theme=configured_theme(str(root)))
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set())
        next(c for c in app.get_system_commands(app.screen) if c.title == f"Theme: {theme}").callback()
        await settle(pilot)
        await wait_for(pilot, lambda: configured_theme(str(root)) == theme)


async def test_a_theme_picked_in_the_app_is_kept_in_the_users_config_and_opens_next_time(tmp_path):
    """A look is the user's: the palette's pick goes to the user's config (every workspace opens with it), and
    the workspace's config, which a repository may carry, is not written for it."""
    from test_tui_live import make_repo
    from tui_support import started
    from workstation.paths import user_dir
    from workstation.runtime import Workspace
    from workstation.tui.app import WorkstationApp
    from workstation.tui.run import configured_theme

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        make_repo(tmp_path / name)
    workspace_config = tmp_path / "a" / ".workstation" / "config.toml"
    workspace_config.write_text("# my settings\n[memory]\nkeep_recent = 3  # turns\n")
    user_config = user_dir() / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text("[agent]\nmax_steps = 12  # mine\n")
    await _pick(tmp_path / "a", "workstation-light")
    assert workspace_config.read_text() == "# my settings\n[memory]\nkeep_recent = 3  # turns\n"
    assert user_config.read_text() == '[agent]\nmax_steps = 12  # mine\n\n[ui]\ntheme = "workstation-light"\n'
    assert configured_theme(str(tmp_path / "b")) == "workstation-light"  # another workspace opens with it
    ws = Workspace(str(tmp_path / "b"))
    try:
        assert ws.config.ui.theme == "workstation-light"
    finally:
        ws.close()
    again = WorkstationApp(theme=configured_theme(str(tmp_path / "b")))
    async with started(again) as pilot:
        await pilot.pause()
        assert again.theme == "workstation-light"


async def test_a_workspace_that_sets_its_theme_keeps_the_pick_in_its_own_config(tmp_path):
    """ui.theme is a SAFE key (workstation.trust): an untrusted workspace's config may set it, and then the pick
    changes it there (where the theme in force came from), leaving the user's config alone."""
    from test_tui_live import make_repo
    from workstation import trust
    from workstation.paths import user_dir
    from workstation.runtime import Workspace

    assert "theme" in trust.SAFE["ui"]
    make_repo(tmp_path)
    workspace_config = tmp_path / ".workstation" / "config.toml"
    workspace_config.write_text('[ui]\ntheme = "workstation-high-contrast"  # for demos\n')
    ws = Workspace(str(tmp_path))  # untrusted: its SAFE keys apply
    try:
        assert ws.config.ui.theme == "workstation-high-contrast"
    finally:
        ws.close()
    await _pick(tmp_path, "workstation-light")
    assert workspace_config.read_text() == '[ui]\ntheme = "workstation-light"  # for demos\n'
    assert not (user_dir() / "config.toml").exists() or "theme" not in (user_dir() / "config.toml").read_text()
