#!/usr/bin/env python3
"""The report's first screen in a real browser: `ckptcheck report` on a real bench_engine run of catalogue cases
(tests/data/report/bench_catalogue_small.json: tiny and mlp-deep under every policy, trimmed) with its cases
repeated under other names so that the summary table has as many rows as ci/main's report (8 catalogue cases,
2 bench-large ones and 2 profiled models: 12), and twice a profiled model's chain costs (tests/data/costs/tiny.json);
then Debian's headless Chromium in a laptop's window (--window-size=1366,900) loads report.html and a script
measures the page: the summary figure and the summary table lie wholly within the first 900 px of the page, every
image has loaded (complete, naturalWidth > 0), and nothing was fetched from the network. The page's layout depends
on its width only (it sets no heights), which must be 1366 px; --dump-dom's window reports an inner height of
757 px (the screenshot is 1366 x 900), so positions are held to 900 px of the page, not to innerHeight.

How it measures: the page itself has no script (the report is static); the check loads a copy with one script
added at the end of <body> that, on the load event (images decoded), writes getBoundingClientRect() of the
figure and table, the viewport and every image's naturalWidth as JSON into a <pre> it appends after measuring;
`chromium --headless --dump-dom --virtual-time-budget` prints the DOM once the page is idle, and the JSON is read
back from it. It also writes a screenshot of the first screen (the unmodified page) when given --screenshot.

    report_browser_check.py CKPTCHECK [--screenshot PNG]

Exit 0 when every check holds, 1 otherwise (each failed check printed), 77 (CTest's skip) only when no Chromium
is installed (ci/setup installs the `chromium` package).
"""

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_harness import Checks  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
BENCH = os.path.join(SOURCE, "tests", "data", "report", "bench_catalogue_small.json")
COSTS = os.path.join(SOURCE, "tests", "data", "costs", "tiny.json")
WIDTH, HEIGHT = 1366, 900
MEASURED_ROWS = 10  # ci/main's report: 8 catalogue cases and 2 bench-large ones, then 2 profiled models
SKIP = 77

MEASURE = """<script>
window.addEventListener('load', function () {
  function box(el) {
    if (!el) return null;
    var r = el.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, width: r.width, height: r.height};
  }
  var images = Array.prototype.map.call(document.images, function (img) {
    return {alt: img.alt, complete: img.complete, naturalWidth: img.naturalWidth,
            width: img.getBoundingClientRect().width};
  });
  var out = {innerWidth: window.innerWidth, innerHeight: window.innerHeight,
             figure: box(document.querySelector('#fig-summary img')), table: box(document.getElementById('summary')),
             images: images,
             resources: performance.getEntriesByType('resource').map(function (e) { return e.name; })};
  var pre = document.createElement('pre');
  pre.id = 'ckpt-measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""

check = Checks("report_browser_check")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_args(exe, profile):
    # --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start; --disable-dev-shm-usage:
    # a container's /dev/shm is 64 MB, too small for Chromium's shared memory.
    return [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        "--virtual-time-budget=10000",
    ]


def measure(exe, page, tmp):
    with open(page, encoding="utf-8") as f:
        text = f.read()
    probe = os.path.join(os.path.dirname(page), "report-measured.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", MEASURE + "</body>"))
    r = subprocess.run(
        browser_args(exe, os.path.join(tmp, "profile")) + ["--dump-dom", "file://" + probe],
        capture_output=True,
        text=True,
        timeout=180,
    )
    m = re.search(r'<pre id="ckpt-measure">(.*?)</pre>', r.stdout, re.S)
    if not check(m is not None, f"chromium printed no measurement (exit {r.returncode}): {r.stderr[-2000:]}"):
        return None
    return json.loads(html.unescape(m.group(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckptcheck")
    ap.add_argument("--screenshot", help="write the first screen as PNG here")
    a = ap.parse_args()
    exe = chromium()
    if exe is None:
        print("report_browser_check: SKIPPED: no chromium on PATH (ci/setup installs Debian's `chromium`)")
        return SKIP
    return check.run("ckpt_report_browser_", lambda tmp: run(a, exe, tmp))


def many_cases(tmp):
    """The fixture's BM_Step runs with their cases repeated under other names, MEASURED_ROWS cases in all."""
    with open(BENCH, encoding="utf-8") as f:
        doc = json.load(f)
    steps = [b for b in doc["benchmarks"] if b["name"].startswith("BM_Step/")]
    cases = list(dict.fromkeys(b["name"].split("/")[1] for b in steps))
    out = []
    for i in range(MEASURED_ROWS):
        case = cases[i % len(cases)]
        name = case if i < len(cases) else f"{case}-{i // len(cases) + 1}"
        for b in steps:
            if b["name"].split("/")[1] == case:
                out.append(
                    dict(
                        b,
                        name=b["name"].replace(f"/{case}/", f"/{name}/", 1),
                        label=b.get("label", "").replace(case, name, 1),
                    )
                )
    path = os.path.join(tmp, "bench.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(doc, benchmarks=out), f)
    return path


def run(a, exe, tmp):
    out = os.path.join(tmp, "report")
    r = subprocess.run(
        [
            a.ckptcheck,
            "report",
            "--bench",
            many_cases(tmp),
            "--costs",
            COSTS,
            "--costs",
            COSTS,
            "--budget",
            "60000",
            "--out",
            out,
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not check(r.returncode == 0, f"ckptcheck report: exit {r.returncode}: {r.stderr}"):
        return
    page = os.path.join(out, "report.html")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    figures = text.count('src="data:image/svg+xml;base64,')
    table = text[text.find('<table id="summary">') :]
    rows = table[: table.find("</table>")].count("<tr>") - 1
    check(rows == MEASURED_ROWS + 2, f"the summary table has {rows} rows, not {MEASURED_ROWS + 2}")
    m = measure(exe, page, tmp)
    if m is None:
        return
    print(
        f"report_browser_check: viewport {m['innerWidth']}x{m['innerHeight']}, figure {m['figure']}, "
        f"table {m['table']}, {len(m['images'])} images"
    )
    check(m["innerWidth"] == WIDTH, f"viewport is {m['innerWidth']} px wide, not {WIDTH}")
    for what in ("figure", "table"):
        b = m[what]
        if check(b is not None, f"the summary {what} is not on the page"):
            check(b["height"] > 0 and b["width"] > 0, f"the summary {what} has no size: {b}")
            check(
                0 <= b["top"] and b["bottom"] <= HEIGHT, f"the summary {what} is not within the first {HEIGHT} px: {b}"
            )
    check(len(m["images"]) == figures and figures >= 3, f"{len(m['images'])} images on the page, {figures} figures")
    for img in m["images"]:
        check(img["complete"] and img["naturalWidth"] > 0 and img["width"] > 0, f"image did not load: {img}")
    check(all(u.startswith("data:") for u in m["resources"]), f"the page fetched resources: {m['resources']}")
    if a.screenshot:
        subprocess.run(
            browser_args(exe, os.path.join(tmp, "profile"))
            + [f"--screenshot={os.path.abspath(a.screenshot)}", "file://" + page],
            capture_output=True,
            text=True,
            timeout=180,
        )
        check(os.path.isfile(a.screenshot), f"no screenshot written to {a.screenshot}")


if __name__ == "__main__":
    sys.exit(main())
