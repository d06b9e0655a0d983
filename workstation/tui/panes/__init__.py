"""One pane per module: chat (with its transcript), map, memory, timeline."""
