"""Slash commands: what the user runs in the chat (`/map`, `/compact`, `/rewind`, `/commit`...), for every front end
(the app, `chat`, `exec`, ACP, headless runs).

    slash   run a command line for an agent and keep it in the session's log, /help, custom commands' help

Built on the agent's public interface (agent.loop.Agent, its tools and checkpoints), never on its internals: a
command is something the user asks of the agent, not a part of its loop.
"""
