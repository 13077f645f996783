"""What was computed from a client's text, kept by that text and bounded in bytes.

Theory of operation: clients send the same few partition keys, session tokens, dates and
paths again and again, so what is parsed from them is kept by their raw text. That text is the
client's: up to a request head (64 KiB) on the gateway or a string field (64 KiB) on the direct
port, so a cap on the number of entries bounds nothing (65,536 entries of 64 KiB are 4 GiB). A
`Cache` counts each entry's bytes as its caller sizes it (`text_bytes` for text: the key and
what was made of it) and is emptied when the next entry would pass its budget: emptying costs
nothing per entry and a working set refills at once, where evicting oldest-first would cost a
walk per insert. An entry over an eighth of the budget is not kept at all. Callers put an entry
only once the text was resolved (parsed without error), so a stream of bad input keeps nothing.

Invariant: `nbytes` is at least the sum of the sizes of the entries held (an entry put again
under its key counts twice until the next emptying), and never exceeds `bytes_max`.
"""
ENTRY_OVERHEAD_BYTES = 160                 # a dict slot and the key's and value's own objects
_ENTRY_SHARE = 8                           # an entry may take at most 1/8 of the budget
_STR_HEADER_BYTES = 80                     # a str object's header, compact or not


class Cache:
    __slots__ = ("get", "_entries", "nbytes", "bytes_max")

    def __init__(self, bytes_max: int):
        self._entries: dict = {}
        self.get = self._entries.get           # the hit path: one dict lookup
        self.nbytes = 0
        self.bytes_max = bytes_max

    def put(self, key, value, nbytes: int):
        """Keep value under key, as nbytes (what the key and value hold beyond their headers);
        returns value."""
        nbytes += ENTRY_OVERHEAD_BYTES
        if nbytes * _ENTRY_SHARE > self.bytes_max:
            return value
        if self.nbytes + nbytes > self.bytes_max:
            self.clear()
        self._entries[key] = value
        self.nbytes += nbytes
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def text_bytes(*texts: str) -> int:
    """At least what the strings hold in memory, objects included (a str that is not ASCII takes
    up to 4 bytes a character; isascii is a flag, not a scan)."""
    return sum(_STR_HEADER_BYTES + (len(t) if t.isascii() else 4 * len(t)) for t in texts)
