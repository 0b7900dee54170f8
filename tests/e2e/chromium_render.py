#!/usr/bin/env python3
"""Renders a pystrobe flame graph SVG in headless Chromium, scripts and all.

The SVG's inline script marks the document with data-pystrobe-ready="1" once
it has run, so the dumped DOM tells whether the file works in a browser, not
only whether it parses.

As a script:
    python3 chromium_render.py FILE.svg [EXPECTED_NAME...]
exits 0 when the rendered DOM is marked ready and holds every expected frame
name, 1 when it does not, 2 on bad usage or when Chromium fails, and 77 (the
"skipped" code for ctest's SKIP_RETURN_CODE) when Chromium is not installed.

Standard library only. Set PYSTROBE_CHROMIUM to use another browser binary.
"""

import html
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

CHROMIUM = os.environ.get("PYSTROBE_CHROMIUM", "/usr/bin/chromium")
READY_MARKER = 'data-pystrobe-ready="1"'
EXIT_SKIP = 77

# Headless and hermetic: no sandbox (tests run as root), no network chatter,
# a throwaway profile, and virtual time so scripts finish before the dump.
_BASE_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=2000",
]


class ChromiumError(RuntimeError):
    """Chromium could not be run or did not produce what was asked."""


def _file_url(svg_path, query):
    url = pathlib.Path(svg_path).resolve().as_uri()
    return f"{url}?{query}" if query else url


def _run_chromium(extra_flags, url, timeout):
    if not os.access(CHROMIUM, os.X_OK):
        raise FileNotFoundError(f"{CHROMIUM} is not installed")
    profile_dir = tempfile.mkdtemp(prefix="pystrobe-chromium-")
    try:
        command = [CHROMIUM, *_BASE_FLAGS, f"--user-data-dir={profile_dir}", *extra_flags, url]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                    check=False)
        except subprocess.TimeoutExpired as e:
            raise ChromiumError(f"chromium timed out after {timeout}s on {url}") from e
        if result.returncode != 0:
            tail = "\n".join(result.stderr.splitlines()[-10:])
            raise ChromiumError(f"chromium exited with {result.returncode} on {url}:\n{tail}")
        return result.stdout
    finally:
        shutil.rmtree(profile_dir, ignore_errors=True)


def render_dom(svg_path, query="", timeout=60):
    """Returns the DOM of `svg_path` serialized after its scripts ran.

    `query` is appended to the file URL; "s=regex" makes the flame graph search
    for regex on load.
    """
    dom = _run_chromium(["--dump-dom"], _file_url(svg_path, query), timeout)
    if not dom.strip():
        raise ChromiumError(f"chromium dumped an empty DOM for {svg_path}")
    return dom


def render_url_dom(url, timeout=60):
    """The DOM of the page at `url` (e.g. the daemon's http:// pages) after its
    scripts ran."""
    dom = _run_chromium(["--dump-dom"], url, timeout)
    if not dom.strip():
        raise ChromiumError(f"chromium dumped an empty DOM for {url}")
    return dom


def render_url_screenshot(url, png_path, width=1200, height=800, timeout=60):
    """Writes a PNG of the page at `url` as Chromium draws it to `png_path`."""
    png_path = pathlib.Path(png_path).resolve()
    _run_chromium([f"--screenshot={png_path}", f"--window-size={width},{height}"], url, timeout)
    if not png_path.is_file() or png_path.stat().st_size == 0:
        raise ChromiumError(f"chromium wrote no screenshot to {png_path}")


def render_screenshot(svg_path, png_path, width=1200, height=800, query="", timeout=60):
    """Writes a PNG of `svg_path` as Chromium draws it to `png_path`."""
    png_path = pathlib.Path(png_path).resolve()
    _run_chromium([f"--screenshot={png_path}", f"--window-size={width},{height}"],
                  _file_url(svg_path, query), timeout)
    if not png_path.is_file() or png_path.stat().st_size == 0:
        raise ChromiumError(f"chromium wrote no screenshot to {png_path}")


def _spellings(name):
    """How `name` can appear in serialized markup, text or attribute."""
    return {
        name,
        html.escape(name, quote=False),
        html.escape(name, quote=True),
        html.escape(name, quote=False).replace('"', "&quot;").replace("'", "&apos;"),
    }


def missing_names(dom, names):
    """The names in `names` that appear nowhere in `dom`."""
    return [name for name in names if not any(s in dom for s in _spellings(name))]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    svg_path, expected = argv[1], argv[2:]
    try:
        dom = render_dom(svg_path)
    except FileNotFoundError as e:
        print(f"SKIP: {e}", file=sys.stderr)
        return EXIT_SKIP
    except ChromiumError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2

    ok = True
    if READY_MARKER not in dom:
        print(f"FAIL: {svg_path}: the flame graph script did not run ({READY_MARKER} missing)",
              file=sys.stderr)
        ok = False
    for name in missing_names(dom, expected):
        print(f"FAIL: {svg_path}: frame {name!r} not in the rendered DOM", file=sys.stderr)
        ok = False
    if ok:
        print(f"OK: {svg_path}: script ran, {len(expected)} expected frame(s) present")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
