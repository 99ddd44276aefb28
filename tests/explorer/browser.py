"""Headless Debian chromium for the explorer tests (selenium, the system browser
and driver: nothing is downloaded).

Outside CI a machine without chromium / chromedriver / selenium skips the
browser tests with the reason; with ``CI`` set (``.ci/run`` sets it) they fail
instead, so CI can never pass them by skipping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str):
    if in_ci():
        pytest.fail(f"CI must run the browser tests, but {reason}", pytrace=False)
    pytest.skip(reason)


def artefact_dir() -> Path:
    """Where screenshots go: $FLOATFMT_ARTEFACTS, else tmp/artefacts/ in the repository."""
    d = Path(os.environ.get("FLOATFMT_ARTEFACTS", REPO / "tmp" / "artefacts")) / "explorer"
    d.mkdir(parents=True, exist_ok=True)
    return d


def start_chromium():
    """A selenium driver for headless chromium, with the browser console log kept."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("selenium is not installed (pip install -e '.[dev]')")
    binary = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and os.path.exists(p)), None)
    driver_path = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver")
                        if p and os.path.exists(p)), None)
    if binary is None or driver_path is None:
        unavailable("Debian's chromium and chromium-driver are not installed "
                    "(apt-get install -y chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="floatfmt-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", "--window-size=1300,1000", f"--user-data-dir={profile}"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_script_timeout(300)
    driver._floatfmt_profile = profile
    return driver


def stop_chromium(driver):
    try:
        driver.quit()
    finally:
        shutil.rmtree(getattr(driver, "_floatfmt_profile", ""), ignore_errors=True)
