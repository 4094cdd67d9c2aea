"""pgkick's Lambda handlers, importable from the installed package.

A team deploys them from its own project: `Handler: pgkick.aws.worker.handler`
and `Handler: pgkick.aws.reaper.handler`, with its task modules in PGKICK_TASKS.
Each handler parses, calls pgkick.worker.runtime, and returns a typed, JSON-plain answer;
importing one is the cold start (settings, tasks, kicker; the worker's, when Lambda
initialises it on demand, also opens the connection its first invocation takes).
They need Powertools: the `pgkick[lambda]` extra.
"""
