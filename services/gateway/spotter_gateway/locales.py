"""The caller's reply locale (seed 000 "Locale"): `x-locale`, then `accept-language`, then the
user's stored locale, then `en`.

Headers are client input: anything that is not a well-formed BCP-47 tag is skipped and the next
source is asked, never an error. A kept tag is case-normalised (`en-us` → `en-US`, `zh-hant-tw` →
`zh-Hant-TW`) and shortened to fit `ai_conversations.locale` by dropping subtags from the end, as
RFC 4647 lookup does.
"""

from __future__ import annotations

import re

DEFAULT_LOCALE = "en"
# The width of users.locale, organizations.locale and ai_conversations.locale.
MAX_LOCALE_CHARS = 16
# A browser sends a handful of ranges; a header with hundreds is not worth parsing.
_MAX_RANGES = 32

# RFC 5646 langtag (grandfathered and whole-private-use tags are not reply locales).
_LANGTAG = re.compile(
    r"""^
    (?P<language>[a-z]{2,3}(?:-[a-z]{3}){0,3}|[a-z]{4,8})
    (?:-(?P<script>[a-z]{4}))?
    (?:-(?P<region>[a-z]{2}|[0-9]{3}))?
    (?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*
    (?:-[0-9a-wy-z](?:-[a-z0-9]{2,8})+)*
    (?:-x(?:-[a-z0-9]{1,8})+)?
    $""",
    re.VERBOSE,
)
_Q = re.compile(r"^q=(0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)$")


def normalize_tag(value: str | None) -> str | None:
    """A well-formed BCP-47 tag in canonical case and at most MAX_LOCALE_CHARS long, or None."""
    if not value:
        return None
    raw = value.strip().replace("_", "-").lower()
    if len(raw) > 255 or not raw.isascii():
        return None
    match = _LANGTAG.match(raw)
    if match is None:
        return None
    subtags = raw.split("-")
    # Canonical case (RFC 5646 §2.1.1): script in title case, region in upper case, the rest lower.
    language_parts = match["language"].count("-") + 1
    index = language_parts
    if match["script"]:
        subtags[index] = subtags[index].title()
        index += 1
    if match["region"]:
        subtags[index] = subtags[index].upper()
    return _truncate(subtags)


def _truncate(subtags: list[str]) -> str | None:
    if len("-".join(subtags)) > MAX_LOCALE_CHARS:
        # Extensions and private use go first and whole: half an extension means nothing.
        singleton = next((i for i, s in enumerate(subtags) if len(s) == 1), len(subtags))
        del subtags[max(singleton, 1):]
    while len("-".join(subtags)) > MAX_LOCALE_CHARS and len(subtags) > 1:
        subtags.pop()
    tag = "-".join(subtags)
    return tag if len(tag) <= MAX_LOCALE_CHARS else None


def best_accept_language(header: str | None) -> str | None:
    """The acceptable tag with the highest q-value (the first among equals), or None."""
    if not header:
        return None
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(header.split(",")[:_MAX_RANGES]):
        tag, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            if param.lower().startswith("q"):
                q = _Q.match(param.replace(" ", "").lower())
                # A malformed weight makes the range unusable rather than preferred.
                quality = float(q.group(1)) if q else 0.0
        if quality <= 0 or tag == "*":
            continue
        normalized = normalize_tag(tag)
        if normalized is not None:
            ranked.append((-quality, position, normalized))
    return min(ranked)[2] if ranked else None


def resolve_locale(x_locale: str | None, accept_language: str | None, stored: str | None) -> str:
    return (
        normalize_tag(x_locale)
        or best_accept_language(accept_language)
        or normalize_tag(stored)
        or DEFAULT_LOCALE
    )
