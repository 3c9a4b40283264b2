#!/usr/bin/env python3
"""Drives the Outbox admin dashboard (GET {prefix}/) in headless Chromium.

Usage: dashboard_test.py BASE_URL SCREENSHOT.png [--expect-pending N] [--prefix /admin]

BASE_URL is a running outbox (http://127.0.0.1:PORT) whose upstream is down and which already
holds queued operations. The script opens the dashboard, waits for the pending count to show
the queued number, checks the rows, clicks "Offline" and checks the API and the page report it,
deletes one row and checks it is gone from the page and the API, checks that a write queued
meanwhile appears through the page's event stream (the page counts the events it got, and polls
only every 30 s while the stream is live), adds a fault rule from the page's form and finds it in
the API, and saves a screenshot.
Exits 0 when every check passed, 1 with a message on stderr otherwise (2 for bad usage or a
missing browser). Every wait is bounded. Install the browser with install-browser.sh.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

# Selenium Manager would try to download a driver; everything here is local.
os.environ.setdefault("SE_OFFLINE", "true")

try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    print("dashboard_test.py: selenium is not installed (run Tests/Scripts/install-browser.sh)", file=sys.stderr)
    sys.exit(2)

# A bound, not a pause: every wait returns as soon as the page shows what it waits for. Headless
# Chromium beside the rest of the suite on two busy cores was seen to need more than 15 s.
WAIT_SECONDS = 60


class CheckFailed(Exception):
    """One of the dashboard's promises was not kept; the message says which."""


class AdminClient:
    """The admin API over plain HTTP, ignoring any *_proxy variables of the caller's shell."""

    def __init__(self, base, prefix):
        self.root = base.rstrip("/") + prefix
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post_write(self, base, path, body):
        """POSTs a JSON write through the proxy itself; returns (status, parsed JSON or None)."""
        request = urllib.request.Request(base.rstrip("/") + path, data=body.encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, None

    def get(self, path):
        """(status, parsed JSON or None) of GET {prefix}{path}."""
        try:
            with self.opener.open(self.root + path, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body or b"null")
            except ValueError:
                return error.code, None


def wait_until(description, predicate, timeout=WAIT_SECONDS, interval=0.1):
    """Polls `predicate` until it returns a truthy value (returned); CheckFailed on timeout.

    The dashboard and the API have no push channel, so polling with a deadline is the event.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
        except WebDriverException as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        if time.monotonic() >= deadline:
            raise CheckFailed(f"{description}: not within {timeout} s (last seen: {last!r})")
        time.sleep(interval)


def make_driver():
    """Headless Chromium driven by the distribution's chromedriver (no downloads)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        print("dashboard_test.py: chromium and chromedriver are needed (run Tests/Scripts/install-browser.sh)",
              file=sys.stderr)
        sys.exit(2)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-proxy-server", "--no-first-run", "--disable-extensions", "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    profile = tempfile.mkdtemp(prefix="outbox-dashboard-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(WAIT_SECONDS)
    driver.set_script_timeout(WAIT_SECONDS)
    return driver, profile


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).text.strip()


def click(driver, by, selector):
    """Finds and clicks an element, as one step that `wait_until` retries: the page re-renders
    its table every 2 s, so an element found a moment ago may be gone (stale) by the click."""
    driver.find_element(by, selector).click()
    return True


def rows_show(driver, operations):
    """True when every operation's row shows its method and URL."""
    for op in operations:
        row = driver.find_element(By.CSS_SELECTOR, f'#ops-body tr[data-op-id="{op["id"]}"]')
        if op["method"] not in row.text or op["url"] not in row.text:
            return False
    return True


def row_ids(driver):
    return [row.get_attribute("data-op-id") for row in driver.find_elements(By.CSS_SELECTOR, "#ops-body tr[data-op-id]")]


def action_failure(driver):
    """Raises at once when the page reports that its last action failed: no point waiting."""
    notice = text_of(driver, "notice")
    if "failed" in notice:
        raise CheckFailed(f"the page reports: {notice!r}")


def run_checks(driver, api, base, prefix, expected):
    page = base.rstrip("/") + prefix + "/"
    driver.get(page)

    # 1. The counts show what was queued.
    wait_until(f"#count-pending shows {expected}", lambda: text_of(driver, "count-pending") == str(expected))

    # 2. Every queued operation is listed, with its method and URL.
    status, listing = api.get("/operations?limit=100")
    if status != 200:
        raise CheckFailed(f"GET {prefix}/operations answered {status}: {listing}")
    api_ids = [op["id"] for op in listing["operations"]]
    wait_until("the table lists the API's operations in queue order", lambda: row_ids(driver) == api_ids)
    if len(api_ids) < expected:
        raise CheckFailed(f"expected at least {expected} operations, the API lists {len(api_ids)}")
    wait_until("every row shows its operation's method and URL", lambda: rows_show(driver, listing["operations"]))
    if text_of(driver, "banner"):
        raise CheckFailed(f"the page shows an error: {text_of(driver, 'banner')!r}")

    # 3. "Offline" switches the proxy (as the API reports it) and the page says so.
    wait_until("the Offline button can be clicked", lambda: click(driver, By.ID, "btn-offline"))
    wait_until("GET /status reports connectivity offline",
               lambda: action_failure(driver) or api.get("/status")[1].get("connectivity") == "offline")
    wait_until("the page shows mode offline",
               lambda: driver.find_element(By.ID, "connectivity").get_attribute("data-mode") == "offline")
    wait_until("the Offline button is disabled once offline",
               lambda: not driver.find_element(By.ID, "btn-offline").is_enabled())

    # 4. Delete removes one row from the page and the operation from the API.
    victim = api_ids[0]
    wait_until(f"the Delete button of row {victim} can be clicked",
               lambda: click(driver, By.CSS_SELECTOR, f'#ops-body tr[data-op-id="{victim}"] button[data-action="delete"]'))
    wait_until(f"row {victim} disappears", lambda: action_failure(driver) or victim not in row_ids(driver))
    gone_status, _ = api.get(f"/operations/{victim}")
    if gone_status != 404:
        raise CheckFailed(f"GET {prefix}/operations/{victim} after Delete answered {gone_status}, expected 404")
    remaining = [op_id for op_id in api_ids if op_id != victim]
    wait_until("the other rows stay listed", lambda: row_ids(driver) == remaining)
    wait_until(f"#count-pending shows {expected - 1}", lambda: text_of(driver, "count-pending") == str(expected - 1))
    if text_of(driver, "banner"):
        raise CheckFailed(f"the page shows an error: {text_of(driver, 'banner')!r}")

    # 5. A write queued now appears without a reload, through the event stream: the page is
    # live (it then polls only every 30 s) and its event count grows with the write's event.
    wait_until("the page's event stream is live", lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-live") == "true")
    before = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-events") or "0")
    status, accepted = api.post_write(base, "/items", '{"from":"dashboard test"}')
    if status != 202 or not accepted:
        raise CheckFailed(f"a write while offline answered {status}: {accepted}")
    wait_until(f"the new operation {accepted['id']} is listed", lambda: accepted["id"] in row_ids(driver), timeout=20)
    after = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-events") or "0")
    if after <= before:
        raise CheckFailed(f"the new row came without an event (events {before} -> {after}): the page polled")

    # 6. A fault rule added from the page's form is in the API and in the page's list.
    driver.find_element(By.ID, "fault-action").send_keys("status")
    status_input = driver.find_element(By.ID, "fault-status")
    status_input.clear()
    status_input.send_keys("418")
    driver.find_element(By.ID, "fault-times").send_keys("2")
    driver.find_element(By.ID, "fault-path").send_keys("/v1/orders")
    wait_until("the Add fault button can be clicked", lambda: click(driver, By.ID, "btn-fault-add"))

    def api_rule():
        code, doc = api.get("/faults")
        rules = (doc or {}).get("faults", []) if code == 200 else []
        return next((rule for rule in rules if rule.get("status") == 418), None)

    rule = wait_until("GET /faults lists the rule added from the page", lambda: action_failure(driver) or api_rule())
    if rule.get("action") != "status" or rule.get("times") != 2 or (rule.get("match") or {}).get("pathPrefix") != "/v1/orders":
        raise CheckFailed(f"the rule added from the page is not what the form said: {rule}")
    wait_until("the page lists the rule", lambda: bool(driver.find_elements(By.CSS_SELECTOR, f'#faults-body tr[data-fault-id="{rule["id"]}"]')))


def check_auth_required(driver, base, prefix, origin):
    """The origins list marks an origin whose replayed write was refused (an auth status)."""
    driver.get(base.rstrip("/") + prefix + "/")

    def marked():
        for item in driver.find_elements(By.CSS_SELECTOR, "#origins li"):
            if item.get_attribute("data-origin") == origin:
                return any("credentials refused" in pill.text for pill in item.find_elements(By.CSS_SELECTOR, ".auth-required"))
        return False

    wait_until(f"the origin {origin} shows its credentials refused", marked)


def page_text(driver, element_id):
    """The text of one element for a failure message, or a note why there is none."""
    try:
        return text_of(driver, element_id)
    except WebDriverException as error:
        return f"(unavailable: {type(error).__name__})"


def browser_console(driver):
    try:
        return "\n".join(f"  {entry.get('level')}: {entry.get('message')}" for entry in driver.get_log("browser"))
    except WebDriverException:
        return "  (unavailable)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the outbox, e.g. http://127.0.0.1:8080")
    parser.add_argument("screenshot", help="where to save a PNG of the final page")
    parser.add_argument("--prefix", default="/admin", help="admin.pathPrefix (default /admin)")
    parser.add_argument("--expect-pending", type=int, default=None,
                        help="how many pending operations the page must show (default: what the API reports)")
    parser.add_argument("--expect-auth-required", metavar="ORIGIN", default=None,
                        help="only check that the page says ORIGIN's credentials were refused (SPEC §10)")
    args = parser.parse_args()

    api = AdminClient(args.base, args.prefix)
    status, document = api.get("/status")
    if status != 200:
        print(f"dashboard_test.py: GET {args.prefix}/status answered {status}: {document}", file=sys.stderr)
        return 1
    expected = args.expect_pending if args.expect_pending is not None else document["counts"]["pending"]
    if expected < 1:
        print("dashboard_test.py: the outbox must hold at least one pending operation", file=sys.stderr)
        return 1

    driver, profile = make_driver()
    try:
        if args.expect_auth_required:
            check_auth_required(driver, args.base, args.prefix, args.expect_auth_required)
        else:
            run_checks(driver, api, args.base, args.prefix, expected)
        if not driver.save_screenshot(args.screenshot):
            raise CheckFailed(f"could not save the screenshot to {args.screenshot}")
        print(f"dashboard_test.py: all checks passed; screenshot at {args.screenshot}")
        return 0
    except (CheckFailed, WebDriverException, TimeoutException, KeyError) as error:
        failure_shot = os.path.splitext(args.screenshot)[0] + ".failure.png"
        try:
            driver.save_screenshot(failure_shot)
        except WebDriverException:
            failure_shot = "(none)"
        print(f"dashboard_test.py: FAILED: {type(error).__name__}: {error}\n"
              f"page banner: {page_text(driver, 'banner')!r}\npage notice: {page_text(driver, 'notice')!r}\n"
              f"screenshot: {failure_shot}\nbrowser console:\n{browser_console(driver)}", file=sys.stderr)
        return 1
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
