"""The client's policies as sans-IO state machines: each takes `now_ms` (or nothing) and inputs and
returns decisions. No sockets, no loop, no clock of their own, so tests drive them in virtual
time. The asyncio pipeline (client/aio/pipeline.py) owns the I/O and applies the decisions."""
