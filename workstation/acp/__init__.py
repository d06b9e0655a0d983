"""`workstation acp`: the agent served to editors over ACP (the Agent Client Protocol) on stdio.

    records  session log records as ACP session updates: one mapping for a live turn and a loaded
             session's history (messages, tool calls with their diffs, the plan, notices)
    server   the ACP agent: sessions are ordinary sessions of ours (workstation.sessions), each run by an
             agent.loop.Agent built as every other front end builds it; approval asks the editor
    wire     stdio framing hardened: a line that is not a JSON-RPC message gets one parse error and
             serving goes on

Nothing here imports textual, rich or click; the command line (cli/acp_cmds.py) starts it.
"""
