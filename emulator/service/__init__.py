"""The request layer, sans-I/O: what each request does, written once for every surface.

The HTTP gateway (emulator/gateway), direct mode and the simulator (emulator/sim) each turn what
their client sent into a Call and run the endpoint's Service (service.py) on it; the Reply that
comes back is turned into HTTP bytes, a direct frame, or a history entry. Everything between —
items, reads, batch, bulk, queries, the change feed, metadata, sessions, waits for
acknowledgement and catch-up, admission (request units and credits) and request faults — lives
here, one module per resource family or rule. Nothing here touches a socket, a loop or the wall
clock: a request waits only through the Waits its Service was given (waits.py).
"""
