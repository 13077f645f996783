"""Proves docs/client.md's list of what the bundled client lacks from azure-cosmos cannot drift:
every public method, keyword and exported name of the installed SDK's main classes that ours does
not implement (tests/sdk_surface.py, by inspect.signature and the SDK's docstrings) is named in
the doc's "azure-cosmos surface" section, and nothing named there as missing exists in ours."""
import pathlib
import re

import sdk_surface

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "client.md"


def _listed() -> set[str]:
    text = DOC.read_text()
    section = text[text.index("## The azure-cosmos surface"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    missing = section[section.index("### Missing"):]
    return set(re.findall(r"`([^`]+)`", missing))


def _covered(name: str, listed: set[str]) -> bool:
    if name in listed:
        return True
    keyword = re.fullmatch(r"[\w.]+\((\w+)=\)", name)
    return keyword is not None and f"*({keyword.group(1)}=)" in listed


def test_every_missing_name_is_listed_in_the_doc():
    listed = _listed()
    unlisted = [name for name in sdk_surface.missing() if not _covered(name, listed)]
    assert unlisted == [], f"add these to docs/client.md's Missing list, or implement them: {unlisted}"


def test_nothing_listed_as_missing_is_there():
    gaps = set(sdk_surface.missing())
    names = [n for n in _listed() if re.fullmatch(r"\w+(\.\w+)+|\w+(\.\w+)*\(\w+=\)", n)]
    stale = [n for n in names if n not in gaps]
    assert stale == [], f"docs/client.md lists these as missing but the client has them: {stale}"
