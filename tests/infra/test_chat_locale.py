"""`spotter chat` tells the gateway the terminal's language (x-locale), or nothing for C/POSIX."""

from __future__ import annotations

import pytest

from spotter_cli.chat import terminal_locale


@pytest.mark.parametrize(("env", "expected"), [
    ({"LANG": "he_IL.UTF-8"}, "he-IL"),
    ({"LC_ALL": "ru_RU.UTF-8", "LANG": "en_US.UTF-8"}, "ru-RU"),
    ({"LC_MESSAGES": "de_DE@euro", "LANG": "en_US.UTF-8"}, "de-DE"),
    ({"LANG": "C.UTF-8"}, None),
    ({"LC_ALL": "POSIX"}, None),
    ({}, None),
])
def test_terminal_locale(env: dict[str, str], expected: str | None) -> None:
    assert terminal_locale(env) == expected
