"""Benchmarks that remember: each run's figures as JSON beside the last run's, and the change printed.

    run = Run("bench_import", {"gb": 1.0})       # the parameters that make two runs comparable
    run.add("import throughput", 31.2, "MB/s")   # as each figure is printed
    run.save()                                   # at the end: writes the JSON, prints the changes

Where the figures go: benchmarks/results/NAME/<UTC stamp>.json for every run (ignored by git, so a
machine keeps its own history), and benchmarks/results/NAME/reference.json, committed: the figures
the repository last recorded, so a fresh clone has something to compare against. A run compares
each figure with the newest earlier run of the same parameters (else the reference) and, when that
was not the reference, with the reference too. Promote a run to the reference with

    python benchmarks/results.py promote NAME [STAMP]     # newest run of NAME unless STAMP

Whether lower or higher is better comes from the unit (seconds, bytes: lower; MB/s, a rate: higher)
unless `better=` says. Runs on a loaded machine are noisy: the load average is kept with the figures.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(os.environ.get("WS_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
REFERENCE = "reference.json"
_HIGHER = ("/s",)  # rates; anything else (time, size, a ratio to a peer) is better lower
_active: Run | None = None


def higher_is_better(unit: str) -> bool:
    return unit.endswith(_HIGHER)


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return done.stdout.strip() or None


@dataclass
class Run:
    """The figures of one benchmark run, kept in the order they were added."""
    name: str
    params: dict = field(default_factory=dict)
    root: Path = RESULTS
    figures: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        global _active
        self.params = {k: (str(v) if isinstance(v, Path) else v) for k, v in self.params.items()}
        self.started = time.time()
        self.load_at_start = os.getloadavg()[0]
        _active = self

    def add(self, label: str, value: float, unit: str, better: str | None = None) -> float:
        """Record one figure (`better`: "lower" or "higher"; by default from the unit); returns it."""
        if better not in (None, "lower", "higher"):
            raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
        self.figures[label] = {"value": float(value), "unit": unit,
                               "better": better or ("higher" if higher_is_better(unit) else "lower")}
        return value

    @property
    def folder(self) -> Path:
        return self.root / self.name

    def previous(self) -> tuple[str, dict] | None:
        """(stamp, run) of the newest earlier run with the same parameters, else the reference."""
        if not self.folder.is_dir():
            return None
        for path in sorted(self.folder.glob("2*.json"), reverse=True):
            data = _read(path)
            if data is not None and data.get("params") == self.params:
                return path.stem, data
        return self.reference()

    def reference(self) -> tuple[str, dict] | None:
        data = _read(self.folder / REFERENCE)
        if data is None or data.get("params") != self.params:
            return None
        return f"reference {data.get('stamp', '?')}", data

    def save(self, out=None) -> Path:
        """Write this run beside the earlier ones; print each figure's change. Returns the file written."""
        out = out or sys.stdout
        previous, reference = self.previous(), self.reference()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.started))
        data = {"name": self.name, "stamp": stamp, "params": self.params, "commit": _commit(),
                "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                            "load_at_start": round(self.load_at_start, 2),
                            "load_at_end": round(os.getloadavg()[0], 2)},
                "seconds": round(time.time() - self.started, 1), "figures": self.figures}
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{stamp}.json"
        n = 1
        while path.exists():  # two runs in one second
            path, n = self.folder / f"{stamp}-{n}.json", n + 1
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
        print(f"\n{self.name}: {len(self.figures)} figures written to {path}", file=out)
        if previous is None:
            print("   no earlier run with these parameters to compare with", file=out)
        else:
            heads = [f"vs {previous[0]}"]
            if reference is not None and reference[0] != previous[0]:
                heads.append(f"vs {reference[0]}")
            print(f"   {'figure':<52} {'now':>14}   " + "   ".join(f"{h:<28}" for h in heads), file=out)
            for label, fig in self.figures.items():
                cells = [change(fig, previous[1].get("figures", {}).get(label))]
                if len(heads) > 1:
                    cells.append(change(fig, reference[1].get("figures", {}).get(label)))
                print(f"   {label:<52} {_value(fig):>14}   " + "   ".join(f"{c:<28}" for c in cells), file=out)
        return path


def change(now: dict, before: dict | None) -> str:
    """'+12.0% worse (was 1.20 s)' and the like; 'new' when there was no such figure."""
    if before is None or before.get("unit") != now["unit"]:
        return "new"
    old, new = before["value"], now["value"]
    if old == new:
        return "same"
    if old == 0:
        return f"was 0 {now['unit']}"
    delta = (new - old) / abs(old) * 100
    better = (delta > 0) == (now["better"] == "higher")
    verdict = "" if abs(delta) < 0.05 else (" better" if better else " WORSE")
    return f"{delta:+.1f}%{verdict} (was {_number(old)})"


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _value(fig: dict) -> str:
    return f"{_number(fig['value'])} {fig['unit']}"


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def add(label: str, value: float, unit: str, better: str | None = None) -> float:
    """Record a figure in the run under way (for helpers shared by several benchmarks); none: no-op."""
    if _active is not None:
        _active.add(label, value, unit, better)
    return value


def promote(name: str, stamp: str | None = None, root: Path = RESULTS) -> Path:
    folder = root / name
    runs = sorted(folder.glob("2*.json")) if folder.is_dir() else []
    if stamp:
        runs = [p for p in runs if p.stem == stamp]
    if not runs:
        raise SystemExit(f"no run of {name}{' at ' + stamp if stamp else ''} under {folder}")
    shutil.copyfile(runs[-1], folder / REFERENCE)
    return folder / REFERENCE


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3) or argv[0] != "promote":
        raise SystemExit("usage: python benchmarks/results.py promote NAME [STAMP]")
    print(f"reference is now {promote(*argv[1:])}")


if __name__ == "__main__":
    main(sys.argv[1:])
