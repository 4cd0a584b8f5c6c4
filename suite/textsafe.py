"""Text from inputs made safe for a terminal: no escape sequence of a hostile file reaches it.

A report's strings (ledger.path, run.id, notes) end up in findings, error lines and summaries.
An ESC (CSI/OSC: colours, cursor moves, window titles, hyperlinks, clipboard writes) or any other
C0/C1 control character in them is shown as a visible escape (`\\x1b`) instead of being sent.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls; and the Unicode bidi overrides that can
# make a terminal line read differently from its bytes.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text: str, *, newlines: bool = True) -> str:
    """`text` with control characters shown as escapes; with newlines False, newlines and tabs too
    (for values that must stay on one line)."""
    text = _CONTROL.sub(_visible, str(text))
    if not newlines:
        text = text.replace("\n", "\\n").replace("\t", "\\t")
    return text
