"""What model calls cost, read after the fact from a session's log or the episodic log; never calls a model.

    billing  a session's bill as its provider billed it (the status line, `session show`, the agent's budget)
    billed   `workstation report`'s billed columns: the agent and the naive baselines with an ideal prefix cache
    report   `workstation report`: a session's efficiency figures beside a naive baseline replay of its steps
    usage    `workstation reflect usage`: tokens and cost per session, day, month or model

Below the agent in the layers (its budget reads the bill): the report is handed the agent's tools
(agent.tools.meaning_of, agent.loop.base_tokens) by whoever asks for it.
"""
