"""pgkick-dev: the development tooling around pgkick, never shipped to Lambda.

An embedded PostgreSQL, the local kicker (Lambda's asynchronous invoke stood in
by processes), the demo, the benchmark and its peers, the awake monitor and its
chart, and the tasks the demo and the tests run. It imports pgkick; pgkick never
imports it (it finds the local kicker and these commands by entry points).
"""
