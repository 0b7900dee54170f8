"""Opens a speedscope file in speedscope itself (the app npm's `speedscope`
package ships, built) in headless Chromium, as a user would with
`speedscope FILE`.

The app and the file are served over HTTP on 127.0.0.1 from a thread
(speedscope fetches `#profileURL=...`, which a file:// page may not), and
Chromium loads `index.html#profileURL=/<file name>`. Once the profile is
imported, speedscope sets the page title to "<profile group name> -
speedscope" and draws its toolbar (profile name, "n/m" profile selector);
the flame chart itself is WebGL on a canvas, so frame names are not in the
DOM: a screenshot shows them.

Standard library only; Chromium from chromium_render.CHROMIUM.
"""

import fcntl
import functools
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.parse

import chromium_render

HERE = os.path.dirname(os.path.abspath(__file__))
JS_DIR = os.path.join(HERE, "js")
SPEEDSCOPE_APP = os.path.join(JS_DIR, "node_modules", "speedscope", "dist", "release")

# As chromium_render's flags, with more virtual time: speedscope fetches the
# profile and imports it after the page has loaded.
_FLAGS = [flag for flag in chromium_render._BASE_FLAGS
          if not flag.startswith("--virtual-time-budget")] + ["--virtual-time-budget=10000"]


def _node_modules_present():
    return os.path.isdir(os.path.join(JS_DIR, "node_modules", "pprof-format")) and \
        os.path.isdir(SPEEDSCOPE_APP)


def ensure_node_modules():
    """Installs tests/e2e/js's pinned packages (npm ci) when they are absent.

    e2e files run in parallel (ctest -j): a lock file makes the first one
    install while the others wait for it, rather than two `npm ci` in one
    directory."""
    if _node_modules_present():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise AssertionError("npm is not installed; tests/e2e/js needs `npm ci`")
    with open(os.path.join(JS_DIR, ".npm-ci.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _node_modules_present():
            return
        result = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR,
                                capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise AssertionError(f"`npm ci` in {JS_DIR} failed:\n{result.stdout}\n{result.stderr}")


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves speedscope's app, and the one profile file at /<its name>."""

    def __init__(self, *args, profile_path, **kwargs):
        self._profile_path = profile_path
        super().__init__(*args, directory=SPEEDSCOPE_APP, **kwargs)

    def translate_path(self, path):
        name = urllib.parse.unquote(urllib.parse.urlsplit(path).path).lstrip("/")
        if name == os.path.basename(self._profile_path):
            return self._profile_path
        return super().translate_path(path)

    def log_message(self, *args):
        pass


class _Server:
    def __init__(self, profile_path):
        handler = functools.partial(_Handler, profile_path=os.path.abspath(profile_path))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def url(self, profile_path):
        name = urllib.parse.quote(os.path.basename(profile_path))
        port = self.httpd.server_address[1]
        return f"http://127.0.0.1:{port}/index.html#profileURL=/{name}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def _run_chromium(extra_flags, profile_path, timeout):
    if not os.access(chromium_render.CHROMIUM, os.X_OK):
        raise AssertionError(f"{chromium_render.CHROMIUM} is not installed")
    ensure_node_modules()
    user_data = tempfile.mkdtemp(prefix="pystrobe-chromium-")
    try:
        with _Server(profile_path) as server:
            command = [chromium_render.CHROMIUM, *_FLAGS, f"--user-data-dir={user_data}",
                       *extra_flags, server.url(profile_path)]
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                    check=False)
        if result.returncode != 0:
            tail = "\n".join(result.stderr.splitlines()[-10:])
            raise AssertionError(f"chromium exited with {result.returncode}:\n{tail}")
        return result.stdout
    finally:
        shutil.rmtree(user_data, ignore_errors=True)


def render_dom(profile_path, timeout=90):
    """The DOM of speedscope after it opened `profile_path`."""
    return _run_chromium(["--dump-dom"], profile_path, timeout)


def render_screenshot(profile_path, png_path, width=1400, height=900, timeout=90):
    """A PNG of speedscope showing `profile_path`."""
    png_path = os.path.abspath(png_path)
    _run_chromium([f"--screenshot={png_path}", f"--window-size={width},{height}"], profile_path,
                  timeout)
    if not os.path.isfile(png_path) or os.path.getsize(png_path) == 0:
        raise AssertionError(f"chromium wrote no screenshot to {png_path}")
