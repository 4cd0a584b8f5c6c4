"""A tiny headless-Chromium driver over the Chrome DevTools Protocol, for the leaderboard's
browser test. No selenium/playwright (they download browser builds): Debian's chromium, started
with --remote-debugging-port=0, and one websocket (websocket-client) to its page target."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio")


def find_chromium() -> str | None:
    """Path of the chromium binary, or None."""
    for c in CHROMIUM_CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("chromium")


class Browser:
    """One headless Chromium with a fresh profile; `call` sends a CDP command to its page."""

    def __init__(self, binary: str, width: int = 1400, height: int = 900, timeout: float = 30.0):
        import websocket  # websocket-client

        self.profile = tempfile.mkdtemp(prefix="race-chromium-")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.timeout = timeout
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while True:
            text = port_file.read_text() if port_file.exists() else ""
            if "\n" in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = text.split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout))
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        self._id = 0
        self.events: list[dict] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params) -> dict:
        """Send one CDP command and return its result (events seen meanwhile go to .events)."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"page did not load: {url}")
            self.events.append(json.loads(self.ws.recv()))

    def eval(self, expression: str):
        """Evaluate JavaScript in the page and return its JSON value."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path: Path | None = None, clip: dict | None = None) -> bytes:
        """A PNG of the whole page, or of `clip` ({x, y, width, height} in CSS pixels of the
        page); saved to `path` when given."""
        kw = {"clip": {**clip, "scale": 1}} if clip else {}
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, **kw)
        data = base64.b64decode(r["data"])
        if path is not None:
            Path(path).write_bytes(data)
        return data

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows) of an 8-bit RGB or RGBA PNG, rows as raw bytes (RGB or RGBA per
    pixel): enough of a decoder to check a screenshot's pixels without an imaging library."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6) and body[12] == 0, "only 8-bit RGB(A), not interlaced"
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) if bpp == 3 else bytes(r[i] for i in range(len(r)) if i % 4 != 3) for r in rows]
