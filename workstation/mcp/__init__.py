"""Model Context Protocol, both ways.

* `server`: `workstation mcp` serves workstation's own tools (the knowledge map, surgical reads and
  edits, memory, reflection) to other agents over stdio or streamable HTTP; every call is an
  operation in the episodic log and a record in a session log named for the client.
* `client`: the servers of `[mcp.servers.NAME]` offer their tools to workstation's agent as
  `NAME__tool`, asked for approval unless trusted.

The `mcp` package (the official SDK, ~1 s to import) is loaded only where one of these runs.
"""
