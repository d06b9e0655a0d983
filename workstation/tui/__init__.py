"""The Textual user interface: a thin layer of panes over the core.

Importing this package loads nothing heavy; `workstation.tui.app.WorkstationApp`
is the entry point.
"""
