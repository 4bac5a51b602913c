"""Consonant skeletons: one spelling-free key per name word, the same whichever script wrote it.

"Saar Cohen", "סער כהן" and "Саар Коэн" all reduce to the keys ``sr`` and ``kn``: vowels (and the
letters that write them in Hebrew and Russian) are dropped, and consonants fall into coarse
classes that transliteration moves between (b/v/w, p/f/ph, k/c/q/ch/kh/ח/כ/х, s/z/sh/ש/ж, ts/tz/צ/ц).
A letter whose sound depends on the word (Hebrew ו is a vowel or v, Latin h is silent or ח, Latin
j is y or dzh) gives both readings, so one word has up to four keys.

Keys only ever match *across* scripts (a Hebrew query word against a Latin name): within one script
the trigram and substring matches are already better. Stored in a document's body as
``9<script><skeleton>9`` tokens (script: l, h or c), e.g. ``9lsr9 9lkn9``: skeletons have no
digits, so a token never matches inside another, and its trigrams ("9ls", "sr9") are rare enough
for the trigram index to find it fast.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

LATIN, HEBREW, CYRILLIC = "l", "h", "c"
SCRIPTS = (LATIN, HEBREW, CYRILLIC)
MIN_KEY = 2  # a one-consonant skeleton says nothing
MAX_READINGS = 4

# Each letter maps to its readings: one class letter, "" (silent), or several for an ambiguous one.
_HEBREW = {
    "א": ("",), "ע": ("",), "ה": ("",), "י": ("",), "ו": ("", "b"),
    "ב": ("b",), "ג": ("g",), "ד": ("d",), "ז": ("s",), "ח": ("k",), "ט": ("t",), "כ": ("k",), "ך": ("k",),
    "ל": ("l",), "מ": ("m",), "ם": ("m",), "נ": ("n",), "ן": ("n",), "ס": ("s",), "פ": ("p",), "ף": ("p",),
    "צ": ("c",), "ץ": ("c",), "ק": ("k",), "ר": ("r",), "ש": ("s",), "ת": ("t",),
}
# ג׳ (j: "קנג'י" Kenji), ז׳ (zh: "ז'ניה" Zhenya), צ׳ (ch: Cyrillic ч, but Latin "ch" is read k as in
# Chen/חן, so "צ'רלי" also keys as Charlie's krl).
_HEBREW_GERESH = {"ג": ("j",), "ז": ("s",), "צ": ("c", "k")}
_CYRILLIC = {
    "а": "", "е": "", "ё": "", "и": "", "й": "", "о": "", "у": "", "ы": "", "э": "", "ю": "", "я": "", "ь": "", "ъ": "",
    "б": "b", "в": "b", "г": "g", "д": "d", "ж": "s", "з": "s", "к": "k", "л": "l", "м": "m", "н": "n", "п": "p",
    "р": "r", "с": "s", "т": "t", "ф": "p", "х": "k", "ц": "c", "ч": "c", "ш": "s", "щ": "s",
}
# Latin digraphs first (longest first), then single letters.
_LATIN_DIGRAPHS = (
    ("sch", ("s",)), ("tch", ("c",)), ("ch", ("k",)), ("kh", ("k",)), ("sh", ("s",)), ("zh", ("s",)),
    ("ts", ("c",)), ("tz", ("c",)), ("th", ("t",)), ("ph", ("p",)), ("ck", ("k",)), ("qu", ("kb",)), ("dj", ("j",)),
)
_LATIN = {
    "a": ("",), "e": ("",), "i": ("",), "o": ("",), "u": ("",), "y": ("",), "h": ("", "k"), "j": ("j", ""),
    "b": ("b",), "v": ("b",), "w": ("b",), "f": ("p",), "p": ("p",), "g": ("g",), "d": ("d",), "t": ("t",),
    "k": ("k",), "q": ("k",), "l": ("l",), "m": ("m",), "n": ("n",), "r": ("r",), "s": ("s",), "z": ("s",),
    "x": ("ks",),
}
_GERESH = "׳'’`"
_WORDS = re.compile(r"[^\W\d_]+(?:['’׳][^\W\d_]+)*", re.UNICODE)


def script_of(word: str) -> str | None:
    """The script of a word's first letter: l, h, c, or None for any other."""
    for ch in word:
        if "a" <= ch.lower() <= "z" or "À" <= ch <= "ɏ":
            return LATIN
        if "\u0590" <= ch <= "\u05ff":
            return HEBREW
        if "\u0400" <= ch <= "\u04ff":
            return CYRILLIC
    return None


def _fold_latin(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))


def _readings(word: str, script: str) -> list[tuple[str, ...]]:
    """The word as a list of per-letter readings."""
    out: list[tuple[str, ...]] = []
    if script == HEBREW:
        for i, ch in enumerate(word):
            if ch in _GERESH:
                continue
            if ch in _HEBREW_GERESH and word[i + 1:i + 2] in tuple(_GERESH):
                out.append(_HEBREW_GERESH[ch])
            elif ch in _HEBREW:
                out.append(_HEBREW[ch])
        return out
    if script == CYRILLIC:
        low = word.lower().replace("дж", "\0")
        return [("j",) if ch == "\0" else (_CYRILLIC[ch],) for ch in low if ch == "\0" or ch in _CYRILLIC]
    low = _fold_latin(word)
    i = 0
    while i < len(low):
        for digraph, reading in _LATIN_DIGRAPHS:
            if low.startswith(digraph, i):
                out.append(reading)
                i += len(digraph)
                break
        else:
            ch = low[i]
            if ch == "c":  # soft before e, i, y ("Grace"), hard elsewhere ("Cohen")
                out.append(("s",) if low[i + 1:i + 2] in ("e", "i", "y") else ("k",))
            elif ch in _LATIN:
                out.append(_LATIN[ch])
            i += 1
    return out


def _collapse(sounds: str) -> str:
    return "".join(ch for ch, _ in itertools.groupby(sounds))


def skeletons(word: str) -> list[str]:
    """The word's consonant skeletons (up to MAX_READINGS, default reading first); [] when it has
    fewer than MIN_KEY consonants or is in no known script."""
    script = script_of(word)
    if script is None:
        return []
    readings = _readings(word, script)
    # Only the first two ambiguous letters branch; later ones take their first reading.
    branching = 0
    choices: list[tuple[str, ...]] = []
    for options in readings:
        if len(options) > 1 and branching < 2:
            branching += 1
            choices.append(options)
        else:
            choices.append(options[:1])
    found: list[str] = []
    for combo in itertools.product(*choices):
        key = _collapse("".join(combo))
        if len(key) >= MIN_KEY and key not in found:
            found.append(key)
        if len(found) >= MAX_READINGS:
            break
    return found


def token(script: str, key: str) -> str:
    return f"9{script}{key}9"


def name_keys(text: str) -> list[str]:
    """Tokens for a document's body: ``9<script><skeleton>9`` for every word of a name."""
    tokens: list[str] = []
    for word in _WORDS.findall(text):
        script = script_of(word)
        for key in skeletons(word):
            key_token = token(script, key)
            if key_token not in tokens:
                tokens.append(key_token)
    return tokens


def query_patterns(word: str) -> list[str]:
    """LIKE patterns that find names written in another script whose skeleton matches the word's."""
    script = script_of(word)
    if script is None:
        return []
    return [f"%{token(other, key)}%" for key in skeletons(word) for other in SCRIPTS if other != script]
