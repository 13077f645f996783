"""Proves docs/limits.md and core/limits.py cannot drift apart: every constant a table row names
in its "where" column exists in the limits module (or its re-exports), and its value is one of
the numbers the row states (64 KiB, 2 MiB + 512 KiB, 2^31-1 and 1,000,000 are read as numbers).
Also that the module holds values only, each named with its unit or count last."""
import re
from pathlib import Path

from regionlab.emulator.core import limits

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "limits.md"

UNITS = {"KiB": 1024, "Ki": 1024, "MiB": 1024 ** 2, "Mi": 1024 ** 2}
_QUANTITY = r"(\d[\d,]*(?:\.\d+)?)(?:\^(\d+))?(?:\s*(KiB|MiB|Ki|Mi)\b)?"
QUANTITY = re.compile(_QUANTITY)
EXPRESSION = re.compile(_QUANTITY + r"(?:\s*[+-]\s*" + _QUANTITY + r")+")
CONSTANT = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _value(match, at: int = 0) -> float:
    number, power, unit = match.group(at + 1, at + 2, at + 3)
    value = float(number.replace(",", ""))
    if power:
        value **= int(power)
    return value * UNITS.get(unit, 1)


def numbers_in(text: str) -> set[float]:
    """Every quantity the text states, and the value of every sum or difference of them."""
    found = {_value(m) for m in QUANTITY.finditer(text)}
    for m in EXPRESSION.finditer(text):
        total, rest = 0.0, m.group(0)
        sign = 1
        for part in re.split(r"\s*([+-])\s*", rest):
            if part in "+-":
                sign = 1 if part == "+" else -1
            else:
                total += sign * _value(QUANTITY.fullmatch(part))
        found.add(total)
    return found


def doc_rows() -> list[tuple[str, list[str], str]]:
    """(the row as written, the constants its last column names, the other columns' text)."""
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("| limit |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows.append((line, CONSTANT.findall(cells[-1]), " ".join(cells[:-1])))
    return rows


def test_the_parser_reads_the_forms_the_doc_uses():
    assert 2.5 * 1024 ** 2 in numbers_in("2 MiB + 512 KiB")
    assert 8 * 1024 ** 2 - 64 * 1024 in numbers_in("8 MiB - 64 KiB")
    assert {0, 2 ** 31 - 1} <= numbers_in("0 … 2^31-1")
    assert {400, 1000, 1_000_000} <= numbers_in("400 (1000) … 1,000,000 RU/s")
    assert 512 * 1024 in numbers_in("512 Ki characters")
    assert 64 * 1024 not in numbers_in("64 levels")


def test_every_number_the_doc_names_is_its_constants():
    checked = 0
    for line, names, text in doc_rows():
        stated = numbers_in(text)
        for name in names:
            assert hasattr(limits, name), f"docs/limits.md names {name}, which core/limits.py lacks: {line}"
            value = getattr(limits, name)
            assert value in stated, f"{name} is {value}, the row states {sorted(stated)}: {line}"
            checked += 1
    assert checked >= 40, f"only {checked} constants checked: the tables' where column changed shape?"


def test_the_module_holds_named_values_only():
    names = [n for n in vars(limits) if not n.startswith("_")]
    values = [n for n in names if n.isupper()]
    assert set(names) - set(values) <= {"annotations"}, set(names) - set(values)
    for name in values:
        assert type(getattr(limits, name)) in (int, float), name
        assert not re.search(r"_(BYTES|CHARS|ITEMS|ENTRIES|S|MS)_(MAX|MIN|DEFAULT)$", name), \
            f"{name}: the unit goes last (ITEM_MAX_BYTES, not ITEM_BYTES_MAX)"
