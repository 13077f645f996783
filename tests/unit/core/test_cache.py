"""core/cache.py: a Cache never holds more bytes than its budget, keeps no entry over an eighth
of it, and answers hits with what was put; text_bytes is at least what a str holds."""
import sys

from regionlab.emulator.core.cache import ENTRY_OVERHEAD_BYTES, Cache, text_bytes


def test_hits_answer_what_was_put_and_the_budget_is_never_passed():
    cache = Cache(64 * 1024)
    for i in range(10_000):
        key = f"k{i}" * (i % 50 + 1)
        assert cache.put(key, i, text_bytes(key)) == i
        assert cache.get(key) == i
        assert cache.nbytes <= cache.bytes_max
    assert 0 < len(cache) < 10_000


def test_an_entry_over_an_eighth_of_the_budget_is_not_kept():
    cache = Cache(8 * 1024)
    big = "x" * 1024
    assert cache.put(big, 1, text_bytes(big)) == 1 and cache.get(big) is None and cache.nbytes == 0
    small = "y" * (1024 - ENTRY_OVERHEAD_BYTES - 100)
    cache.put(small, 2, text_bytes(small) - 100)
    assert cache.get(small) == 2


def test_text_bytes_is_at_least_what_a_string_holds():
    for text in ("", "abc" * 1000, "é" * 1000, "€" * 1000, "😀" * 1000):
        assert text_bytes(text) >= sys.getsizeof(text), text[:3]
