"""The book as a site, in a browser: ``mkdocs build --strict``, served on 127.0.0.1, each page
loaded in headless Chromium (Debian's ``chromium``, driven by Playwright). Every page renders
without a console error or an uncaught exception, asks for nothing off this machine, every
image loads and every internal link resolves to a built page; the home page's screenshot is
kept (``build/site-screenshots/home.png``, the CI artefact). Skipped, with the reason, where
Chromium, Playwright or mkdocs is missing."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "build" / "site-screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not Path(CHROMIUM).is_file():
        pytest.skip("no Chromium (apt-get install chromium)")
    pytest.importorskip("playwright", reason="the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    handler = functools.partial(_Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield out, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


def _pages(out: Path) -> list[str]:
    return sorted(
        "/" + p.relative_to(out).as_posix().removesuffix("index.html")
        for p in out.rglob("index.html")
    )


def _resolves(out: Path, path: str) -> bool:
    target = out / unquote(path).lstrip("/")
    return target.is_file() or (target / "index.html").is_file()


def test_every_page_renders_with_its_images_and_links(site):
    from playwright.sync_api import sync_playwright

    out, base = site
    pages = _pages(out)
    assert "/" in pages and "/notebooks/vector-add-to-softmax/" in pages and len(pages) > 15
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        where = {"url": ""}
        page.on(
            "console",
            lambda m: m.type == "error" and problems.append(f"{where['url']}: console: {m.text}"),
        )
        page.on("pageerror", lambda e: problems.append(f"{where['url']}: exception: {e}"))

        def route(r):
            if urlparse(r.request.url).hostname == "127.0.0.1":
                r.continue_()
            else:
                problems.append(f"{where['url']}: asks for {r.request.url} (off this machine)")
                r.abort()

        page.route("**/*", route)
        for path in pages:
            where["url"] = path
            response = page.goto(base + path, wait_until="load")
            assert response is not None and response.ok, path
            broken = page.evaluate(
                "Array.from(document.images)"
                ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
            )
            problems += [f"{path}: image does not load: {src}" for src in broken]
            links = page.evaluate("Array.from(document.querySelectorAll('a[href]'), a => a.href)")
            for link in links:
                url = urlparse(link)
                internal = url.scheme.startswith("http") and url.netloc == urlparse(base).netloc
                if internal and not _resolves(out, url.path):
                    problems.append(f"{path}: link to {url.path} resolves to nothing")
            if path == "/":
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / "home.png"), full_page=True)
        browser.close()
    assert not problems, "\n".join(sorted(set(problems)))
    assert (SCREENSHOTS / "home.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_link_check_finds_a_missing_page(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text("<p>a</p>")
    (tmp_path / "x.png").write_bytes(b"")
    assert _resolves(tmp_path, "/a/") and _resolves(tmp_path, "/a")
    assert _resolves(tmp_path, "/x.png")
    assert not _resolves(tmp_path, "/b/") and not _resolves(tmp_path, "/a/missing.html")
    assert _pages(tmp_path) == ["/a/"]
