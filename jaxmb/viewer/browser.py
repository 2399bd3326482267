"""A screenshot of an HTML document in headless Chromium, and the URLs the page asked for while it loaded.

Chromium runs headless with software WebGL (SwiftShader), so no display or GPU is needed, and is driven through its
DevTools protocol over a pipe (``--remote-debugging-pipe``: JSON messages ending in a NUL byte, commands on the
browser's file descriptor 3, answers on 4): open a blank page, record every request (``Network.requestWillBeSent``),
load the document, wait for it to draw, capture the viewport. With ``offline`` every host name fails to resolve, so
a page that needs the network shows it; `Capture.requests` lists what it asked for either way.
"""

import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars", "--mute-audio")
"""Headless, no sandbox (a container runs as root), WebGL in software, nothing fetched in the background."""

OFFLINE_FLAG = "--host-resolver-rules=MAP * ~NOTFOUND"


class Capture(NamedTuple):
    """What `screenshot` saw: ``png``, the file written; ``requests``, the URLs the page requested, in order
    (``data:`` URLs cut to their media type)."""

    png: Path
    requests: tuple


def find_chromium():
    """The path of a Chromium (or Chrome) executable on ``PATH``, else None."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def screenshot(document, png, *, size=(960, 720), ready=None, wait=3.0, chromium=None, offline=True,
               timeout=120.0) -> Capture:
    """Load the HTML file ``document`` in headless Chromium with a ``size`` (width, height) viewport and save the
    viewport as the PNG ``png`` (parent folders are made) once the page has drawn: after its load event, once the
    JavaScript expression ``ready`` (if given) is true, and ``wait`` seconds more (WebGL in software is slow).
    ``chromium``: the executable (default: `find_chromium`); ``offline``: block every host name (module
    docstring); ``timeout``: seconds that any one step, waiting for ``ready`` included, may take. Raises
    FileNotFoundError where there is no Chromium, RuntimeError where the browser fails, reports an error or
    ``ready`` stays false."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError(f"no Chromium found on PATH (looked for {', '.join(CHROMIUM_NAMES)}); on Debian "
                                "`apt-get install chromium`")
    url = Path(document).resolve().as_uri()
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    width, height = (int(x) for x in size)
    with tempfile.TemporaryDirectory(prefix="jaxmb-chromium-", ignore_cleanup_errors=True) as profile:
        args = [chromium, *CHROMIUM_FLAGS, *([OFFLINE_FLAG] if offline else []), f"--user-data-dir={profile}",
                f"--window-size={width},{height}", "--remote-debugging-pipe", "about:blank"]
        with DevTools(args, timeout) as tools:
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for method in ("Network.enable", "Page.enable"):
                tools.call(method, session=session)
            tools.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                              "deviceScaleFactor": 1, "mobile": False}, session)
            answer = tools.call("Page.navigate", {"url": url}, session)
            if answer.get("errorText"):
                raise RuntimeError(f"Chromium cannot open {url}: {answer['errorText']}")
            tools.wait_for("Page.loadEventFired", session)
            if ready is not None:
                tools.poll(ready, session)
            tools.pump(wait)
            data = tools.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
            png.write_bytes(base64.b64decode(data))
            requests = tuple(short(e["params"]["request"]["url"]) for e in tools.events
                             if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session)
    return Capture(png, requests)


def short(url) -> str:
    """``url``, a ``data:`` URL cut to its media type."""
    return url.split(",", 1)[0] + ",..." if url.startswith("data:") else url


def high_fd(fd) -> int:
    """A close-on-exec copy of ``fd`` numbered 10 or more (closing ``fd``), so that moving it to 3 or 4 in the
    browser cannot overwrite the other pipe end."""
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return copy


class DevTools:
    """A browser started with ``--remote-debugging-pipe`` (``args``) and its protocol connection, as a context
    manager that closes the browser on exit; ``timeout`` bounds each wait (seconds)."""

    def __init__(self, args, timeout):
        self.timeout, self.events, self.next_id = timeout, [], 0
        commands_read, self.commands = (high_fd(fd) for fd in os.pipe())
        self.answers, answers_write = (high_fd(fd) for fd in os.pipe())
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2),
                   (os.POSIX_SPAWN_DUP2, commands_read, 3), (os.POSIX_SPAWN_DUP2, answers_write, 4)]
        try:
            self.pid = os.posix_spawn(args[0], args, os.environ, file_actions=actions)
        finally:
            for fd in (null, commands_read, answers_write):
                os.close(fd)
        self.inbox = queue.Queue()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        """Put each message the browser sends on the inbox (None once it closes the pipe)."""
        buffer = bytearray()
        while chunk := os.read(self.answers, 1 << 16):
            buffer += chunk
            while (end := buffer.find(b"\0")) >= 0:
                self.inbox.put(json.loads(buffer[:end]))
                del buffer[:end + 1]
        self.inbox.put(None)

    def receive(self, deadline):
        """The next message before ``deadline`` (``time.monotonic``), None at the deadline."""
        try:
            message = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            return None
        if message is None:
            raise RuntimeError("Chromium closed its DevTools pipe (it exited)")
        return message

    def call(self, method, params=None, session=None):
        """Send the command ``method`` and return its result; events that arrive meanwhile go to ``events``."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while (answer := self.receive(deadline)) is not None:
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"Chromium: {method} failed: {answer['error'].get('message')}")
                return answer.get("result", {})
            self.events.append(answer)
        raise RuntimeError(f"Chromium did not answer {method} within {self.timeout} s")

    def wait_for(self, event, session):
        """Collect events until ``event`` arrives on ``session``."""
        deadline = time.monotonic() + self.timeout
        while (message := self.receive(deadline)) is not None:
            self.events.append(message)
            if message.get("method") == event and message.get("sessionId") == session:
                return
        raise RuntimeError(f"Chromium: no {event} within {self.timeout} s")

    def poll(self, expression, session, interval=0.25):
        """Evaluate the JavaScript ``expression`` in the page every ``interval`` seconds until it is true."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            if answer.get("result", {}).get("value") is True:
                return
            self.pump(interval)
        raise RuntimeError(f"Chromium: the page did not make {expression!r} true within {self.timeout} s")

    def pump(self, seconds):
        """Collect events for ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message = self.receive(deadline)
            if message is not None:
                self.events.append(message)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close")
        except (OSError, RuntimeError):
            pass  # it is killed below if it has not exited
        deadline = time.monotonic() + 10.0
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.05)
        os.close(self.commands)
        self.reader.join(timeout=10.0)  # it ends once every browser process has let go of the pipe
        if not self.reader.is_alive():
            os.close(self.answers)
