"""Text PostgreSQL cannot store, made storable: NUL removed, surrogates as U+FFFD (store/text.py)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from store.text import REPLACEMENT, clean_text, is_clean

#: Any code point, surrogates and NUL included (hypothesis leaves surrogates out of text() by
#: default, and draws them rarely even when allowed: the edges are mixed in).
ANY_TEXT = st.text(
    st.one_of(st.characters(codec=None, exclude_categories=()), st.sampled_from(["\x00", "\ud800", "\udc80", "\udfff"]))
)
#: Text PostgreSQL stores as it is.
CLEAN_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))


@given(ANY_TEXT)
@example("srv-g1-001\x00")
@example("a\x00b\udc80c")
@example("\ud83d\ude00")  # a surrogate *pair* as two code points is still not UTF-8 text
def test_anything_comes_out_storable(s: str) -> None:
    out = clean_text(s)
    assert "\x00" not in out
    out.encode("utf-8")  # no UnicodeEncodeError
    assert is_clean(out)
    assert clean_text(out) == out


@given(CLEAN_TEXT)
@example("")
@example("Ethernet1/1")
@example("spine-01 \u00e9\u4e2d\U0001f600")
def test_clean_text_is_unchanged(s: str) -> None:
    assert is_clean(s)
    assert clean_text(s) is s


@given(ANY_TEXT)
def test_only_nul_goes_and_only_surrogates_change(s: str) -> None:
    out = clean_text(s)
    kept = [c for c in s if c != "\x00"]
    assert len(out) == len(kept)
    for before, after in zip(kept, out, strict=True):
        assert after == (REPLACEMENT if 0xD800 <= ord(before) <= 0xDFFF else before)


def test_examples() -> None:
    assert clean_text("leaf-1\x00\x00") == "leaf-1"
    assert clean_text("nic\udc801") == "nic\ufffd1"
    assert not is_clean("x\x00") and not is_clean("\udc80") and is_clean("\ufffd")
