"""The key names Playwright's keyboard knows (its US layout): what ``press``, ``keyboard_press``,
``keyboard_down`` and ``keyboard_up`` accept, checked before acting so that both backends refuse an
unknown key with the same line (a browser would say ``Unknown key``; the text backend has no keyboard).

A name is a key's code (``KeyA``, ``Digit1``, ``Numpad0``, ``ShiftLeft``), the character a key of
the main block produces (``a``, ``1``) or produces with Shift (``A``, ``!``), a modifier (``Shift``,
``Control``, ``Alt``, ``Meta``, ``ControlOrMeta``: Control on Linux), or Enter's ``\n`` and ``\r``.
tests/simulator/test_bgym_actions.py holds this list against the installed Playwright's.
"""

from __future__ import annotations

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_DIGIT_SHIFTED = ")!@#$%^&*("  # Shift+0 .. Shift+9

_CODES = (
    "Escape", *(f"F{i}" for i in range(1, 13)), "Backquote", *(f"Digit{i}" for i in range(10)), "Minus", "Equal",
    "Backslash", "Backspace", "Tab", *(f"Key{c.upper()}" for c in _LETTERS), "BracketLeft", "BracketRight",
    "CapsLock", "Semicolon", "Quote", "Enter", "ShiftLeft", "ShiftRight", "Comma", "Period", "Slash",
    "ControlLeft", "ControlRight", "MetaLeft", "MetaRight", "AltLeft", "AltRight", "AltGraph", "Space",
    "ContextMenu", "PrintScreen", "ScrollLock", "Pause", "PageUp", "PageDown", "Insert", "Delete", "Home", "End",
    "ArrowLeft", "ArrowUp", "ArrowRight", "ArrowDown", "AudioVolumeMute", "AudioVolumeDown", "AudioVolumeUp",
    "MediaTrackNext", "MediaTrackPrevious", "MediaPlayPause", "NumLock", "NumpadDivide", "NumpadMultiply",
    "NumpadSubtract", *(f"Numpad{i}" for i in range(10)), "NumpadAdd", "NumpadDecimal", "NumpadEnter",
)
# The one-character keys the main block's codes produce, unshifted and shifted, the modifiers' names
# (aliases of their left-hand codes) and Enter's characters.
_PRODUCED = (
    *_LETTERS, *_LETTERS.upper(), *"0123456789", *_DIGIT_SHIFTED, "`", "~", "-", "_", "=", "+", "\\", "|",
    "[", "{", "]", "}", ";", ":", "'", '"', ",", "<", ".", ">", "/", "?", " ",
    "Shift", "Control", "Alt", "Meta", "\n", "\r",
)
KEYS = frozenset(_CODES) | frozenset(_PRODUCED) | {"ControlOrMeta"}

__all__ = ["KEYS"]
