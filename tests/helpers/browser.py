"""A headless Chromium driven over the DevTools protocol (websocket-client): load a page offline, collect
console errors, exceptions and network requests, evaluate script, take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import websocket

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-port=0",
]


class Browser:
    def __init__(self, timeout_s: float = 30.0):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise RuntimeError("chromium is not installed: run `make browser` (Debian's chromium package)")
        self.profile = tempfile.mkdtemp(prefix="tk-chromium-")
        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + timeout_s
        url = None
        while url is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            if "DevTools listening on " in line:
                url = line.split("DevTools listening on ", 1)[1].strip()
        if url is None:
            self.close()
            raise RuntimeError("chromium did not open its DevTools port")
        self.port = url.split(":")[2].split("/")[0]
        self.browser = websocket.create_connection(url, timeout=timeout_s, suppress_origin=True)
        self._id = 0

    def _call(self, ws, method: str, **params):
        self._id += 1
        ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            self.events.append(msg)

    def load(self, path: Path, width: int = 1400, timeout_s: float = 30.0) -> Page:
        target = self._call(self.browser, "Target.createTarget", url="about:blank")["targetId"]
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{self.port}/devtools/page/{target}", timeout=timeout_s, suppress_origin=True
        )
        self.events = []
        for domain in ("Runtime", "Log", "Page", "Network"):
            self._call(ws, f"{domain}.enable")
        self._call(ws, "Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)
        self._call(ws, "Page.navigate", url=Path(path).resolve().as_uri())
        page = Page(self, ws, width)
        deadline = time.monotonic() + timeout_s
        while page.eval("document.readyState") != "complete" or page.eval("document.body.dataset.rendered") != "1":
            if time.monotonic() > deadline or page.errors():
                break
            time.sleep(0.05)
        return page

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.browser.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, ws, width: int = 1400):
        self.b, self.ws, self.width = browser, ws, width

    def eval(self, expr: str):
        res = self.b._call(self.ws, "Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate {expr!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self) -> list[str]:
        out = []
        for e in self.b.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args"))[:500])
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", "")[:500])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.b.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, out: Path, max_height: int = 8000) -> Path:
        h = int(self.eval("document.documentElement.scrollHeight"))
        self.b._call(
            self.ws,
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=min(h, max_height),
            deviceScaleFactor=1,
            mobile=False,
        )
        png = self.b._call(self.ws, "Page.captureScreenshot", format="png")["data"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(png))
        return out

    def close(self) -> None:
        self.ws.close()
