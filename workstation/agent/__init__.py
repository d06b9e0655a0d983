"""The coding agent: tools confined to the workspace, the tool-calling loop."""
