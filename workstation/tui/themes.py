"""Themes as data: every `*.toml` in the theme folders becomes a Textual `Theme`.

A theme file's keys are the fields of `textual.theme.Theme` (name, primary,
background, dark, ...) plus an optional `[variables]` table that overrides
derived design variables. Folders searched, later ones overriding earlier
themes of the same name:

1. `themes/` at the top of a source checkout,
2. `workstation/themes/` inside an installed wheel (force-included by pyproject),
3. `<user dir>/themes/` for a user's own themes.

A bad file never stops the app: it is skipped and reported as one line.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from ..paths import user_dir

DEFAULT_THEME = "workstation-dark"

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # .../workstation
_FIELDS = {f.name: f for f in dataclasses.fields(Theme)}
_COLOR_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent",
                 "foreground", "background", "surface", "panel", "boost")


def theme_dirs() -> list[Path]:
    """Folders that may hold theme files, lowest precedence first."""
    return [_PACKAGE_DIR.parent / "themes", _PACKAGE_DIR / "themes", user_dir() / "themes"]


def parse_theme(data: dict, source: str) -> Theme:
    """Build a Theme from a TOML table; raises ValueError naming the bad key."""
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ValueError(f"{source}: unknown key {unknown[0]!r}")
    for key in ("name", "primary"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"{source}: {key} is required and must be a string")
    for key in _COLOR_FIELDS:
        if key in data:
            _check_color(data[key], f"{source}: {key}")
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ValueError(f"{source}: variables must be a table")
    for key, value in variables.items():
        if not isinstance(value, str):
            raise ValueError(f"{source}: variables.{key} must be a string")
    for key in ("dark", "ansi"):
        if key in data and not isinstance(data[key], bool):
            raise ValueError(f"{source}: {key} must be true or false")
    for key in ("luminosity_spread", "text_alpha"):
        if key in data and not isinstance(data[key], (int, float)):
            raise ValueError(f"{source}: {key} must be a number")
    return Theme(**data)


def _check_color(value: object, where: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a colour string")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(f"{where}: {value!r} is not a colour") from None


def load_themes(dirs: list[Path] | None = None) -> tuple[dict[str, Theme], list[str]]:
    """Load every theme file; returns themes by name and one line per bad file."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for folder in theme_dirs() if dirs is None else dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                with open(path, "rb") as fh:
                    theme = parse_theme(tomllib.load(fh), path.name)
            except tomllib.TOMLDecodeError as err:
                problems.append(f"theme {path}: not valid TOML: {err}")
            except OSError as err:
                problems.append(f"theme {path}: cannot read: {err.strerror}")
            except ValueError as err:
                problems.append(f"theme {path.parent}/{err}")
            else:
                themes[theme.name] = theme
    return themes, problems
