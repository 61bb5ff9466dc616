"""The pip path end to end (CTest `wheel_install_pytest`): `pip install 'SOURCE[torch]'` into a fresh venv, then a
user's pytest file (user_tests.py) with one ckptcheck test per setup, under pytest-xdist and pytest's JUnit output:
examples/torch/mlp.py's `correct` must pass, its `rng_not_preserved` fail with ckptcheck's finding as the message.

The fresh venv is made from the project venv's base Python and installs ckptcheck from the source tree (the
scikit-build-core build: CMake configure, the CLI, the install). It does not download PyTorch again (4 GB with its
CUDA libraries): a .pth file puts the project venv's site-packages (ci/setup-python: torch 2.15.0, numpy 2.4.6,
pip, pytest, pytest-xdist) after its own, so the [torch] extra is already satisfied by the pinned versions and
pip installs only ckptcheck. The build's own requirements (scikit-build-core and its two, pinned in
pyproject.toml) come from the wheelhouse ci/setup-python fills; pip runs with --no-index, so nothing is fetched.
Prints the install time, the wheel's size and the pytest run's time.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def run(cmd, **kw):
    print("+ " + " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], text=True, **kw)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument(
        "--wheelhouse",
        type=Path,
        default=Path(os.environ.get("CKPT_WHEELHOUSE") or Path.home() / ".cache" / "ckptcheck" / "wheelhouse"),
    )
    ap.add_argument("--cxx", help="the compiler of the tree's build, so ccache serves the CLI's objects")
    a = ap.parse_args()
    if not list(a.wheelhouse.glob("scikit_build_core-*.whl")):
        fail("no scikit-build-core wheel in %s: run ci/setup-python" % a.wheelhouse)
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    venv = a.work / "venv"
    # Without a pip of its own: venv's bundled pip and setuptools (65.5) would shadow the project venv's, and
    # torch 2.15.0 requires setuptools >= 77 (the project venv's 84.2.1 satisfies it).
    run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    vpy = venv / "bin" / "python"
    site = Path(
        run(
            [vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, check=True
        ).stdout.strip()
    )
    (site / "ckpt_project_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")

    env = {k: v for k, v in os.environ.items() if k not in ("CKPT_PYTHON", "CKPT_SOURCE_DIR", "CKPT_BINARY")}
    env.update(CMAKE_BUILD_PARALLEL_LEVEL="2", PIP_DISABLE_PIP_VERSION_CHECK="1")
    if a.cxx:
        env["CXX"] = a.cxx  # scikit-build-core would take Python's own (g++), which ccache tells from c++
    pip = [vpy, "-m", "pip", "install", "--no-index", "--find-links", a.wheelhouse]
    t = time.monotonic()
    if run(pip + ["%s[torch]" % a.source], env=env).returncode != 0:
        fail("pip install '%s[torch]' failed" % a.source)
    install_s = time.monotonic() - t
    t = time.monotonic()
    if (
        run(
            [
                vpy,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-index",
                "--find-links",
                a.wheelhouse,
                "-w",
                a.work / "dist",
                a.source,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        ).returncode
        != 0
    ):
        fail("pip wheel failed")
    wheel_s = time.monotonic() - t
    wheels = list((a.work / "dist").glob("ckptcheck-*.whl"))
    if len(wheels) != 1:
        fail("expected one ckptcheck wheel, found %s" % wheels)

    cli = venv / "bin" / "ckptcheck"
    if not os.access(cli, os.X_OK) or run([cli, "info"], env=env, stdout=subprocess.DEVNULL).returncode != 0:
        fail("%s is not a working ckptcheck" % cli)
    data = run(
        [vpy, "-c", "import ckptcheck._cli as c; print(c.environment()['CKPT_SOURCE_DIR'])"],
        env=env,
        capture_output=True,
        check=True,
    ).stdout.strip()
    if not data.startswith(str(site)):
        fail("the CLI's Python files come from %s, not from the installed package under %s" % (data, site))

    shutil.copy(Path(__file__).with_name("user_tests.py"), a.work / "test_user_model.py")
    # A config of the user's own: without it pytest would take this tree's pyproject.toml (the work folder lies in
    # the build tree), whose pythonpath puts the package's source (python/) ahead of the installed package.
    (a.work / "pytest.ini").write_text("[pytest]\n")
    junit = a.work / "junit.xml"
    env["CKPT_EXAMPLES"] = str(a.source / "examples" / "torch")
    t = time.monotonic()
    p = run(
        [vpy, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "--junitxml", junit, "test_user_model.py"],
        cwd=a.work,
        env=env,
        capture_output=True,
    )
    pytest_s = time.monotonic() - t
    print(p.stdout[-6000:] + p.stderr[-2000:])
    if "rootdir: %s" % a.work not in p.stdout or "plugins: ckptcheck-" not in p.stdout:
        fail("pytest did not run as a user's suite (its own rootdir, the installed plugin)")
    if p.returncode != 1:
        fail("pytest exited %d, expected 1 (one test passes, one fails)" % p.returncode)
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    if set(cases) != {"test_correct_checkpointing", "test_rng_not_preserved"}:
        fail("JUnit lists %s" % sorted(cases))
    if list(cases["test_correct_checkpointing"]):
        fail("test_correct_checkpointing did not pass: %s" % ET.tostring(cases["test_correct_checkpointing"]))
    failure = cases["test_rng_not_preserved"].find("failure")
    if failure is None:
        fail("test_rng_not_preserved did not fail")
    text = (failure.get("message") or "") + (failure.text or "")
    for pattern in (
        r"mlp\.py:rng_not_preserved: finding",
        r"module '[\w.]+'",
        r"\d+ ulp",
        r"class rng-desync",
        r"replay: ckptcheck validate --adapter torch:module=\S+mlp\.py:rng_not_preserved",
    ):
        if not re.search(pattern, text):
            fail("the failure message lacks /%s/:\n%s" % (pattern, text))
    print(
        "wheel_install_pytest: pip install '[torch]' %.1f s, pip wheel (incremental) %.1f s, wheel %s %d bytes, "
        "pytest -n 2 (2 tests) %.1f s" % (install_s, wheel_s, wheels[0].name, wheels[0].stat().st_size, pytest_s)
    )


if __name__ == "__main__":
    main()
