"""Text as PostgreSQL can store it: what switches report, made storable before it is written.

A ``text`` value in a UTF-8 database can hold any Unicode scalar value except NUL: the server
refuses U+0000 (SQLSTATE 22021, ``invalid byte sequence``), and a Python ``str`` holding a
lone surrogate (U+D800..U+DFFF, which is what ``surrogateescape`` decoding of bad bytes leaves)
cannot be encoded as UTF-8 at all (asyncpg raises ``UnicodeEncodeError`` on the client). One such
value in a batch fails the whole statement, so strings from devices (LLDP names and descriptions,
interface names) go through :func:`clean_text` first:

- **NUL is removed**, not replaced. Agents pad fixed-size buffers with it and C strings end with
  it (``"leaf-1\\x00"``); it carries no character, and removing it keeps the name equal to the one
  the inventory knows, where a U+FFFD in its place would never match.
- **a surrogate becomes U+FFFD** (REPLACEMENT CHARACTER), the usual mark for "something was here
  that could not be decoded", so the value keeps its length and shows that it was damaged.

Two different strings can clean to the same one (``"a\\x00b"`` and ``"ab"``): callers that key on
cleaned text must expect that.
"""

from __future__ import annotations

import re

#: Code points a UTF-8 encoder refuses: the surrogates (in a ``str`` each is one code point,
#: paired or not; a valid pair only exists in UTF-16).
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def is_clean(s: str) -> bool:
    """Whether PostgreSQL stores ``s`` as it is (no NUL, encodable as UTF-8)."""
    if "\x00" in s:
        return False
    return s.isascii() or _SURROGATE.search(s) is None


def clean_text(s: str) -> str:
    """``s`` without NULs and with each surrogate replaced by U+FFFD; ``s`` itself when clean."""
    if is_clean(s):
        return s
    return _SURROGATE.sub(REPLACEMENT, s.replace("\x00", ""))
